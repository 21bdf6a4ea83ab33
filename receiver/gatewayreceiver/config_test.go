package gatewayreceiver

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/traffic"
)

func TestConfig(t *testing.T) {
	runConfigCases(t, []configCase{
		{file: "default.yaml", check: func(t *testing.T, c *Config) {
			if c.Protocols.GRPC.Get().NetAddr.Endpoint != defaultGRPCEndpoint || c.Protocols.HTTP.Get().NetAddr.Endpoint != defaultHTTPEndpoint {
				t.Errorf("endpoints %q %q, want the defaults", c.Protocols.GRPC.Get().NetAddr.Endpoint, c.Protocols.HTTP.Get().NetAddr.Endpoint)
			}
			if c.Profile != "otel" || c.Limits != defaultLimits() || c.Detect != "auto" || len(c.Dimensions) != 0 {
				t.Errorf("profile %q limits %+v detect %q dimensions %v, want the defaults", c.Profile, c.Limits, c.Detect, c.Dimensions)
			}
			if c.Limits.MaxTuples != 100_000 || c.Limits.MaxGateways != 1000 || c.Limits.MaxLabelValueLength != 256 ||
				c.Limits.MaxRequestBytesInFlight != 64<<20 || c.Limits.MaxPushedTargets != 100_000 || len(c.renamed) != 0 {
				t.Errorf("limits %+v, renamed keys %v; want the documented defaults and no deprecated key", c.Limits, c.renamed)
			}
			if len(c.Metrics) != 0 || !c.Exemplars.Enabled {
				t.Errorf("metrics %v exemplars %v, want every metric and exemplars on", c.Metrics, c.Exemplars.Enabled)
			}
			if c.FlushInterval != defaultFlushInterval {
				t.Errorf("flush_interval = %v, want %v", c.FlushInterval, defaultFlushInterval)
			}
			if c.Limits.AdmissionQueueSize != 1024 || c.Limits.AdmissionQueueTimeout != 2*time.Second {
				t.Errorf("admission_queue_size %d, admission_queue_timeout %v; want 1024 and 2s", c.Limits.AdmissionQueueSize, c.Limits.AdmissionQueueTimeout)
			}
			if c.GRPCReceiveTimeout != 30*time.Second || receivingSlots(c) != 32 {
				t.Errorf("grpc_receive_timeout %v, %d receiving slots; want 30s and 32 (64 MiB / 4 MiB is less)", c.GRPCReceiveTimeout, receivingSlots(c))
			}
			g := c.Protocols.GRPC.Get()
			sp, ep := g.Keepalive.Get().ServerParameters.Get(), g.Keepalive.Get().EnforcementPolicy.Get()
			if g.MaxConcurrentStreams != 100 || sp.MaxConnectionIdle != time.Minute || sp.MaxConnectionAge != 5*time.Minute ||
				sp.MaxConnectionAgeGrace != 30*time.Second || sp.Time != 0 || sp.Timeout != 0 || ep.MinTime != 10*time.Second || !ep.PermitWithoutStream {
				t.Errorf("grpc max_concurrent_streams %d, keepalive %+v %+v; want 100, idle 1m, age 5m + 30s, gRPC's pings, min_time 10s with or without calls",
					g.MaxConcurrentStreams, sp, ep)
			}
		}},
		{file: "grpc_keepalive.yaml", check: func(t *testing.T, c *Config) {
			// What is set replaces its default; the rest keep theirs.
			g := c.Protocols.GRPC.Get()
			sp, ep := g.Keepalive.Get().ServerParameters.Get(), g.Keepalive.Get().EnforcementPolicy.Get()
			if g.MaxConcurrentStreams != 500 || sp.MaxConnectionIdle != 10*time.Minute || sp.MaxConnectionAge != 0 ||
				sp.MaxConnectionAgeGrace != 30*time.Second || ep.MinTime != 10*time.Second || ep.PermitWithoutStream {
				t.Errorf("grpc max_concurrent_streams %d, keepalive %+v %+v; want 500, idle 10m, no age, grace 30s, min_time 10s with calls only",
					g.MaxConcurrentStreams, sp, ep)
			}
		}},
		{file: "grpc_bounds.yaml", check: func(t *testing.T, c *Config) {
			// 2 GiB / 16 MiB messages.
			if c.GRPCReceiveTimeout != 10*time.Second || receivingSlots(c) != 128 {
				t.Errorf("grpc_receive_timeout %v, %d receiving slots; want 10s and 128", c.GRPCReceiveTimeout, receivingSlots(c))
			}
			c.Limits.MaxRequestBytesInFlight = 0
			if receivingSlots(c) != 0 {
				t.Errorf("%d receiving slots without max_request_bytes_in_flight, want no bound", receivingSlots(c))
			}
		}},
		{file: "bad_grpc_receive_timeout.yaml", wantError: "grpc_receive_timeout must be 0 (off) or positive, got -1s"},
		{file: "admission_queue.yaml", check: func(t *testing.T, c *Config) {
			if c.Limits.AdmissionQueueSize != 64 || c.Limits.AdmissionQueueTimeout != 500*time.Millisecond {
				t.Errorf("admission_queue_size %d, admission_queue_timeout %v; want 64 and 500ms", c.Limits.AdmissionQueueSize, c.Limits.AdmissionQueueTimeout)
			}
		}},
		{file: "bad_admission_queue_size.yaml", wantError: "limits.admission_queue_size must be 0 (no request waits) or positive, got -1"},
		{file: "bad_admission_queue_timeout.yaml", wantError: "limits.admission_queue_timeout must be 0 (no request waits) or positive, got -2s"},
		{file: "http_only.yaml", check: func(t *testing.T, c *Config) {
			if c.Protocols.GRPC.HasValue() {
				t.Error("grpc is enabled, want disabled")
			}
			if got := c.Protocols.HTTP.Get(); got.NetAddr.Endpoint != "0.0.0.0:8080" || got.MaxRequestBodySize != 1<<20 {
				t.Errorf("http = %q max %d", got.NetAddr.Endpoint, got.MaxRequestBodySize)
			}
			if c.FlushInterval != 2*time.Second {
				t.Errorf("flush_interval = %v, want 2s", c.FlushInterval)
			}
		}},
		{file: "kong_profile.yaml", check: func(t *testing.T, c *Config) {
			if c.Profile != "kong" || c.Limits.MaxTuples != 500 || c.detect().String() != "kong" {
				t.Errorf("profile %q limits.max_tuples %d detect %q", c.Profile, c.Limits.MaxTuples, c.Detect)
			}
		}},
		{file: "metrics.yaml", check: func(t *testing.T, c *Config) {
			off := c.disabledMetrics()
			slices.Sort(off)
			if !slices.Equal(off, []string{"gateway.added.duration", "gateway.bandwidth", "gateway.upstream.duration"}) || c.Exemplars.Enabled {
				t.Errorf("disabled metrics %v, exemplars %v; want three off and exemplars off", off, c.Exemplars.Enabled)
			}
		}},
		{file: "bad_metrics.yaml", wantError: `metrics: the kong profile has no metric "kong_latency_ms", want one of "kong_http_requests_total", ` +
			`"kong_kong_latency_ms", "kong_upstream_latency_ms", "kong_request_latency_ms", "kong_bandwidth_bytes", "kong_ai_llm_requests_total", ` +
			`"kong_ai_llm_cost_total", "kong_ai_llm_provider_latency_ms" or "kong_ai_llm_tokens_total"` + "\n" +
			`metrics.kong_upstream_latency_ms: set enabled to true or false`},
		{file: "pushed_metrics.yaml", check: func(t *testing.T, c *Config) {
			o := newPushed(c, nil).opts
			if o.EnvoyPrefix != "edge" || !slices.Equal(o.EnvoyNamespaces, []string{"wasmcustom"}) || o.MaxPoints != 5000 || o.MaxLabelBytes != 256 {
				t.Errorf("pushed-metrics options %+v, want prefix edge, namespaces [wasmcustom], 5000 points, 256 label bytes", o)
			}
		}},
		{file: "bad_pushed_metrics.yaml", wantError: "limits.max_pushed_points must be at least 1, got 0\n" +
			"limits.max_pushed_label_bytes must be from 16 to 16384 bytes, got 8\n" +
			`envoy_stats_prefix is the sink's prefix without its dot (e.g. "envoy"), got "edge."` + "\n" +
			`envoy_stats_namespaces[0] must be a namespace name without a leading or trailing dot (e.g. "wasmcustom"), got ""`},
		{file: "bad_profile.yaml", wantError: `profile must be "otel", "kong" or "apisix", got "nginx"`},
		{file: "bad_dimension.yaml", wantError: `dimensions: unknown dimension "path", want one of service, upstream, target, consumer, response_source, or a span attribute name (dotted, e.g. http.flavor)`},
		{file: "dimensions_wrong_profile.yaml", wantError: `dimensions apply to the "otel" profile only; profile is "apisix"`},
		{file: "bad_limits.yaml", wantError: "limits.max_tuples must be 0 (no limit) or positive, got -1\n" +
			"limits.max_gateways must be 0 (no limit) or positive, got -2\n" +
			"limits.max_label_value_length must be from 16 to 16384 bytes, got 8\n" +
			"limits.max_request_bytes_in_flight must be 0 (no limit) or positive, got -3\n" +
			"limits.max_pushed_targets must be at least 1, got 0"},
		// The keys the limits section replaced still work, each taken as
		// its new key (and warned about when the receiver is created).
		{file: "deprecated_limits.yaml", check: func(t *testing.T, c *Config) {
			want := LimitsConfig{MaxTuples: 500, MaxGateways: 7, MaxLabelValueLength: 64, MaxRequestBytesInFlight: 1 << 20, MaxPushedTargets: 300,
				AdmissionQueueSize: defaultAdmissionQueueSize, AdmissionQueueTimeout: defaultAdmissionQueueTimeout,
				MaxPushedPoints: gateway.DefaultMaxPushPoints, MaxPushedLabelBytes: gateway.DefaultMaxPushLabelBytes}
			if c.Limits != want {
				t.Errorf("limits %+v, want %+v", c.Limits, want)
			}
			if len(c.renamed) != 5 {
				t.Errorf("renamed keys %v, want all five", c.renamed)
			}
			if got := c.healthConfig().Push.Get().MaxTargets; got != 300 {
				t.Errorf("the health part runs with push max_targets %d, want 300", got)
			}
		}},
		{file: "bad_detect.yaml", wantError: `detect must be one of auto, kong, apisix, envoy, semconv, traefik, got "lighttpd"`},
		{file: "no_protocols.yaml", wantError: "protocols: at least one of grpc and http must be enabled"},
		{file: "bad_flush_interval.yaml", wantError: "flush_interval must be positive, got -1s"},
		{file: "empty_endpoint.yaml", wantError: "protocols.http.endpoint must not be empty"},
	})
}

