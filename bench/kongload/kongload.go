// Package kongload builds Kong-shaped OTLP traces for the peer benchmarks
// (bench/receiver, bench/distribution): one `kong` root SERVER span and one
// `kong.balancer` CLIENT child per request, with the attributes and
// resource of Kong ≥ 3.5's OpenTelemetry plugin (docs/gateways.md §1a). It is
// its own module with pdata as its only dependency, so each benchmark module
// can use it without taking in another's peers.
package kongload

import (
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Methods is the method of route i: Methods[i%len(Methods)].
var Methods = [...]string{"GET", "POST", "GET", "PUT", "GET", "DELETE", "GET", "PATCH"}

// Status draws 200 for 90 % of requests, else 201, 404, 429 or 503.
func Status(rng *rand.Rand) int64 {
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

// NewExport starts one export from a Kong node: its resource and scope, with
// room for spans; requests are added with AppendRequest.
func NewExport(spans int) (ptrace.Traces, ptrace.SpanSlice) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	// Kong's default resource (docs/gateways.md §1a).
	res := rs.Resource().Attributes()
	res.PutStr("service.name", "kong")
	res.PutStr("service.instance.id", "9343ac04-81d6-4ac8-bb5a-c7322c823368")
	res.PutStr("service.version", "3.9.1")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("kong-internal")
	ss.Scope().SetVersion("0.1.0")
	ss.Spans().EnsureCapacity(spans)
	return td, ss.Spans()
}

// AppendRequest appends one Kong ≥ 3.5 request: the root span with the
// attributes of §1a's dump (numbers as Kong's OTLP encoder sends them:
// http.status_code int, the balancer's port and try_count doubles) and one
// balancer try.
func AppendRequest(spans ptrace.SpanSlice, rng *rand.Rand, route int, start time.Time, total, upstream time.Duration) {
	var tid pcommon.TraceID
	var rootID, childID pcommon.SpanID
	fill(rng, tid[:])
	fill(rng, rootID[:])
	fill(rng, childID[:])
	var reqID [16]byte
	fill(rng, reqID[:])

	path := "/api/v1/r" + strconv.Itoa(route)
	method := Methods[route%len(Methods)]
	client := "10.1." + strconv.Itoa(rng.IntN(256)) + "." + strconv.Itoa(rng.IntN(256))

	root := spans.AppendEmpty()
	root.SetTraceID(tid)
	root.SetSpanID(rootID)
	root.SetName("kong")
	root.SetKind(ptrace.SpanKindServer)
	root.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	root.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(total)))
	a := root.Attributes()
	a.EnsureCapacity(10)
	a.PutStr("http.method", method)
	a.PutStr("http.url", "http://api.example.com"+path+"?page="+strconv.Itoa(rng.IntN(10)))
	a.PutStr("http.host", "api.example.com")
	a.PutStr("http.scheme", "http")
	a.PutStr("http.flavor", "1.1")
	a.PutStr("http.client_ip", client)
	a.PutStr("net.peer.ip", client)
	a.PutStr("kong.request.id", hex.EncodeToString(reqID[:]))
	a.PutInt("http.status_code", Status(rng))
	a.PutStr("http.route", path)

	upstreamHost := route % 100 // 100 upstream services
	child := spans.AppendEmpty()
	child.SetTraceID(tid)
	child.SetSpanID(childID)
	child.SetParentSpanID(rootID)
	child.SetName("kong.balancer")
	child.SetKind(ptrace.SpanKindClient)
	child.SetStartTimestamp(pcommon.NewTimestampFromTime(start.Add(total - upstream)))
	child.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(total)))
	c := child.Attributes()
	c.EnsureCapacity(4)
	c.PutDouble("try_count", 1)
	c.PutStr("net.peer.ip", "10.0."+strconv.Itoa(upstreamHost)+"."+strconv.Itoa(1+route%4))
	c.PutDouble("net.peer.port", 8080)
	c.PutStr("net.peer.name", "svc-"+strconv.Itoa(upstreamHost)+".internal")
}

func fill(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}
