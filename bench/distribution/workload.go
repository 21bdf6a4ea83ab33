// Package distribution compares whole collector distributions run as
// processes: otelcol-gateway (this repository) against the collector a user
// would otherwise build from contrib parts (otlp receiver → spanmetrics
// connector → deltatocumulative processor → prometheus exporter), fed the same
// Kong spans over loopback at stepped rates (issue 15). It is its own module:
// it starts built binaries and needs nothing of either in its go.mod.
package distribution

import (
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/otelgateway/otelgateway/bench/kongload"
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

// NewWorkload builds Exports bodies with a fixed seed, so every run and every
// contender sees the same bytes.
func NewWorkload() *Workload {
	rng := rand.New(rand.NewPCG(15, 2026))
	w := &Workload{}
	base := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	perm := rng.Perm(Routes)
	for e := range Exports {
		td, spans := kongload.NewExport(SpansPerExport)
		for i := range RequestsPerExport {
			req := e*RequestsPerExport + i
			route := rng.IntN(Routes)
			if req < Routes {
				route = perm[req]
			}
			start := base.Add(time.Duration(req) * time.Millisecond)
			total := time.Duration(2+rng.IntN(300)) * time.Millisecond
			upstream := total - time.Duration(1+rng.IntN(2))*time.Millisecond
			kongload.AppendRequest(spans, rng, route, start, total, upstream)
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