// configCase is one testdata file: the error Validate must return, or the
// checks the decoded config must pass.
type configCase struct {
	file      string
	check     func(*testing.T, *Config)
	wantError string
}

func runConfigCases(t *testing.T, cases []configCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			cfg := createDefaultConfig()
			if !testutil.CheckError(t, testutil.LoadConfig(t, filepath.Join("testdata", "config", c.file), cfg), c.wantError) {
				return
			}
			c.check(t, cfg)
		})
	}
}

// prefer_name applies to the apisix profile only.
func TestPreferNameIsAPISIXOnly(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.PreferName = true
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `prefer_name applies to the "apisix" profile only`) {
		t.Errorf("prefer_name on the otel profile: %v", err)
	}
}

// histogram.explicit.buckets sets the otel profile's duration buckets, as
// spanmetrics users set them (traffic's TestDurationBounds: only the
// duration histograms take them).
func TestHistogramBucketsOption(t *testing.T) {
	runConfigCases(t, []configCase{{file: "histogram_buckets.yaml", check: func(t *testing.T, c *Config) {
		if got, want := c.durationBounds(), []float64{0.002, 0.01, 0.1, 1, 30}; !slices.Equal(got, want) {
			t.Errorf("duration bounds %v, want %v", got, want)
		}
	}}})
	c := createDefaultConfig()
	c.Histogram.Explicit.Buckets = []time.Duration{time.Second, time.Millisecond}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "positive and increasing") {
		t.Errorf("decreasing buckets: %v", err)
	}
}

