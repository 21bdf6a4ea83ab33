package promstreamexporter

import (
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

func TestConfig(t *testing.T) {
	cases := []struct {
		file       string
		endpoint   string
		expiration time.Duration
		wantErr    string
	}{
		{file: "default.yaml", endpoint: defaultEndpoint, expiration: defaultMetricExpiration},
		{file: "full.yaml", endpoint: "0.0.0.0:9999", expiration: 90 * time.Second},
		{file: "invalid_expiration.yaml", wantErr: "metric_expiration must be positive, got 0s"},
		{file: "empty_endpoint.yaml", wantErr: "endpoint must not be empty"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config", c.file))
			if err != nil {
				t.Fatal(err)
			}
			cfg := createDefaultConfig()
			if err := cm.Unmarshal(cfg); err != nil {
				t.Fatal(err)
			}
			err = confmap.Validate(cfg)
			if c.wantErr != "" {
				if err == nil || err.Error() != c.wantErr {
					t.Fatalf("Validate() = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ServerConfig.NetAddr.Endpoint != c.endpoint || cfg.MetricExpiration != c.expiration {
				t.Errorf("got endpoint %q expiration %v, want %q %v", cfg.ServerConfig.NetAddr.Endpoint, cfg.MetricExpiration, c.endpoint, c.expiration)
			}
		})
	}
}
