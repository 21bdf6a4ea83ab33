package promstreamexporter

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/metadata"
)

// contribEntry unmarshals one component entry of a contrib prometheus
// exporter configuration into promstream's default config, validates it,
// and builds the exporter, returning its warnings.
func contribEntry(t *testing.T, file, id string) (*Config, []string, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(file)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := cm.Sub(id)
	if err != nil {
		t.Fatal(err)
	}
	cfg := createDefaultConfig()
	if err := sub.Unmarshal(cfg); err != nil {
		t.Fatalf("%s %s: promstream refuses a key: %v", file, id, err)
	}
	if err := confmap.Validate(cfg); err != nil {
		return cfg, nil, err
	}
	core, logs := observer.New(zap.WarnLevel)
	set := exportertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	e, err := newExporter(cfg, set)
	if err != nil {
		t.Fatal(err)
	}
	e.telemetry.Shutdown()
	var warnings []string
	for _, l := range logs.All() {
		warnings = append(warnings, l.Message)
	}
	return cfg, warnings, nil
}

// TestContribTestdataConfig: every entry of the contrib exporter's own
// testdata/config.yaml (v0.165.1, copied into testdata/contrib) is accepted
// by promstream, with the contrib meaning.
func TestContribTestdataConfig(t *testing.T) {
	file := filepath.Join("testdata", "contrib", "config.yaml")

	// prometheus: the defaults. contrib has no default endpoint (creating
	// the exporter fails without one); promstream serves localhost:9464.
	cfg, warnings, err := contribEntry(t, file, "prometheus")
	if err != nil || len(warnings) > 0 {
		t.Fatalf("prometheus: %v %v", err, warnings)
	}
	if !reflect.DeepEqual(cfg, createDefaultConfig()) {
		t.Fatalf("prometheus: got %+v, want the defaults", cfg)
	}

	cfg, warnings, err = contribEntry(t, file, "prometheus/2")
	if err != nil {
		t.Fatalf("prometheus/2: %v", err)
	}
	tls := cfg.ServerConfig.TLS.Get()
	switch {
	case cfg.ServerConfig.NetAddr.Endpoint != "1.2.3.4:1234",
		tls == nil || tls.CAFile != "certs/ca.crt" || tls.KeyFile != "certs/server.key" || tls.CertFile != "certs/server.crt",
		cfg.Namespace != "test-space" || cfg.namespace() != "test_space",
		!reflect.DeepEqual(cfg.ConstLabels, map[string]string{"label1": "value1", "another label": "spaced value"}),
		cfg.constLabelName("another label") != "another_label",
		!cfg.SendTimestamps,
		cfg.MetricExpiration != 60*time.Minute,
		cfg.AddMetricSuffixes:
		t.Fatalf("prometheus/2: %+v", cfg)
	}
	// add_metric_suffixes: false is ignored, as in contrib with its gates at
	// their defaults, and said so.
	if got := cfg.translationStrategy(); got != underscoreEscapingWithSuffixes {
		t.Fatalf("prometheus/2: strategy %s", got)
	}
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], "add_metric_suffixes is deprecated and ignored") {
		t.Fatalf("prometheus/2: warnings %q", warnings)
	}

	cfg, warnings, err = contribEntry(t, file, "prometheus/3")
	if err != nil || len(warnings) > 0 {
		t.Fatalf("prometheus/3: %v %v", err, warnings)
	}
	if want := []string{"service.name", "k8s.pod.name"}; !slices.Equal(cfg.ResourceConstantLabels.Included, want) {
		t.Fatalf("prometheus/3: %+v", cfg.ResourceConstantLabels)
	}
}

// TestContribReadmeExample: the contrib README's example is accepted too,
// with the deprecation warning for resource_to_telemetry_conversion.
func TestContribReadmeExample(t *testing.T) {
	cfg, warnings, err := contribEntry(t, filepath.Join("testdata", "contrib", "readme_example.yaml"), "prometheus")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.EnableOpenMetrics == nil || !*cfg.EnableOpenMetrics || cfg.translationStrategy() != underscoreEscapingWithoutSuffixes ||
		!cfg.ResourceToTelemetryConversion.Enabled || cfg.MetricExpiration != 180*time.Minute {
		t.Fatalf("%+v", cfg)
	}
	if !slices.Equal(warnings, []string{"resource_to_telemetry_conversion is deprecated; use resource_constant_labels instead"}) {
		t.Fatalf("warnings %q", warnings)
	}
}

// TestEveryContribKeyIsHandled: every property of the contrib exporter's
// config schema (v0.165.1) is a key of promstream's config and has a row in
// the README's drop-in table.
func TestEveryContribKeyIsHandled(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "contrib", "config.schema.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	props, ok := cm.Get("properties").(map[string]any)
	if !ok || len(props) < 10 {
		t.Fatalf("schema properties: %v", cm.Get("properties"))
	}
	ours := map[string]bool{}
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		if tag := typ.Field(i).Tag.Get("mapstructure"); tag != "" && tag != ",squash" {
			ours[tag] = true
		}
	}
	if reflect.TypeFor[Config]().Field(0).Type.String() != "confighttp.ServerConfig" {
		t.Fatal("the server settings are no longer confighttp.ServerConfig, which contrib squashes too")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(readme), "\n## Drop-in for contrib's prometheus exporter\n")
	table, _, _ = strings.Cut(table, "\n## ")
	for key := range props {
		if !ours[key] {
			t.Errorf("contrib key %s is not a key of promstream's config", key)
		}
		if !strings.Contains(table, "\n| `"+key+"` |") {
			t.Errorf("contrib key %s has no row in the README's drop-in table", key)
		}
	}
}
