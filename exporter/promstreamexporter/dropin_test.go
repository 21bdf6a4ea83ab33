package promstreamexporter

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/featuregate"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/metadata"
)

// exporterWith builds an exporter from cfg and returns it with its logs.
func exporterWith(t *testing.T, cfg *Config) (*promStreamExporter, *observer.ObservedLogs) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	set := exportertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	e, err := newExporter(cfg, set)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.telemetry.Shutdown)
	return e, logs
}

// contribGate registers one of the contrib exporter's feature gates, as a
// binary that also holds that exporter would, and sets it for the test.
func contribGate(t *testing.T, id string, stage featuregate.Stage, enabled bool) {
	t.Helper()
	reg := featuregate.GlobalRegistry()
	found := false
	reg.VisitAll(func(g *featuregate.Gate) { found = found || g.ID() == id })
	if !found {
		reg.MustRegister(id, stage)
	}
	var was bool
	reg.VisitAll(func(g *featuregate.Gate) {
		if g.ID() == id {
			was = g.IsEnabled()
		}
	})
	if err := reg.Set(id, enabled); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Set(id, was) })
}

// TestTranslationStrategyPrecedence: the contrib exporter's precedence
// (collector.go getTranslationConfiguration): translation_strategy when set;
// else UnderscoreEscapingWithSuffixes while the DisableAddMetricSuffixes
// gate is on (its default: a binary without the contrib exporter cannot turn
// it off); else add_metric_suffixes.
func TestTranslationStrategyPrecedence(t *testing.T) {
	cases := []struct {
		strategy    string
		addSuffixes bool
		gate        *bool // nil: not registered
		want        string
	}{
		{"", true, nil, underscoreEscapingWithSuffixes},
		{"", false, nil, underscoreEscapingWithSuffixes}, // ignored: the gate's default is on
		{"", false, new(true), underscoreEscapingWithSuffixes},
		{"", false, new(false), underscoreEscapingWithoutSuffixes},
		{"", true, new(false), underscoreEscapingWithSuffixes},
		{noTranslation, false, new(false), noTranslation},
		{noUTF8EscapingWithSuffixes, false, nil, noUTF8EscapingWithSuffixes},
		{underscoreEscapingWithSuffixes, false, new(false), underscoreEscapingWithSuffixes},
	}
	for _, c := range cases {
		t.Run("", func(t *testing.T) {
			switch {
			case c.gate != nil:
				contribGate(t, gateDisableAddMetricSuffixes, featuregate.StageBeta, *c.gate)
			case gateEnabled(gateDisableAddMetricSuffixes, true) != true:
				// Registered by an earlier case (a registry keeps its
				// gates): put it back to its default, on, as unregistered.
				contribGate(t, gateDisableAddMetricSuffixes, featuregate.StageBeta, true)
			}
			cfg := createDefaultConfig()
			cfg.TranslationStrategy, cfg.AddMetricSuffixes = c.strategy, c.addSuffixes
			if got := cfg.translationStrategy(); got != c.want {
				t.Fatalf("strategy %q, add_metric_suffixes %v, gate %v: got %s, want %s", c.strategy, c.addSuffixes, c.gate, got, c.want)
			}
			_, logs := exporterWith(t, cfg)
			ignored := logs.FilterMessageSnippet("add_metric_suffixes is deprecated and ignored").Len() == 1
			if want := !c.addSuffixes && c.want == underscoreEscapingWithSuffixes; ignored != want {
				t.Fatalf("warned that add_metric_suffixes is ignored: %v, want %v", ignored, want)
			}
		})
	}
}

// TestAddMetricSuffixesFalse: with the gate off, add_metric_suffixes: false
// names metrics without unit and type suffixes.
func TestAddMetricSuffixesFalse(t *testing.T) {
	contribGate(t, gateDisableAddMetricSuffixes, featuregate.StageBeta, false)
	cfg := createDefaultConfig()
	cfg.AddMetricSuffixes = false
	e, _ := exporterWith(t, cfg)
	if err := e.consumeMetrics(context.Background(), kindsMetrics()); err != nil {
		t.Fatal(err)
	}
	body := get(t, e, metricsPath, nil).Body.String()
	for _, want := range []string{"\nkong_http_requests{", "\nkong_request_latency_bucket{", "\nkong_memory_workers_lua_vms{"} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in\n%s", want, body)
		}
	}
}

