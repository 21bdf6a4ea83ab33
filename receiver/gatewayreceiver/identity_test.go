package gatewayreceiver

import (
	"context"
	"os"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/confignet"
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
		c.Limits.MaxTuples = 1 // the second route overflows
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

// The default names the collector after its host and its listener's port:
// collectors of one host differ, with no setting, and the value is the same
// after a restart (a function of the config and the host name, never a
// random id); collector_name wins; a label that Prometheus would refuse is
// refused.
func TestCollectorIdentityDefaultsAndValidation(t *testing.T) {
	hostname = func() (string, error) { return "vm-1", nil }
	t.Cleanup(func() { hostname = os.Hostname })
	grpcOnly := func(c *Config) { c.Protocols.HTTP = configoptional.None[confighttp.ServerConfig]() }
	unix := func(c *Config) {
		c.Protocols.HTTP.Get().NetAddr = confignet.AddrConfig{Endpoint: "/run/otelcol/gw.sock", Transport: "unix"}
	}
	for _, tc := range []struct {
		name      string
		set       func(*Config)
		want      string
		wantWarns bool
	}{
		{"defaults: the http port", func(*Config) {}, "vm-1:14318", false},
		{"any address, same port", func(c *Config) { c.Protocols.HTTP.Get().NetAddr.Endpoint = "0.0.0.0:4000" }, "vm-1:4000", false},
		{"port only", func(c *Config) { c.Protocols.HTTP.Get().NetAddr.Endpoint = ":4001" }, "vm-1:4001", false},
		{"ipv6", func(c *Config) { c.Protocols.HTTP.Get().NetAddr.Endpoint = "[::]:4002" }, "vm-1:4002", false},
		{"grpc only: its port", func(c *Config) { grpcOnly(c); c.Protocols.GRPC.Get().NetAddr.Endpoint = "10.0.0.5:4317" }, "vm-1:4317", false},
		{"unix socket: its path", unix, "vm-1:/run/otelcol/gw.sock", false},
		{"port 0 changes at every start: host alone, warned", func(c *Config) { c.Protocols.HTTP.Get().NetAddr.Endpoint = "127.0.0.1:0" }, "vm-1", true},
		{"collector_name wins", func(c *Config) { c.CollectorName = "edge-a" }, "edge-a", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := createDefaultConfig()
			tc.set(c)
			id, warning, err := c.identity()
			if err != nil || id.Key != "collector" || id.Value != tc.want || (warning != "") != tc.wantWarns {
				t.Fatalf("identity %+v, warning %q, %v; want collector=%s (warning: %v)", id, warning, err, tc.want, tc.wantWarns)
			}
			if again, _, _ := c.identity(); again != id {
				t.Errorf("a second start is %+v, the first %+v", again, id)
			}
		})
	}
	// Two collectors of one host with the default config but their ports:
	// two values.
	a, b := createDefaultConfig(), createDefaultConfig()
	b.Protocols.HTTP.Get().NetAddr.Endpoint = "localhost:24318"
	ida, _, _ := a.identity()
	idb, _, _ := b.identity()
	if ida == idb {
		t.Errorf("two collectors on one host share %+v", ida)
	}

	c := createDefaultConfig()
	c.CollectorLabel = ""
	if id, _, _ := c.identity(); id.Key != "" {
		t.Errorf("collector_label \"\" still labels: %+v", id)
	}
	hostname = func() (string, error) { return "", nil }
	if _, _, err := createDefaultConfig().identity(); err == nil || !strings.Contains(err.Error(), "set collector_name") {
		t.Errorf("without a host name: %v, want an error naming collector_name", err)
	}
	for _, bad := range []string{"1x", "a-b", "__c"} {
		c := createDefaultConfig()
		c.CollectorLabel = bad
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "collector_label") {
			t.Errorf("collector_label %q: %v", bad, err)
		}
	}
}
