package gatewayreceiver

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/config/configoptional"

	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/health"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/traffic"
)

func TestHealthConfig(t *testing.T) {
	runConfigCases(t, []configCase{
		{file: "default.yaml", check: func(t *testing.T, c *Config) {
			if c.Health.HasValue() {
				t.Error("health is on without a health section")
			}
		}},
		{file: "health_defaults.yaml", check: func(t *testing.T, c *Config) {
			h := c.Health.Get()
			if h.Profile != "" || c.healthProfile() != ProfileOTel || h.ReportInterval != 30*time.Second || h.StaleAfter != time.Minute ||
				h.Shard.Count != 1 || !h.Push.HasValue() || h.Push.Get().Path != health.DefaultPushPath {
				t.Errorf("defaults: %+v", h)
			}
			if p := h.Push.Get(); p.StaleAfter != 5*time.Minute || p.Expiry != time.Hour || p.MaxTargets != 100_000 || p.MaxClockSkew != 5*time.Minute {
				t.Errorf("push defaults: %+v", *p)
			}
			// Poller fields left out stay zero: the poller takes its
			// defaults (internal/health TestPollerDefaults).
			if p := h.Pollers["kong"][0]; p.Endpoint != "http://kong:8001" || p.Interval != 0 || p.Timeout != 0 || p.MaxConcurrency != 0 || p.PageSize != 0 || p.MaxResponseBodySize != 0 || p.RequestRate != 0 {
				t.Errorf("poller: %+v", p)
			}
		}},
		{file: "health_full.yaml", check: func(t *testing.T, c *Config) {
			h := c.Health.Get()
			if h.Profile != ProfileKong || c.healthProfile() != ProfileKong || h.ReportInterval != 15*time.Second || h.StaleAfter != 45*time.Second ||
				h.Shard.Index != 1 || h.Shard.Count != 3 || h.Push.Get().Path != "/health/events" {
				t.Errorf("health: %+v", h)
			}
			if p := c.healthConfig().Push.Get(); p.StaleAfter != 2*time.Minute || p.Expiry != 30*time.Minute || p.MaxTargets != 500 || p.MaxClockSkew != 30*time.Second {
				t.Errorf("push: %+v", *p)
			}
			k := h.Pollers["kong"][0]
			if k.Endpoint != "https://kong-0.internal:8444" || k.Instance != "kong-0" || string(k.AdminToken) != "s3cret" ||
				k.Interval != 5*time.Second || k.Timeout != 2*time.Second || k.MaxConcurrency != 32 || k.PageSize != 500 || k.MaxResponseBodySize != 1<<20 || k.RequestRate != 250 ||
				!k.TLS.InsecureSkipVerify || len(k.Headers) != 1 || string(k.Headers[0].Value) != "edge" {
				t.Errorf("kong: %+v", k)
			}
			if len(h.Pollers["apisix"]) != 1 || h.Pollers["apisix"][0].Endpoint != "http://apisix-0:9090" || h.Pollers["envoy"][0].Interval != 20*time.Second {
				t.Errorf("apisix %+v envoy %+v", h.Pollers["apisix"], h.Pollers["envoy"])
			}
		}},
		{file: "health_bad_values.yaml", wantError: "health: report_interval must be positive, got 0s\n" +
			"stale_after must be positive, got -1s\n" +
			"shard.index must be in [0, 2), got 2\n" +
			`push.path must start with "/", got "health"`},
		{file: "health_bad_poller.yaml", wantError: "health: kong[0].endpoint must be an http:// or https:// URL, got \"kong:8001\"\n" +
			"kong[0].max_concurrency must be positive, got -1\n" +
			"kong[0].page_size must be in [1, 1000], got 5000\n" +
			"kong[0].request_rate must be positive (requests per second; 0: spread over the interval), got -2\n" +
			"kong[0].max_response_body_size must be positive (bytes), got -1\n" +
			"stale_after (30s) must be longer than kong[0].interval (30s)\n" +
			"envoy[0].endpoint must not be empty\n" +
			"envoy[0]: admin_token and page_size apply to kong pollers only"},
		{file: "health_bad_push.yaml", wantError: "limits.max_pushed_targets must be at least 1, got -5\n" +
			"health: push.stale_after must be positive, got -1s\n" +
			"push.max_clock_skew must be positive, got 0s"},
		{file: "health_bad_push_expiry.yaml", wantError: "health: push.expiry (10m0s) must be longer than push.stale_after (10m0s)"},
		{file: "health_push_without_http.yaml", wantError: "health.push needs protocols.http, which is disabled; set health.push.enabled: false"},
	})
}

func TestHealthProfileDecodeError(t *testing.T) {
	cfg := createDefaultConfig()
	err := testutil.DecodeConfig(t, filepath.Join("testdata", "config", "health_bad_profile.yaml"), cfg)
	// The outer layer is the collector's, around Config.Unmarshal (limits.go).
	const want = `decoding failed due to the following error(s):

'' decoding failed due to the following error(s):

'health' decoding failed due to the following error(s):

'profile' profile must be one of otel, kong, apisix, got "prometheus"`
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v\nwant %s", err, want)
	}
}

func TestHealthProfileFollowsTheReceiverProfile(t *testing.T) {
	c := createDefaultConfig()
	c.Profile = traffic.ProfileAPISIX
	h := defaultHealthConfig()
	c.Health = configoptional.Some(h)
	if got := c.healthProfile(); got != ProfileAPISIX {
		t.Fatalf("health profile = %q, want the receiver's %q", got, ProfileAPISIX)
	}
	c.Health.Get().Profile = ProfileKong
	if got := c.healthProfile(); got != ProfileKong {
		t.Fatalf("health profile = %q, want its own %q", got, ProfileKong)
	}
}

// health.profile falls back to the receiver's profile: every traffic
// profile has a health naming of the same name, in the same order (the
// names validation offers for both).
func TestEveryProfileNamesHealth(t *testing.T) {
	if got, want := health.ProfileNames(), traffic.ProfileNames(); !slices.Equal(got, want) {
		t.Fatalf("health profiles %q, traffic profiles %q", got, want)
	}
}
