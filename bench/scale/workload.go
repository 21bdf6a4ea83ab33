// Package scale measures the gateway receiver → cumulative processor →
// promstream exporter pipeline, built by the components' factories in one
// process as the distribution builds them, at 10k, 100k and 1M label tuples
// (issue 28 item 2): memory above the idle process, ingest per span, scrape
// per line (plain and gzip), flush time, and the longest ingest pause during
// a flush and during a scrape. The same child process serves the cores
// comparison (issue 28 item 6): the receiver alone under GOMAXPROCS=1 and 2.
//
// The collector runs in a child process (this test binary re-executed), so
// its RSS and CPU time (from /proc) hold nothing of the load generator's
// bodies or HTTP client. It is its own module, as the other bench/* dirs,
// so nothing of the harness enters the main module.
package scale

import (
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/otelgateway/otelgateway/bench/kongload"
)

// Workload shape: Kong-shaped OTLP/HTTP protobuf exports (bench/kongload: a
// `kong` root SERVER span and a `kong.balancer` CLIENT child per request) of
// RequestsPerExport requests.
const (
	RequestsPerExport = 256
	SpansPerRequest   = 2
	SpansPerExport    = RequestsPerExport * SpansPerRequest
)

// Statuses are the statuses of each route: a route's tuples (method and
// route fixed per route). Two statuses a route is what the kong profile's
// latency histograms (per route, not per status) share between tuples.
var Statuses = [...]int64{200, 404}

// ProbeRoute is the route of the probe's requests (the pause measurement):
// its series are left out of the exact count.
const ProbeRoute = "/probe"

// Workload is one pass over every tuple: Tuples requests, one per tuple,
// in a shuffled order (fixed seed), so every pass touches every tuple once.
type Workload struct {
	Tuples int
	Bodies [][]byte // OTLP/HTTP protobuf ExportTraceServiceRequest
	Bytes  int
}

// Requests is the number of requests (root spans) in one pass.
func (w *Workload) Requests() int { return w.Tuples }

// Spans is the number of spans in one pass.
func (w *Workload) Spans() int { return w.Tuples * SpansPerRequest }

// NewWorkload builds the bodies of one pass over tuples tuples (tuples/2
// routes × Statuses).
func NewWorkload(tuples int) *Workload {
	rng := rand.New(rand.NewPCG(28, 2026))
	w := &Workload{Tuples: tuples}
	base := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	perm := rng.Perm(tuples)
	for first := 0; first < tuples; first += RequestsPerExport {
		n := min(RequestsPerExport, tuples-first)
		td, spans := kongload.NewExport(n * SpansPerRequest)
		for i := range n {
			t := perm[first+i]
			appendRequest(spans, rng, t/len(Statuses), Statuses[t%len(Statuses)], base.Add(time.Duration(first+i)*time.Microsecond))
		}
		w.add(td)
	}
	return w
}

// appendRequest appends kongload's request on route with status.
func appendRequest(spans ptrace.SpanSlice, rng *rand.Rand, route int, status int64, start time.Time) {
	total := time.Duration(2+rng.IntN(300)) * time.Millisecond
	upstream := total - time.Duration(1+rng.IntN(2))*time.Millisecond
	kongload.AppendRequest(spans, rng, route, start, total, upstream)
	spans.At(spans.Len()-SpansPerRequest).Attributes().PutInt("http.status_code", status)
}

func (w *Workload) add(td ptrace.Traces) {
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		panic(err) // constant, well-formed input
	}
	w.Bodies = append(w.Bodies, body)
	w.Bytes += len(body)
}

// ProbeBody is one request on ProbeRoute: what the probe posts, over and
// over, to see how long ingest stalls.
func ProbeBody() []byte {
	rng := rand.New(rand.NewPCG(28, 6))
	td, spans := kongload.NewExport(SpansPerRequest)
	appendRequest(spans, rng, 0, 200, time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC))
	root := spans.At(0).Attributes()
	root.PutStr("http.route", ProbeRoute)
	root.PutStr("http.url", "http://api.example.com"+ProbeRoute)
	w := &Workload{}
	w.add(td)
	return w.Bodies[0]
}
