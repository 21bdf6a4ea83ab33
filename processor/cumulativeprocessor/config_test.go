package cumulativeprocessor

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelgateway/otelgateway/internal/testutil"
)

func TestConfig(t *testing.T) {
	defaults := *createDefaultConfig()
	cases := []struct {
		file    string
		want    func(*Config)
		wantErr string
	}{
		{file: "default.yaml", want: func(*Config) {}},
		{file: "max_stale.yaml", want: func(c *Config) { c.MaxStale = 90 * time.Second }},
		{file: "all.yaml", want: func(c *Config) {
			c.MaxStale, c.Limits.MaxStreams, c.Limits.MaxBuckets, c.Emit, c.Interval = 10*time.Minute, 5000, 40, EmitInterval, 15*time.Second
			id := component.MustNewIDWithName("file_storage", "cumulative")
			c.Storage, c.CheckpointInterval = &id, 30*time.Second
		}},
		{file: "zero_checkpoint_interval.yaml", wantErr: "checkpoint_interval must be positive, got 0s"},
		{file: "invalid_max_stale.yaml", wantErr: "max_stale must be positive, got -1s"},
		{file: "zero_max_stale.yaml", wantErr: "max_stale must be positive, got 0s"},
		{file: "zero_max_streams.yaml", wantErr: "limits.max_streams must be positive, got 0"},
		{file: "negative_max_streams.yaml", wantErr: "limits.max_streams must be positive, got -5"},
		{file: "small_max_buckets.yaml", wantErr: "limits.max_buckets must be at least 2, got 1"},
		// The keys the limits section replaced still work (warned about
		// when the processor is created).
		{file: "deprecated_limits.yaml", want: func(c *Config) {
			c.Limits.MaxStreams, c.Limits.MaxBuckets = 5000, 40
			c.renamed = renamedKeys
		}},
		{file: "limits_twice.yaml", wantErr: "'' max_streams and limits.max_streams are the same setting (max_streams is its deprecated name): set only limits.max_streams"},
		{file: "interval_without_period.yaml", wantErr: "interval must be positive with emit: interval, got 0s"},
		{file: "negative_interval.yaml", wantErr: "interval must be positive with emit: interval, got -1s"},
		{file: "interval_with_per_batch.yaml", wantErr: "interval is only used with emit: interval, got interval 10s with emit: per_batch"},
		{file: "invalid_emit.yaml", wantErr: "decoding failed due to the following error(s):\n\n'' decoding failed due to the following error(s):\n\n'emit' emit must be \"per_batch\" or \"interval\", got \"sometimes\""},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			cfg := createDefaultConfig()
			if !testutil.CheckError(t, testutil.DecodeConfig(t, filepath.Join("testdata", "config", c.file), cfg), c.wantErr) {
				return
			}
			want := defaults
			c.want(&want)
			if !reflect.DeepEqual(*cfg, want) {
				t.Errorf("config = %+v, want %+v", *cfg, want)
			}
		})
	}
}
