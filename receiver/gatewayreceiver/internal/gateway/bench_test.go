package gateway

import (
	"encoding/hex"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
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

// kongLoadExport builds one export of n requests exactly as bench/kongload
// (NewExport + AppendRequest) does, the workload of bench/receiver and
// bench/distribution: Kong's resource (3 attributes) and scope (name and
// version), a root with 10 attributes and a balancer child with 4 (numbers
// as Kong sends them). kongload is its own module, so its builder is
// repeated here rather than imported into the main module.
func kongLoadExport(rng *rand.Rand, n, offset int) ptrace.Traces {
	methods := [...]string{"GET", "POST", "GET", "PUT", "GET", "DELETE", "GET", "PATCH"}
	status := func() int64 {
		switch n := rng.IntN(100); {
		case n < 90:
			return 200
		case n < 94:
			return 201
		case n < 97:
			return 404
		case n < 99:
			return 429
		default:
			return 503
		}
	}
	fill := func(b []byte) {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	}
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	res := rs.Resource().Attributes()
	res.PutStr("service.name", "kong")
	res.PutStr("service.instance.id", "9343ac04-81d6-4ac8-bb5a-c7322c823368")
	res.PutStr("service.version", "3.9.1")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("kong-internal")
	ss.Scope().SetVersion("0.1.0")
	spans := ss.Spans()
	for i := range n {
		route := (offset + i) * 7919 % 10_000
		total := pcommon.Timestamp(2+rng.IntN(300)) * 1e6
		upstream := total - 1e6
		start := t0 + pcommon.Timestamp(i)*1e5

		var tid pcommon.TraceID
		var rootID, childID pcommon.SpanID
		var reqID [16]byte
		fill(tid[:])
		fill(rootID[:])
		fill(childID[:])
		fill(reqID[:])
		path := "/api/v1/r" + strconv.Itoa(route)
		client := "10.1." + strconv.Itoa(rng.IntN(256)) + "." + strconv.Itoa(rng.IntN(256))

		root := spans.AppendEmpty()
		root.SetTraceID(tid)
		root.SetSpanID(rootID)
		root.SetName("kong")
		root.SetKind(ptrace.SpanKindServer)
		root.SetStartTimestamp(start)
		root.SetEndTimestamp(start + total)
		a := root.Attributes()
		a.PutStr("http.method", methods[route%len(methods)])
		a.PutStr("http.url", "http://api.example.com"+path+"?page="+strconv.Itoa(rng.IntN(10)))
		a.PutStr("http.host", "api.example.com")
		a.PutStr("http.scheme", "http")
		a.PutStr("http.flavor", "1.1")
		a.PutStr("http.client_ip", client)
		a.PutStr("net.peer.ip", client)
		a.PutStr("kong.request.id", hex.EncodeToString(reqID[:]))
		a.PutInt("http.status_code", status())
		a.PutStr("http.route", path)

		host := route % 100
		child := spans.AppendEmpty()
		child.SetTraceID(tid)
		child.SetSpanID(childID)
		child.SetParentSpanID(rootID)
		child.SetName("kong.balancer")
		child.SetKind(ptrace.SpanKindClient)
		child.SetStartTimestamp(start + total - upstream)
		child.SetEndTimestamp(start + total)
		c := child.Attributes()
		c.PutDouble("try_count", 1)
		c.PutStr("net.peer.ip", "10.0."+strconv.Itoa(host)+"."+strconv.Itoa(1+route%4))
		c.PutDouble("net.peer.port", 8080)
		c.PutStr("net.peer.name", "svc-"+strconv.Itoa(host)+".internal")
	}
	return td
}

// BenchmarkCountProto is the OTLP/HTTP protobuf path alone (CountProto:
// decoding, reduction and mapping, without HTTP or aggregation) on
// bench/distribution's exports: 256 Kong requests (512 spans) each. One op
// is one export.
//
//	go test -run '^$' -bench CountProto -count 6 ./receiver/gatewayreceiver/internal/gateway
func BenchmarkCountProto(b *testing.B) {
	const requests = 256
	rng := rand.New(rand.NewPCG(1, 2))
	bodies := make([][]byte, 16)
	for i := range bodies {
		body, err := ptraceotlp.NewExportRequestFromTraces(kongLoadExport(rng, requests, i*requests)).MarshalProto()
		if err != nil {
			b.Fatal(err)
		}
		bodies[i] = body
	}
	var c SpanCounter
	n, i := 0, 0
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	for b.Loop() {
		_, counted, err := c.CountProto(bodies[i], func(*Event) {})
		if err != nil {
			b.Fatal(err)
		}
		n += counted
		if i++; i == len(bodies) {
			i = 0
		}
	}
	if n != b.N*requests {
		b.Fatalf("counted %d requests, want %d", n, b.N*requests)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2*requests), "ns/span")
	b.ReportMetric(float64(threadCPU()-cpu0)/float64(b.N*2*requests), "cpu-ns/span")
}
