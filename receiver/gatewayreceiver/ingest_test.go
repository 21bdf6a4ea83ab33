package gatewayreceiver

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func TestConcurrentExportsAreExact(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) { c.FlushInterval = 5 * time.Millisecond })
	const workers, each = 4, 200
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				h.r.ingest.traces(context.Background(), kongExport("GET", "/a", 200))
			}
		})
	}
	wg.Wait()
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertCounts(t, countsOf(t, sink.AllMetrics()), map[string]int64{"kong GET /a 200": workers * each})
}

// TestResourceNamesTheGatewayNotTheNode: counts carry the gateway's
// service.name and service.namespace, never the reporting node's
// service.instance.id, so two nodes of one gateway sum into one series.
func TestResourceNamesTheGatewayNotTheNode(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, nil)
	for _, node := range []string{"node-a", "node-b"} {
		td := kongExport("GET", "/a", 200)
		res := td.ResourceSpans().At(0).Resource().Attributes()
		res.PutStr("service.namespace", "edge")
		res.PutStr("service.instance.id", node)
		h.r.ingest.traces(context.Background(), td)
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	all := sink.AllMetrics()
	if len(all) != 1 || all[0].ResourceMetrics().Len() != 1 {
		t.Fatalf("got %d batches, want one batch with one resource", len(all))
	}
	rm := all[0].ResourceMetrics().At(0)
	got := rm.Resource().Attributes().AsRaw()
	want := map[string]any{"service.name": "kong", "service.namespace": "edge"}
	if len(got) != len(want) || got["service.name"] != want["service.name"] || got["service.namespace"] != want["service.namespace"] {
		t.Errorf("resource = %v, want %v", got, want)
	}
	if v := rm.ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0).IntValue(); v != 2 {
		t.Errorf("count = %d, want 2 (both nodes in one series)", v)
	}
}

// A request of more events than eventChunk hands them to the aggregator in
// chunks as they are read (a request holds 1k events at a time, not all):
// every one is counted once, over the direct protobuf path, pdata's JSON
// path and an http-log batch, which still answers how many it accepted.
func TestLargeRequestsAreCountedInChunks(t *testing.T) {
	const n = 2*eventChunk + 100
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, nil)
	td := ptrace.NewTraces()
	for i := range n {
		kongExport("GET", "/r/"+strconv.Itoa(i%7), 200).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	}
	if code, body := post(t, h.httpAddr, pbContentType, protoBody(t, td)); code != http.StatusOK {
		t.Fatalf("protobuf: %d %s", code, body)
	}
	if code, body := post(t, h.httpAddr, jsonContentType, jsonBody(t, td)); code != http.StatusOK {
		t.Fatalf("JSON: %d %s", code, body)
	}
	var logs strings.Builder
	logs.WriteString("[")
	for i := range n {
		if i > 0 {
			logs.WriteString(",")
		}
		logs.WriteString(`{"request":{"method":"GET"},"response":{"status":200},"route":{"name":"/r/` + strconv.Itoa(i%7) + `"},"service":{"name":"kong"}}`)
	}
	logs.WriteString("]")
	resp, err := http.Post("http://"+h.httpAddr+"/kong/http-log", jsonContentType, strings.NewReader(logs.String()))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if want := `{"accepted":` + strconv.Itoa(n) + `,"rejected":0}`; resp.StatusCode != http.StatusOK || string(answer) != want {
		t.Fatalf("http-log: %d %s, want 200 %s", resp.StatusCode, answer, want)
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for _, c := range countsOf(t, sink.AllMetrics()) {
		total += c
	}
	if total != 3*n {
		t.Errorf("%d requests counted, want %d (three requests of %d)", total, 3*n, n)
	}
}
