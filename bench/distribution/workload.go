// Package distribution compares whole collector distributions run as
// processes: otelcol-gateway (this repository) against the collector a user
// would otherwise build from contrib parts (otlp receiver → spanmetrics
// connector → deltatocumulative processor → prometheus exporter), fed the same
// Kong spans over loopback at stepped rates (issue 15). It is its own module:
// it starts built binaries and needs nothing of either in its go.mod.
package distribution

import (
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// Workload shape: the same as bench/receiver's (Kong-shaped OTLP/HTTP
// protobuf exports of SpansPerExport spans, a `kong` root SERVER span and a
// `kong.balancer` CLIENT child per request, over Routes routes).
const (
	SpansPerExport    = 512
	RequestsPerExport = SpansPerExport / 2
	Routes            = 10_000
	// Exports is how many distinct bodies one round posts: 64 × 256 =
	// 16,384 requests. The sender cycles through them, so the label tuples
	// are those of the first round: every one of the 10,000 routes (the
	// first 10,000 requests take each route once, in a shuffled order, the
	// rest draw uniformly) under one method each and 1 to 5 statuses.
	Exports = 64
)

// Workload is the same bytes for every contender.
type Workload struct {
	Bodies [][]byte // OTLP/HTTP protobuf ExportTraceServiceRequest
	Bytes  int      // total size of the bodies
}

var methods = [...]string{"GET", "POST", "GET", "PUT", "GET", "DELETE", "GET", "PATCH"}

// status draws 200 for 90 % of requests, else 201, 404, 429 or 503.
func status(rng *rand.Rand) int64 {
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

// NewWorkload builds Exports bodies with a fixed seed, so every run and every
// contender sees the same bytes.
func NewWorkload() *Workload {
	rng := rand.New(rand.NewPCG(15, 2026))
	w := &Workload{}
	base := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	perm := rng.Perm(Routes)
	for e := range Exports {
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
		ss.Spans().EnsureCapacity(SpansPerExport)
		for i := range RequestsPerExport {
			req := e*RequestsPerExport + i
			route := rng.IntN(Routes)
			if req < Routes {
				route = perm[req]
			}
			start := base.Add(time.Duration(req) * time.Millisecond)
			total := time.Duration(2+rng.IntN(300)) * time.Millisecond
			upstream := total - time.Duration(1+rng.IntN(2))*time.Millisecond
			appendRequest(ss.Spans(), rng, route, start, total, upstream)
		}
		body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			panic(err) // constant, well-formed input
		}
		w.Bodies = append(w.Bodies, body)
		w.Bytes += len(body)
	}
	return w
}

// appendRequest appends one Kong ≥ 3.5 request: the root span with the
// attributes of §1a's dump (numbers as Kong's OTLP encoder sends them:
// http.status_code int, the balancer's port and try_count doubles) and one
// balancer try.
func appendRequest(spans ptrace.SpanSlice, rng *rand.Rand, route int, start time.Time, total, upstream time.Duration) {
	var tid pcommon.TraceID
	var rootID, childID pcommon.SpanID
	fill(rng, tid[:])
	fill(rng, rootID[:])
	fill(rng, childID[:])
	var reqID [16]byte
	fill(rng, reqID[:])

	path := "/api/v1/r" + strconv.Itoa(route)
	method := methods[route%len(methods)]
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
	a.PutInt("http.status_code", status(rng))
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
