package gatewayreceiver

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// TestReusedBodiesDoNotLeakIntoSeries: events decoded straight from OTLP
// protobuf borrow the request's pooled buffer, which the next request
// overwrites. Exports of equal size but different routes, over HTTP and gRPC,
// must each keep their own series: the aggregator copies what it keeps.
func TestReusedBodiesDoNotLeakIntoSeries(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, nil)
	client := ptraceotlp.NewGRPCClient(dialGRPC(t, h.grpcAddr))
	want := map[string]int64{}
	for i := range 40 {
		route := fmt.Sprintf("/route-%03d", i) // same length: same body size, same buffer
		td := kongExport("GET", route, 200)
		if i%2 == 0 {
			if code, body := post(t, h.httpAddr, pbContentType, protoBody(t, td)); code != http.StatusOK {
				t.Fatalf("%d %s", code, body)
			}
		} else if _, err := client.Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(td)); err != nil {
			t.Fatal(err)
		}
		want["kong GET "+route+" 200"] = 1
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertCounts(t, countsOf(t, sink.AllMetrics()), want)
}
