package gatewayreceiver

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/otelgateway/otelgateway/internal/testutil"
)

func TestConfig(t *testing.T) {
	runConfigCases(t, []configCase{
		{file: "default.yaml", check: func(t *testing.T, c *Config) {
			if c.Protocols.GRPC.Get().NetAddr.Endpoint != defaultGRPCEndpoint || c.Protocols.HTTP.Get().NetAddr.Endpoint != defaultHTTPEndpoint {
				t.Errorf("endpoints %q %q, want the defaults", c.Protocols.GRPC.Get().NetAddr.Endpoint, c.Protocols.HTTP.Get().NetAddr.Endpoint)
			}
			if c.Profile != "otel" || c.MaxSeries != defaultMaxSeries || c.Detect != "auto" || len(c.Dimensions) != 0 {
				t.Errorf("profile %q max_series %d detect %q dimensions %v, want the defaults", c.Profile, c.MaxSeries, c.Detect, c.Dimensions)
			}
			if len(c.Metrics) != 0 || !c.Exemplars.Enabled {
				t.Errorf("metrics %v exemplars %v, want every metric and exemplars on", c.Metrics, c.Exemplars.Enabled)
			}
			if c.FlushInterval != defaultFlushInterval {
				t.Errorf("flush_interval = %v, want %v", c.FlushInterval, defaultFlushInterval)
			}
			if c.AdmissionQueueSize != 1024 || c.AdmissionQueueTimeout != 2*time.Second {
				t.Errorf("admission_queue_size %d, admission_queue_timeout %v; want 1024 and 2s", c.AdmissionQueueSize, c.AdmissionQueueTimeout)
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
			c.MaxRequestBytesInFlight = 0
			if receivingSlots(c) != 0 {
				t.Errorf("%d receiving slots without max_request_bytes_in_flight, want no bound", receivingSlots(c))
			}
		}},
		{file: "bad_grpc_receive_timeout.yaml", wantError: "grpc_receive_timeout must be 0 (off) or positive, got -1s"},
		{file: "admission_queue.yaml", check: func(t *testing.T, c *Config) {
			if c.AdmissionQueueSize != 64 || c.AdmissionQueueTimeout != 500*time.Millisecond {
				t.Errorf("admission_queue_size %d, admission_queue_timeout %v; want 64 and 500ms", c.AdmissionQueueSize, c.AdmissionQueueTimeout)
			}
		}},
		{file: "bad_admission_queue_size.yaml", wantError: "admission_queue_size must be 0 (no request waits) or positive, got -1"},
		{file: "bad_admission_queue_timeout.yaml", wantError: "admission_queue_timeout must be 0 (no request waits) or positive, got -2s"},
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
			if c.Profile != "kong" || c.MaxSeries != 500 || c.detect().String() != "kong" {
				t.Errorf("profile %q max_series %d detect %q", c.Profile, c.MaxSeries, c.Detect)
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
		{file: "bad_profile.yaml", wantError: `profile must be "otel", "kong" or "apisix", got "nginx"`},
		{file: "bad_dimension.yaml", wantError: `dimensions: unknown dimension "path", want one of service, upstream, target, consumer, response_source, or a span attribute name (dotted, e.g. http.flavor)`},
		{file: "dimensions_wrong_profile.yaml", wantError: `dimensions apply to the "otel" profile only; profile is "apisix"`},
		{file: "bad_max_series.yaml", wantError: "max_series must be 0 (no limit) or positive, got -1"},
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
