package cumulativeprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/otelgateway/otelgateway/internal/testutil"
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
			cfg := createDefaultConfig()
			if !testutil.CheckError(t, testutil.LoadConfig(t, filepath.Join("testdata", "config", c.file), cfg), c.wantErr) {
				return
			}
			if cfg.MaxStale != c.want {
				t.Errorf("max_stale = %v, want %v", cfg.MaxStale, c.want)
			}
		})
	}
}
