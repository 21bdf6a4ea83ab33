package promstreamexporter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/otelgateway/otelgateway/internal/testutil"
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
			cfg := createDefaultConfig()
			if !testutil.CheckError(t, testutil.LoadConfig(t, filepath.Join("testdata", "config", c.file), cfg), c.wantErr) {
				return
			}
			if cfg.ServerConfig.NetAddr.Endpoint != c.endpoint || cfg.MetricExpiration != c.expiration {
				t.Errorf("got endpoint %q expiration %v, want %q %v", cfg.ServerConfig.NetAddr.Endpoint, cfg.MetricExpiration, c.endpoint, c.expiration)
			}
		})
	}
}
