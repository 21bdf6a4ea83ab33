package promstreamexporter

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/otelgateway/otelgateway/internal/testutil"
)

func TestConfig(t *testing.T) {
	full := createDefaultConfig()
	full.ServerConfig.NetAddr.Endpoint = "0.0.0.0:9999"
	full.MetricExpiration = 90 * time.Second
	full.Limits.MaxSeries = 500000
	full.Limits.MaxConcurrentScrapes = 2
	full.Limits.MaxGzipKeptBytes = 1 << 20
	full.Limits.MaxGzipWorkers = 1
	full.Namespace = "edge"
	full.ConstLabels = map[string]string{"region": "eu-1"}
	full.TranslationStrategy = noUTF8EscapingWithSuffixes
	full.WithoutScopeInfo = true
	full.ResourceToTelemetryConversion.Enabled = true
	full.LabelOrder = labelOrderAsReceived
	full.KeepEmptyLabels = true
	full.TextBucketFormat = bucketFormatShortest
	full.ShutdownGrace = 5 * time.Second
	contrib := createDefaultConfig()
	contrib.ServerConfig.NetAddr.Endpoint = "0.0.0.0:9464"
	contrib.Namespace = "test-space"
	contrib.ConstLabels = map[string]string{"label1": "value1", "another label": "spaced value"}
	contrib.SendTimestamps = true
	contrib.MetricExpiration = time.Hour
	contrib.EnableOpenMetrics = new(false)
	contrib.WithoutScopeInfo = true
	contrib.AddMetricSuffixes = false
	contrib.TranslationStrategy = underscoreEscapingWithoutSuffixes
	contrib.ResourceConstantLabels = ResourceAttributesConfig{Included: []string{"service.*", "k8s.pod.name"}, Excluded: []string{"service.instance.id"}}
	deprecated := createDefaultConfig()
	deprecated.Limits.MaxSeries, deprecated.Limits.MaxConcurrentScrapes = 500000, 2
	deprecated.renamed = renamedKeys
	// Each preset, as it completes the configuration: the five keys of the
	// recipe it replaces; envoy adds no OpenMetrics and counters named as
	// sent.
	preset := func(name string) *Config {
		c := createDefaultConfig()
		c.Compatibility = name
		c.TranslationStrategy = underscoreEscapingWithoutSuffixes
		c.WithoutScopeInfo = true
		c.LabelOrder = labelOrderAsReceived
		c.KeepEmptyLabels = true
		c.TextBucketFormat = bucketFormatShortest
		return c
	}
	envoy := preset(compatEnvoy)
	envoy.EnableOpenMetrics = new(false)
	envoy.exactCounterNames = true
	envoyOM := preset(compatEnvoy)
	envoyOM.EnableOpenMetrics = new(true)
	envoyOM.exactCounterNames = true
	none := createDefaultConfig()
	none.Compatibility = compatNone
	explicit := preset(compatKong)
	explicit.TranslationStrategy = underscoreEscapingWithSuffixes
	explicit.LabelOrder = labelOrderSorted
	cases := []struct {
		file    string
		want    *Config
		wantErr string
		// overrides are the explicit keys that contradict the preset.
		overrides []presetOverride
	}{
		{file: "default.yaml", want: createDefaultConfig()},
		{file: "full.yaml", want: full},
		{file: "contrib_keys.yaml", want: contrib},
		{file: "queue_enabled.yaml", wantErr: "sending_queue: promstream has no sending queue (it stores every batch in its series table synchronously, a memory write that cannot fail transiently, so a queue would only delay what scrapes see and hold a second copy of it; the contrib exporter marks the queue as unused by a pull exporter too): remove sending_queue or set enabled: false"},
		{file: "constant_labels_enabled.yaml", wantErr: "enabled and exclude_service_attributes are not supported under resource_constant_labels; use included and excluded instead"},
		{file: "both_resource_options.yaml", wantErr: "cannot configure both resource_to_telemetry_conversion and resource_constant_labels; resource_to_telemetry_conversion is deprecated"},
		{file: "legacy_and_patterns.yaml", wantErr: "resource_to_telemetry_conversion: cannot configure both legacy enabled/exclude_service_attributes and included/excluded patterns; enabled and exclude_service_attributes are deprecated"},
		{file: "invalid_expiration.yaml", wantErr: "metric_expiration must be positive, got 0s (0 makes the contrib exporter serve nothing: every series has expired by the time a scrape reads it)"},
		{file: "empty_endpoint.yaml", wantErr: "endpoint must not be empty"},
		{file: "bad_strategy.yaml", wantErr: `translation_strategy "Legacy" is not one of UnderscoreEscapingWithSuffixes, UnderscoreEscapingWithoutSuffixes, NoUTF8EscapingWithSuffixes, NoTranslation`},
		{file: "zero_scrapes.yaml", wantErr: "limits.max_concurrent_scrapes must be positive, got 0"},
		{file: "negative_max_series.yaml", wantErr: "limits.max_series must not be negative, got -1"},
		{file: "negative_gzip_kept.yaml", wantErr: "limits.max_gzip_kept_bytes must not be negative, got -5 (0 for no limit)"},
		{file: "negative_gzip_workers.yaml", wantErr: "limits.max_gzip_workers must not be negative, got -1 (0 compresses on the scrape's goroutine)"},
		// The keys the limits section replaced still work (warned about
		// when the exporter is created).
		{file: "deprecated_limits.yaml", want: deprecated},
		{file: "negative_shutdown_grace.yaml", wantErr: "shutdown_grace must not be negative, got -1s"},
		{file: "bad_namespace.yaml", wantErr: `namespace "-.-" has no character valid in a Prometheus metric name`},
		{file: "bad_const_label.yaml", wantErr: `const_labels: "__reserved" is not a valid Prometheus label name`},
		{file: "escaped_const_label.yaml", wantErr: `const_labels: "_.x" is not a valid Prometheus label name`},
		{file: "reserved_const_label.yaml", wantErr: `const_labels: "le" is the label a histogram (le) or summary (quantile) writes on its samples: choose another name`},
		{file: "bad_label_order.yaml", wantErr: `label_order must be "sorted" or "as_received", got "random"`},
		{file: "bad_bucket_format.yaml", wantErr: `text_bucket_format must be "canonical" or "shortest", got "padded"`},
		{file: "compatibility_kong.yaml", want: preset(compatKong)},
		{file: "compatibility_apisix.yaml", want: preset(compatAPISIX)},
		{file: "compatibility_envoy.yaml", want: envoy},
		{file: "compatibility_none.yaml", want: none},
		{file: "compatibility_explicit.yaml", want: explicit, overrides: []presetOverride{
			{key: "translation_strategy", preset: underscoreEscapingWithoutSuffixes, set: underscoreEscapingWithSuffixes},
			{key: "label_order", preset: labelOrderAsReceived, set: labelOrderSorted},
		}},
		{file: "compatibility_envoy_openmetrics.yaml", want: envoyOM, overrides: []presetOverride{
			{key: "enable_open_metrics", preset: "false", set: "true"},
		}},
		{file: "bad_compatibility.yaml", wantErr: `compatibility must be "kong", "apisix", "envoy" or "none" (or left out), got "nginx"`},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			cfg := createDefaultConfig()
			if !testutil.CheckError(t, testutil.LoadConfig(t, filepath.Join("testdata", "config", c.file), cfg), c.wantErr) {
				return
			}
			if cfg.SendingQueue.HasValue() {
				t.Fatal("sending_queue enabled")
			}
			cfg.SendingQueue = c.want.SendingQueue // disabled: its settings do not matter
			// The configuration in effect: what the exporter is made from.
			eff, overrides := cfg.withPreset()
			eff.setKeys, eff.decoded = nil, false // what the decoding saw, compared through eff
			if !reflect.DeepEqual(eff, c.want) {
				t.Errorf("got %+v\nwant %+v", eff, c.want)
			}
			if !reflect.DeepEqual(overrides, c.overrides) {
				t.Errorf("overrides %+v, want %+v", overrides, c.overrides)
			}
		})
	}
}

// A bound set under its old and its new name is refused.
func TestLimitSetUnderBothNames(t *testing.T) {
	err := testutil.DecodeConfig(t, filepath.Join("testdata", "config", "limits_twice.yaml"), createDefaultConfig())
	const want = "'' max_series and limits.max_series are the same setting (max_series is its deprecated name): set only limits.max_series"
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v\nwant %s", err, want)
	}
}