// TestEnableOpenMetrics: absent, promstream negotiates OpenMetrics (unlike
// the contrib exporter, whose default is false); true negotiates it; false
// never serves it, whatever the scraper prefers.
func TestEnableOpenMetrics(t *testing.T) {
	const (
		om          = "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=allow-utf-8"
		om001       = "application/openmetrics-text; version=0.0.1; charset=utf-8; escaping=underscores"
		text100     = "text/plain; version=1.0.0; charset=utf-8; escaping=allow-utf-8"
		text004     = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"
		proto       = "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited; escaping=underscores"
		onlyOM      = "application/openmetrics-text;version=0.0.1"
		prometheus3 = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
	)
	cases := []struct {
		setting *bool
		accept  string
		want    string
	}{
		{nil, acceptOpenMetrics, om},
		{nil, onlyOM, om001},
		{nil, acceptProto, proto},
		{new(true), acceptOpenMetrics, om},
		{new(true), onlyOM, om001},
		{new(false), acceptOpenMetrics, text100},
		{new(false), prometheus3, text100},
		{new(false), acceptProto, proto},
		{new(false), onlyOM, text004},
		{new(false), "", text004},
	}
	for _, c := range cases {
		cfg := createDefaultConfig()
		cfg.EnableOpenMetrics = c.setting
		e, _ := exporterWith(t, cfg)
		if err := e.consumeMetrics(context.Background(), kindsMetrics()); err != nil {
			t.Fatal(err)
		}
		rec := get(t, e, metricsPath, http.Header{"Accept": {c.accept}})
		if got := rec.Header().Get("Content-Type"); got != c.want {
			t.Errorf("enable_open_metrics %v, Accept %q: Content-Type %q, want %q", deref(c.setting), c.accept, got, c.want)
		}
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d", rec.Code)
		}
		isOM := strings.HasPrefix(c.want, "application/openmetrics-text")
		if strings.HasSuffix(rec.Body.String(), "# EOF\n") != isOM {
			t.Errorf("enable_open_metrics %v, Accept %q: body is OpenMetrics: %v, want %v", deref(c.setting), c.accept, !isOM, isOM)
		}
	}
}

func deref(b *bool) string {
	if b == nil {
		return "absent"
	}
	if *b {
		return "true"
	}
	return "false"
}

// resourceMetrics is one gauge of a resource with service and Kubernetes
// attributes; the point has its own k8s.pod.name.
func resourceMetrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	ra := rm.Resource().Attributes()
	ra.PutStr("service.name", "kong")
	ra.PutStr("service.namespace", "edge")
	ra.PutStr("service.instance.id", "n1")
	ra.PutStr("k8s.pod.name", "kong-0")
	ra.PutStr("k8s.node.name", "node-a")
	ra.PutStr("host.name", "h1")
	ra.PutStr("host.arch", "amd64")
	g := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	g.SetName("up")
	dp := g.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetIntValue(1)
	dp.Attributes().PutStr("k8s.pod.name", "from-point")
	dp.Attributes().PutStr("route", "r1")
	return md
}

// TestResourceConstantLabels: resourcetotelemetry's semantics (patterns with
// * and ?, excluded over included, excluded alone meaning every other
// attribute), the deprecated resource_to_telemetry_conversion with its
// exclude_service_attributes, and the resource's value over the point's for
// one key, as the contrib exporter copies resource attributes over the
// point's.
func TestResourceConstantLabels(t *testing.T) {
	const base = `instance="n1",job="edge/kong"`
	cases := []struct {
		name     string
		set      func(*Config)
		want     string
		warnings int
	}{
		{"none", func(*Config) {}, `up{` + base + `,k8s_pod_name="from-point",route="r1"} 1`, 0},
		{"included patterns", func(c *Config) {
			c.ResourceConstantLabels.Included = []string{"k8s.*", "host.?ame"}
			c.ResourceConstantLabels.Excluded = []string{"k8s.node.name"}
		}, `up{host_name="h1",` + base + `,k8s_pod_name="kong-0",route="r1"} 1`, 0},
		{"excluded alone", func(c *Config) {
			c.ResourceConstantLabels.Excluded = []string{"service.*", "host.*"}
		}, `up{` + base + `,k8s_node_name="node-a",k8s_pod_name="kong-0",route="r1"} 1`, 0},
		{"included star", func(c *Config) {
			c.ResourceConstantLabels.Included = []string{"*"}
		}, `up{host_arch="amd64",host_name="h1",` + base + `,k8s_node_name="node-a",k8s_pod_name="kong-0",route="r1",service_instance_id="n1",service_name="kong",service_namespace="edge"} 1`, 0},
		{"no match", func(c *Config) {
			c.ResourceConstantLabels.Included = []string{"cloud.*"}
		}, `up{` + base + `,k8s_pod_name="from-point",route="r1"} 1`, 0},
		{"deprecated enabled", func(c *Config) {
			c.ResourceToTelemetryConversion.Enabled = true
		}, `up{host_arch="amd64",host_name="h1",` + base + `,k8s_node_name="node-a",k8s_pod_name="kong-0",route="r1",service_instance_id="n1",service_name="kong",service_namespace="edge"} 1`, 1},
		{"deprecated exclude_service_attributes", func(c *Config) {
			c.ResourceToTelemetryConversion.Enabled = true
			c.ResourceToTelemetryConversion.ExcludeServiceAttributes = true
		}, `up{host_arch="amd64",host_name="h1",` + base + `,k8s_node_name="node-a",k8s_pod_name="kong-0",route="r1"} 1`, 1},
		{"deprecated patterns", func(c *Config) {
			c.ResourceToTelemetryConversion.Included = []string{"host.arch"}
		}, `up{host_arch="amd64",` + base + `,k8s_pod_name="from-point",route="r1"} 1`, 1},
		{"deprecated exclude_service_attributes alone", func(c *Config) {
			c.ResourceToTelemetryConversion.ExcludeServiceAttributes = true
		}, `up{` + base + `,k8s_pod_name="from-point",route="r1"} 1`, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := createDefaultConfig()
			cfg.WithoutScopeInfo = true
			c.set(cfg)
			e, logs := exporterWith(t, cfg)
			if err := e.consumeMetrics(context.Background(), resourceMetrics()); err != nil {
				t.Fatal(err)
			}
			body := get(t, e, metricsPath, nil).Body.String()
			if !strings.Contains(body, "\n"+c.want+"\n") {
				t.Fatalf("no line %s in\n%s", c.want, body)
			}
			// target_info is the resource's, whatever is copied.
			if !strings.Contains(body, `target_info{host_arch="amd64",host_name="h1",instance="n1",job="edge/kong",k8s_node_name="node-a",k8s_pod_name="kong-0"} 1`) {
				t.Fatalf("target_info changed:\n%s", body)
			}
			if n := logs.FilterMessage("resource_to_telemetry_conversion is deprecated; use resource_constant_labels instead").Len(); n != c.warnings {
				t.Fatalf("%d deprecation warnings, want %d", n, c.warnings)
			}
		})
	}
}

