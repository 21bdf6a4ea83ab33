package gatewayconverter

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter"
	"github.com/otelgateway/otelgateway/processor/cumulativeprocessor"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// convert loads testdata/<file>, runs the converter on it and returns the
// result, the error and the log.
func convert(t *testing.T, file string) (*confmap.Conf, *observer.ObservedLogs, error) {
	t.Helper()
	conf, err := confmaptest.LoadConf(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	conv := NewFactory().Create(confmap.ConverterSettings{Logger: zap.New(core)})
	err = conv.Convert(context.Background(), conf)
	return conf, logs, err
}

func receiverOf(t *testing.T, conf *confmap.Conf, id string) *gatewayreceiver.Config {
	t.Helper()
	cfg := gatewayreceiver.NewFactory().CreateDefaultConfig().(*gatewayreceiver.Config)
	if !decode(conf, "receivers::"+id, cfg) {
		t.Fatalf("receivers::%s does not decode", id)
	}
	return cfg
}

func processorOf(t *testing.T, conf *confmap.Conf, id string) *cumulativeprocessor.Config {
	t.Helper()
	cfg := cumulativeprocessor.NewFactory().CreateDefaultConfig().(*cumulativeprocessor.Config)
	if !decode(conf, "processors::"+id, cfg) {
		t.Fatalf("processors::%s does not decode", id)
	}
	return cfg
}

func exporterOf(t *testing.T, conf *confmap.Conf, id string) *promstreamexporter.Config {
	t.Helper()
	cfg := promstreamexporter.NewFactory().CreateDefaultConfig().(*promstreamexporter.Config)
	if !decode(conf, "exporters::"+id, cfg) {
		t.Fatalf("exporters::%s does not decode", id)
	}
	return cfg
}

// The defaults agree: nothing is derived, refused or warned about.
func TestDefaultsAreLeftAlone(t *testing.T) {
	before, err := confmaptest.LoadConf(filepath.Join("testdata", "defaults.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	conf, logs, err := convert(t, "defaults.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(conf.ToStringMap(), before.ToStringMap()) {
		t.Errorf("the defaults were changed:\n%v\nwas\n%v", conf.ToStringMap(), before.ToStringMap())
	}
	if logs.Len() != 0 {
		t.Errorf("log %v, want nothing", logs.All())
	}
}

// What one component sets, the settings of the others that depend on it
// follow, when they are not set; each is logged.
func TestUnsetSettingsFollowTheOthers(t *testing.T) {
	conf, logs, err := convert(t, "derive.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := receiverOf(t, conf, "gateway/edge")
	p := processorOf(t, conf, "cumulative")
	e := exporterOf(t, conf, "promstream")
	if !reflect.DeepEqual(p.OverflowKeep, []string{"node_collector"}) {
		t.Errorf("overflow_keep %v, want the receiver's collector_label", p.OverflowKeep)
	}
	if r.TupleExpiry != 15*time.Minute {
		t.Errorf("tuple_expiry %v, want 15m (the exporter's metric_expiration, longer than max_stale 10m)", r.TupleExpiry)
	}
	if r.CheckpointReplay != 35*time.Second {
		t.Errorf("checkpoint_replay %v, want 35s (checkpoint_interval 30s + flush_interval 5s)", r.CheckpointReplay)
	}
	// (400,000 + 1,000 + 1) tuples × the otel profile's 10 families.
	if p.Limits.MaxStreams != 4_010_010 {
		t.Errorf("limits.max_streams %d, want 4010010", p.Limits.MaxStreams)
	}
	// Those streams, 64 overflow streams, 1,001 target_info.
	if e.Limits.MaxSeries != 4_011_075 {
		t.Errorf("limits.max_series %d, want 4011075", e.Limits.MaxSeries)
	}
	want := []string{
		"Derived processors.cumulative.overflow_keep from the collector_label of the gateway receivers feeding it",
		"Derived receivers.gateway/edge.tuple_expiry from exporters::promstream metric_expiration",
		"Derived receivers.gateway/edge.checkpoint_replay from processors::cumulative checkpoint_interval (30s) + flush_interval (5s)",
		"Derived processors.cumulative.limits.max_streams from the limits of the gateway receivers feeding it (a stream per family per tuple)",
		"Derived exporters.promstream.limits.max_series from the bounds of the processors and gateway receivers before it",
	}
	if got := messages(logs); !reflect.DeepEqual(got, want) {
		t.Errorf("log\n%q\nwant\n%q", got, want)
	}
}

// Combinations that lose data are refused, each with its fix.
func TestLossyCombinationsAreRefused(t *testing.T) {
	_, _, err := convert(t, "refuse.yaml")
	want := `processors::cumulative: overflow_keep [] lacks "collector", the collector_label of the gateway receivers feeding it: ` +
		`the overflow series of several collectors would collide; add "collector" to overflow_keep, or remove overflow_keep (it then follows collector_label)` + "\n" +
		`receivers::gateway: tuple_expiry (1m0s) is shorter than processors::cumulative max_stale (5m0s): the receiver would admit new label tuples ` +
		`while the series of those it let go are still held downstream, beyond what their bounds hold; set tuple_expiry to at least 5m0s, ` +
		`or remove it (it then follows the longest of max_stale and metric_expiration)` + "\n" +
		`receivers::gateway: checkpoint_replay (5s) is shorter than processors::cumulative checkpoint_interval (10s) + flush_interval (5s) = 15s: ` +
		`a crash would lose the windows flushed after the processor's last checkpoint; set checkpoint_replay to at least 15s, or remove it (it then follows them)`
	if err == nil || err.Error() != want {
		t.Fatalf("error\n%v\nwant\n%s", err, want)
	}
}

// The old recipe for several collectors, external_labels.collector on the
// remote-write exporter, does nothing to the gateway series: warned, with
// the fix. Bounds set below what the receiver admits are warned about.
func TestWarnings(t *testing.T) {
	conf, logs, err := convert(t, "warn.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p := processorOf(t, conf, "cumulative"); p.Limits.MaxStreams != 1000 {
		t.Errorf("a set limits.max_streams was changed to %d", p.Limits.MaxStreams)
	}
	want := []string{
		"processors::cumulative limits.max_streams is below what the gateway receivers feeding it can send: new streams beyond it are folded " +
			"into overflow streams; raise it to 1010010, or remove it (it then follows the receivers' limits)",
		"exporters::promstream limits.max_series is below what the pipeline before it can send: points of new series beyond it are " +
			"dropped; raise it to 2065, or remove it (it then follows the bounds before it)",
		`exporters::prometheus_remote_write: external_labels.collector does nothing to the series of receivers::gateway, which carry their own ` +
			`collector label ("c1"; the exporter never overrides a label a series has): remove it from external_labels, and set ` +
			`receivers::gateway::collector_name where another value is wanted`,
	}
	if got := messages(logs); !reflect.DeepEqual(got, want) {
		t.Errorf("log\n%q\nwant\n%q", got, want)
	}
	for _, e := range logs.All() {
		if e.Level != zapcore.WarnLevel {
			t.Errorf("%q logged at %v, want warn", e.Message, e.Level)
		}
	}
}

// Components outside a metrics pipeline with a gateway receiver are not
// the converter's business, even when their settings would be refused
// beside one.
func TestOtherPipelinesAreLeftAlone(t *testing.T) {
	before, err := confmaptest.LoadConf(filepath.Join("testdata", "unrelated.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	conf, logs, err := convert(t, "unrelated.yaml")
	if err != nil || logs.Len() != 0 || !reflect.DeepEqual(conf.ToStringMap(), before.ToStringMap()) {
		t.Fatalf("error %v, log %v, changed %v", err, logs.All(), !reflect.DeepEqual(conf.ToStringMap(), before.ToStringMap()))
	}
}

func messages(logs *observer.ObservedLogs) []string {
	var out []string
	for _, e := range logs.All() {
		out = append(out, e.Message)
	}
	return out
}

// The bounds' deprecated keys are read as their new names, and left in the
// configuration as they were written, for the components to decode and warn
// about: reading a section never changes it.
func TestDeprecatedKeysAreReadAndLeftAlone(t *testing.T) {
	conf, logs, err := convert(t, "deprecated.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{
		"receivers::gateway::max_series":                400000,
		"receivers::gateway::health::push::max_targets": 7,
		"processors::cumulative::max_streams":           1000,
	} {
		if got := conf.Get(key); got != want {
			t.Errorf("%s = %v, want %v as written", key, got, want)
		}
	}
	if conf.IsSet("receivers::gateway::limits") || conf.IsSet("processors::cumulative::limits") {
		t.Errorf("the converter wrote the new keys beside the old: %v", conf.ToStringMap())
	}
	if r := receiverOf(t, conf, "gateway"); r.Limits.MaxTuples != 400000 || r.Limits.MaxPushedTargets != 7 {
		t.Errorf("receiver limits %+v, want max_tuples 400000, max_pushed_targets 7", r.Limits)
	}
	// Read as limits.max_streams: 1,000 set, below what 400,000 tuples need.
	want := []string{"processors::cumulative limits.max_streams is below what the gateway receivers feeding it can send: new streams beyond it are folded " +
		"into overflow streams; raise it to 4010010, or remove it (it then follows the receivers' limits)"}
	if got := messages(logs); !reflect.DeepEqual(got, want) {
		t.Errorf("log\n%q\nwant\n%q", got, want)
	}
}
