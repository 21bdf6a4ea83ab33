package gateway

import (
	"runtime"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

func TestTmpMem(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "kong")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("kong-internal")
	for i := 0; i < 150000; i++ {
		sp := ss.Spans().AppendEmpty()
		sp.SetName("kong")
		sp.SetKind(ptrace.SpanKindServer)
		sp.SetTraceID(pcommon.TraceID{byte(i), byte(i >> 8), byte(i >> 16), 1})
		sp.SetSpanID(pcommon.SpanID{byte(i), byte(i >> 8), byte(i >> 16), 1})
		sp.SetStartTimestamp(1e9)
		sp.SetEndTimestamp(2e9)
		sp.Attributes().PutStr("http.method", "GET")
		sp.Attributes().PutStr("http.route", "/big-pb")
		sp.Attributes().PutInt("http.status_code", 200)
		sp.Attributes().PutStr("http.url", "http://x/big-pb")
	}
	body, _ := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	t.Logf("body %d bytes", len(body))
	var c SpanCounter
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	n := 0
	_, counted, err := c.CountProto(body, func(*Event) { n++ })
	runtime.ReadMemStats(&m1)
	t.Logf("counted %d err %v; allocated %d MB, heap in use delta %d MB", counted, err, (m1.TotalAlloc-m0.TotalAlloc)>>20, (int64(m1.HeapInuse)-int64(m0.HeapInuse))>>20)
}
