// Package receiver measures the gateway receiver's span path against
// ptraceotlp unmarshalling alone and against the contrib path otlpreceiver →
// spanmetricsconnector (issue 5, "Benchmarks"). It is its own module so the
// contrib components never enter the main module.
package receiver

import (
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/otelgateway/otelgateway/bench/kongload"
)

// Workload shape (issue 5): Kong-shaped OTLP/HTTP protobuf exports of
// SpansPerExport spans, a `kong` root SERVER span and a `kong.balancer`
// CLIENT child per request, over Routes routes.
const (
	SpansPerExport    = 512
	RequestsPerExport = SpansPerExport / 2
	Routes            = 10_000
	// Exports is how many distinct bodies one round posts: 64 × 256 =
	// 16,384 requests, drawn uniformly from the routes (~80 % of them per
	// round, every one over the warm-up and measured rounds).
	Exports = 64
)

// Workload is the same bytes for every contender.
type Workload struct {
	Bodies [][]byte // OTLP/HTTP protobuf ExportTraceServiceRequest
	// Requests is the number of root spans over all bodies.
	Requests int
	// Bytes is the total size of the bodies.
	Bytes int
}

// NewWorkload builds Exports bodies with a fixed seed, so every run and every
// contender sees the same bytes.
func NewWorkload() *Workload {
	rng := rand.New(rand.NewPCG(5, 2026))
	w := &Workload{}
	base := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	for e := range Exports {
		td, spans := kongload.NewExport(SpansPerExport)
		for i := range RequestsPerExport {
			req := e*RequestsPerExport + i
			route := rng.IntN(Routes)
			start := base.Add(time.Duration(req) * time.Millisecond)
			total := time.Duration(2+rng.IntN(300)) * time.Millisecond
			upstream := total - time.Duration(1+rng.IntN(2))*time.Millisecond
			kongload.AppendRequest(spans, rng, route, start, total, upstream)
		}
		w.Requests += RequestsPerExport
		body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			panic(err) // constant, well-formed input
		}
		w.Bodies = append(w.Bodies, body)
		w.Bytes += len(body)
	}
	return w
}
