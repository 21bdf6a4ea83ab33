package gateway

import (
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// kongExport builds one Kong 3.x-shaped export of n requests: a `kong`
// SERVER root and a `kong.balancer` CLIENT child each, routes spread over
// 10,000 paths (the shape of bench/receiver's workload).
func kongExport(n, offset int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "kong")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(kongScope)
	for i := range n {
		id := pcommon.SpanID{byte(i), byte(i >> 8), 1}
		root := ss.Spans().AppendEmpty()
		root.SetName("kong")
		root.SetKind(ptrace.SpanKindServer)
		root.SetSpanID(id)
		root.SetStartTimestamp(t0)
		root.SetEndTimestamp(t0 + ms(12))
		a := root.Attributes()
		a.PutStr("http.method", "GET")
		a.PutStr("http.route", "/route-"+strconv.Itoa((offset+i)%10000))
		a.PutInt("http.status_code", 200)
		child := ss.Spans().AppendEmpty()
		child.SetName("kong.balancer")
		child.SetKind(ptrace.SpanKindClient)
		child.SetSpanID(pcommon.SpanID{byte(i), byte(i >> 8), 2})
		child.SetParentSpanID(id)
		child.SetStartTimestamp(t0 + ms(1))
		child.SetEndTimestamp(t0 + ms(11))
		c := child.Attributes()
		c.PutStr("net.peer.ip", "10.0.0.1")
		c.PutDouble("net.peer.port", 8080)
		c.PutStr("net.peer.name", "upstream-1")
		c.PutDouble("try_count", 1)
	}
	return td
}

// BenchmarkMap is the span mapping alone (SpanCounter over pdata, without
// HTTP, unmarshalling or aggregation) on Kong-shaped exports of 256
// requests (512 spans). One op is one export.
//
//	go test -run '^$' -bench Map -count 6 ./receiver/gatewayreceiver/internal/gateway
func BenchmarkMap(b *testing.B) {
	const requests = 256
	exports := make([]ptrace.Traces, 16)
	for i := range exports {
		exports[i] = kongExport(requests, i*requests)
	}
	var c SpanCounter
	n, i := 0, 0
	b.ReportAllocs()
	for b.Loop() {
		_, counted := c.Count(exports[i], func(*Event) {})
		n += counted
		if i++; i == len(exports) {
			i = 0
		}
	}
	if n != b.N*requests {
		b.Fatalf("counted %d requests, want %d", n, b.N*requests)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2*requests), "ns/span")
}