// TestResourceToTelemetryGate: with the contrib gate
// DisableResourceToTelemetryConversion on, resource_to_telemetry_conversion
// is refused with the contrib exporter's message; off (its default), it
// cannot be combined with resource_constant_labels.
func TestResourceToTelemetryGate(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.ResourceToTelemetryConversion.Enabled = true
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	contribGate(t, gateDisableResourceToTelemetry, featuregate.StageAlpha, true)
	const want = "resource_to_telemetry_conversion is disabled by the exporter.prometheus.DisableResourceToTelemetryConversion feature gate; use resource_constant_labels instead"
	if err := cfg.Validate(); err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	cfg.ResourceConstantLabels.Included = []string{"*"} // allowed then: the other is refused anyway
	if err := cfg.Validate(); err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

// TestNamespaceAndConstLabelsAsContribSendsThem: the contrib exporter
// accepts any namespace and const label name and its default escaping
// sends them with underscores; so does promstream, under the
// underscore-escaping strategies. The UTF-8 strategies keep them.
func TestNamespaceAndConstLabelsAsContribSendsThem(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.Namespace = "test-space"
	cfg.ConstLabels = map[string]string{"label1": "value1", "another label": "spaced value"}
	cfg.WithoutScopeInfo = true
	e, _ := exporterWith(t, cfg)
	if err := e.consumeMetrics(context.Background(), resourceMetrics()); err != nil {
		t.Fatal(err)
	}
	body := get(t, e, metricsPath, nil).Body.String()
	for _, want := range []string{
		"\ntest_space_up{another_label=\"spaced value\",instance=\"n1\",job=\"edge/kong\",k8s_pod_name=\"from-point\",label1=\"value1\",route=\"r1\"} 1\n",
		"# TYPE test_space_target_info gauge\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in\n%s", want, body)
		}
	}

	cfg.Namespace = "9lives"
	if got := cfg.namespace(); got != "_9lives" {
		t.Errorf("namespace 9lives: %q, want _9lives (otlptranslator prefixes a leading digit)", got)
	}

	cfg.Namespace = "test-space"
	cfg.TranslationStrategy = noUTF8EscapingWithSuffixes
	e, _ = exporterWith(t, cfg)
	if err := e.consumeMetrics(context.Background(), resourceMetrics()); err != nil {
		t.Fatal(err)
	}
	body = get(t, e, metricsPath, http.Header{"Accept": {"text/plain;version=1.0.0;escaping=allow-utf-8"}}).Body.String()
	want := `{"test-space_up","another label"="spaced value",instance="n1",job="edge/kong","k8s.pod.name"="from-point",label1="value1",route="r1"} 1`
	if !strings.Contains(body, want) {
		t.Errorf("no %s in\n%s", want, body)
	}
}