// per_consumer is refused on the profiles other than kong.
func TestPerConsumerIsKongOnly(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.Profile, cfg.PerConsumer = traffic.ProfileAPISIX, true
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "per_consumer applies to the \"kong\" profile only") {
		t.Errorf("per_consumer on apisix: %v", err)
	}
	cfg.Profile = traffic.ProfileKong
	if err := cfg.Validate(); err != nil {
		t.Errorf("per_consumer on kong: %v", err)
	}
}

// A bound set under its old and its new name is refused: which was meant
// cannot be told.
func TestLimitSetUnderBothNames(t *testing.T) {
	err := testutil.DecodeConfig(t, filepath.Join("testdata", "config", "limits_twice.yaml"), createDefaultConfig())
	const want = "'' max_series and limits.max_tuples are the same setting (max_series is its deprecated name): set only limits.max_tuples"
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v\nwant %s", err, want)
	}
}

// The deprecated keys are said at start, once each, with the key to write.
func TestDeprecatedLimitKeysAreWarnedAtStart(t *testing.T) {
	cfg := createDefaultConfig()
	if err := testutil.LoadConfig(t, filepath.Join("testdata", "config", "deprecated_limits.yaml"), cfg); err != nil {
		t.Fatal(err)
	}
	h := start(t, new(consumertest.MetricsSink), func(c *Config) {
		c.Limits, c.Health, c.renamed = cfg.Limits, cfg.Health, cfg.renamed
	})
	var got []string
	for _, e := range h.logs.FilterMessageSnippet("is deprecated").All() {
		got = append(got, e.Message)
	}
	want := []string{
		"Configuration key max_series is deprecated: write limits.max_tuples (the value was taken from max_series)",
		"Configuration key max_gateways is deprecated: write limits.max_gateways (the value was taken from max_gateways)",
		"Configuration key max_label_value_length is deprecated: write limits.max_label_value_length (the value was taken from max_label_value_length)",
		"Configuration key max_request_bytes_in_flight is deprecated: write limits.max_request_bytes_in_flight (the value was taken from max_request_bytes_in_flight)",
		"Configuration key health.push.max_targets is deprecated: write limits.max_pushed_targets (the value was taken from health.push.max_targets)",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("warnings\n%q\nwant\n%q", got, want)
	}
}
