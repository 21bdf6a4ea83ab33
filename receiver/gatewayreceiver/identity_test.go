package gatewayreceiver

import (
	"context"
	"os"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/health"
)

// Every point the receiver emits, traffic (held and overflow tuples) and
// health alike, names the collector that made it, and so does every gateway
// resource (target_info): N collectors' series never collide, whether
// Prometheus pulls them or they are pushed.
func TestCollectorIdentityOnEveryPoint(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) {
		c.CollectorLabel, c.CollectorName = "collector", "col-7"
		c.MaxSeries = 1 // the second route overflows
		c.Health = configoptional.Some(defaultHealthConfig())
	})
	ctx := context.Background()
	_ = h.r.ingest.traces(ctx, kongExport("GET", "/a", 200))
	_ = h.r.ingest.traces(ctx, kongExport("GET", "/b", 200))
	if code, body := postHealth(t, "http://"+h.httpAddr+health.DefaultPushPath, jsonContentType,
		`{"gateway":"kong-7","kind":"kong","upstream":"u","target":"t:80","address":"10.0.0.1:80","state":"healthy"}`); code != 200 {
		t.Fatalf("push: %d %s", code, body)
	}
	waitFor(t, func() bool { return len(sink.AllMetrics()) > 0 })
	h.r.flusher.flush(ctx)
	points, resources, overflow := 0, 0, 0
	for _, md := range sink.AllMetrics() {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			resources++
			if v, ok := rm.Resource().Attributes().Get("collector"); !ok || v.Str() != "col-7" {
				t.Errorf("resource %v without collector=col-7", rm.Resource().Attributes().AsRaw())
			}
			forEachAttrs(rm, func(name string, a map[string]any) {
				points++
				if a["collector"] != "col-7" {
					t.Errorf("%s point %v without collector=col-7", name, a)
				}
				if a["otel.metric.overflow"] == true {
					overflow++
				}
			})
		}
	}
	if points == 0 || resources < 2 || overflow == 0 {
		t.Fatalf("points %d, resources %d, overflow points %d: want traffic, overflow and health", points, resources, overflow)
	}
}

// forEachAttrs calls fn with every data point's attributes of rm.
func forEachAttrs(rm pmetric.ResourceMetrics, fn func(string, map[string]any)) {
	for j := 0; j < rm.ScopeMetrics().Len(); j++ {
		ms := rm.ScopeMetrics().At(j).Metrics()
		for k := 0; k < ms.Len(); k++ {
			m := ms.At(k)
			switch m.Type() {
			case pmetric.MetricTypeSum:
				for d := 0; d < m.Sum().DataPoints().Len(); d++ {
					fn(m.Name(), m.Sum().DataPoints().At(d).Attributes().AsRaw())
				}
			case pmetric.MetricTypeGauge:
				for d := 0; d < m.Gauge().DataPoints().Len(); d++ {
					fn(m.Name(), m.Gauge().DataPoints().At(d).Attributes().AsRaw())
				}
			case pmetric.MetricTypeHistogram:
				for d := 0; d < m.Histogram().DataPoints().Len(); d++ {
					fn(m.Name(), m.Histogram().DataPoints().At(d).Attributes().AsRaw())
				}
			}
		}
	}
}

// The default names the collector after its host (stable across restarts,
// unlike a random id); a label that Prometheus would refuse is refused.
func TestCollectorIdentityDefaultsAndValidation(t *testing.T) {
	c := createDefaultConfig()
	id, err := c.identity()
	host, _ := os.Hostname()
	if err != nil || id.Key != "collector" || id.Value != host {
		t.Fatalf("default identity %+v, %v; want collector=%s", id, err, host)
	}
	c.CollectorLabel = ""
	if id, _ := c.identity(); id.Key != "" {
		t.Errorf("collector_label \"\" still labels: %+v", id)
	}
	for _, bad := range []string{"1x", "a-b", "__c"} {
		c := createDefaultConfig()
		c.CollectorLabel = bad
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "collector_label") {
			t.Errorf("collector_label %q: %v", bad, err)
		}
	}
}
