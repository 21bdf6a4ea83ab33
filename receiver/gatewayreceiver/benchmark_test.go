package gatewayreceiver

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
)

// BenchmarkIngest counts exports of 100 Kong requests (root + balancer span
// each) spread over 50 label tuples: the receiver's per-span hot path.
// Compare runs with: go test -run '^$' -bench Ingest -count 6 ./receiver/gatewayreceiver | benchstat -
func BenchmarkIngest(b *testing.B) {
	r, err := newReceiver(createDefaultConfig(), receivertest.NewNopSettings(metadata.Type), consumertest.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	td := ptrace.NewTraces()
	for i := range 100 {
		kongExport("GET", "/route/"+strconv.Itoa(i%50), 200).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	}
	ctx := context.Background()
	r.ingest.traces(ctx, td) // first sighting of every tuple: the only allocating pass
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := testutil.ThreadCPU()
	for b.Loop() {
		r.ingest.traces(ctx, td)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*200), "ns/span")
	b.ReportMetric(float64(testutil.ThreadCPU()-cpu0)/float64(b.N*200), "cpu-ns/span")
}
