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
	full.MaxSeries = 500000
	full.MaxConcurrentScrapes = 2
	full.Namespace = "edge"
	full.ConstLabels = map[string]string{"region": "eu-1"}
	full.TranslationStrategy = noUTF8EscapingWithSuffixes
	full.WithoutScopeInfo = true
	full.ResourceToTelemetryConversion.Enabled = true
	full.LabelOrder = labelOrderAsReceived
	full.KeepEmptyLabels = true
	full.TextBucketFormat = bucketFormatShortest
	full.ShutdownGrace = 5 * time.Second
	cases := []struct {
		file    string
		want    *Config
		wantErr string
	}{
		{file: "default.yaml", want: createDefaultConfig()},
		{file: "full.yaml", want: full},
		{file: "invalid_expiration.yaml", wantErr: "metric_expiration must be positive, got 0s"},
		{file: "empty_endpoint.yaml", wantErr: "endpoint must not be empty"},
		{file: "bad_strategy.yaml", wantErr: `translation_strategy "Legacy" is not one of UnderscoreEscapingWithSuffixes, UnderscoreEscapingWithoutSuffixes, NoUTF8EscapingWithSuffixes, NoTranslation`},
		{file: "zero_scrapes.yaml", wantErr: "max_concurrent_scrapes must be positive, got 0"},
		{file: "negative_max_series.yaml", wantErr: "max_series must not be negative, got -1"},
		{file: "negative_shutdown_grace.yaml", wantErr: "shutdown_grace must not be negative, got -1s"},
		{file: "bad_namespace.yaml", wantErr: `namespace "9lives" is not a valid Prometheus metric name prefix`},
		{file: "bad_const_label.yaml", wantErr: `const_labels: "bad-name" is not a valid Prometheus label name`},
		{file: "bad_label_order.yaml", wantErr: `label_order must be "sorted" or "as_received", got "random"`},
		{file: "bad_bucket_format.yaml", wantErr: `text_bucket_format must be "canonical" or "shortest", got "padded"`},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			cfg := createDefaultConfig()
			if !testutil.CheckError(t, testutil.LoadConfig(t, filepath.Join("testdata", "config", c.file), cfg), c.wantErr) {
				return
			}
			if !reflect.DeepEqual(cfg, c.want) {
				t.Errorf("got %+v\nwant %+v", cfg, c.want)
			}
		})
	}
}
