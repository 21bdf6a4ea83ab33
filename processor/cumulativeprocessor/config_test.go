package cumulativeprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

func TestConfig(t *testing.T) {
	cases := []struct {
		file    string
		want    time.Duration
		wantErr string
	}{
		{file: "default.yaml", want: defaultMaxStale},
		{file: "max_stale.yaml", want: 90 * time.Second},
		{file: "invalid_max_stale.yaml", wantErr: "max_stale must be positive, got -1s"},
		{file: "zero_max_stale.yaml", wantErr: "max_stale must be positive, got 0s"},
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
			if cfg.MaxStale != c.want {
				t.Errorf("max_stale = %v, want %v", cfg.MaxStale, c.want)
			}
		})
	}
}
