package gatewayreceiver

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelgateway/otelgateway/internal/testutil"
)

// fixtureServer answers path with the body the test sets, as JSON; any
// other path is 404. It also records the Accept header it saw.
type fixtureServer struct {
	path   string
	body   atomic.Pointer[[]byte]
	accept atomic.Value
}

func (f *fixtureServer) set(b []byte) { f.body.Store(&b) }

func (f *fixtureServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.RequestURI() != f.path {
		http.NotFound(w, r)
		return
	}
	f.accept.Store(r.Header.Get("Accept"))
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(*f.body.Load())
}

func startFixture(t *testing.T, path, file string) (*fixtureServer, string) {
	t.Helper()
	f := &fixtureServer{path: path}
	b, err := os.ReadFile(filepath.Join("internal", "gateway", "testdata", "health", file))
	if err != nil {
		t.Fatal(err)
	}
	f.set(b)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func simplePoller(endpoint, instance string) PollerConfig {
	p := PollerConfig{Instance: instance}
	p.Endpoint = endpoint
	p.Timeout = 2 * time.Second
	return p
}

// APISIX's tutorial output, `"nodes": {}` included, in the apisix profile;
// then a checker vanishes and a node degrades to mostly_healthy (still 1).
func TestAPISIXPollAPISIXProfile(t *testing.T) {
	fx, url := startFixture(t, "/v1/healthcheck", "apisix_tutorial.json")
	hh := newHealthHarness(t, func(c *HealthConfig) {
		c.Profile = ProfileAPISIX
		c.Pollers = pollersOf("apisix", simplePoller(url, "apisix-0"))
	})
	hh.pollAndEmit(0)
	if a := fx.accept.Load(); a != "application/json" {
		t.Errorf("Accept = %v, want application/json (APISIX answers HTML otherwise)", a)
	}
	checkSeries(t, seriesState(hh.sink.AllMetrics()), map[string]int64{
		`apisix_upstream_status{ip="127.0.0.1",name="/apisix/routes/example-hc-route",port="1970"}@apisix-0`: 1,
		`apisix_upstream_status{ip="127.0.0.1",name="/apisix/routes/example-hc-route",port="1980"}@apisix-0`: 1,
	})
	fx.set([]byte(`[{"name":"/apisix/routes/example-hc-route","type":"http","nodes":[
		{"ip":"127.0.0.1","port":1970,"hostname":"127.0.0.1","status":"mostly_healthy"}]},
		{"name":"/apisix/upstreams/7","type":"tcp","nodes":[{"ip":"10.0.0.7","port":6379,"hostname":"redis","status":"mostly_unhealthy"},
		{"ip":"10.0.0.8","port":6379,"hostname":"redis","status":"unhealthy"}]}]`))
	hh.pollAndEmit(0)
	checkSeries(t, seriesState(hh.sink.AllMetrics()), map[string]int64{
		`apisix_upstream_status{ip="127.0.0.1",name="/apisix/routes/example-hc-route",port="1970"}@apisix-0`: 1,
		`apisix_upstream_status{ip="10.0.0.7",name="/apisix/upstreams/7",port="6379"}@apisix-0`:              0,
		`apisix_upstream_status{ip="10.0.0.8",name="/apisix/upstreams/7",port="6379"}@apisix-0`:              0,
	})
}

// The Envoy fixture (omitted zero fields, stats as strings, flags) in the
// otel profile: envoy's one-hot set is healthy, degraded, unhealthy,
// unknown.
func TestEnvoyPollOTelProfile(t *testing.T) {
	fx, url := startFixture(t, "/clusters?format=json", "envoy_clusters.json")
	hh := newHealthHarness(t, func(c *HealthConfig) {
		c.Pollers = pollersOf("envoy", simplePoller(url, "envoy-0"))
	})
	hh.pollAndEmit(0)
	want := map[string]int64{}
	row := func(target, addr, state string) {
		for _, s := range []string{"healthy", "degraded", "unhealthy", "unknown"} {
			v := int64(0)
			if s == state {
				v = 1
			}
			want[`gateway.upstream.target.health{gateway.target.address="`+addr+`",gateway.target="`+target+`",gateway.upstream.name="fake_cluster",state="`+s+`"}@envoy-0`] = v
		}
	}
	row("foo.com:80", "1.2.3.4:80", "unhealthy")
	row("10.0.0.2:8080", "10.0.0.2:8080", "healthy")
	row("10.0.0.3:8080", "10.0.0.3:8080", "degraded")
	row("/run/app.sock", "/run/app.sock", "healthy")
	for s, n := range map[string]int64{"healthy": 2, "degraded": 1, "unhealthy": 1, "unknown": 0} {
		want[`gateway.upstream.targets{gateway.upstream.name="fake_cluster",state="`+s+`"}@envoy-0`] = n
	}
	checkSeries(t, seriesState(hh.sink.AllMetrics()), want)

	// Envoy restarted with no clusters: it prints {} and every series goes.
	fx.set([]byte("{}"))
	hh.pollAndEmit(0)
	checkSeries(t, seriesState(hh.sink.AllMetrics()), map[string]int64{})
	if n := testutil.Int64Sum(t, hh.tel, "otelcol_receiver_gateway_health_polls", attribute.String("gateway", "envoy"), attribute.String("outcome", "success")); n != 2 {
		t.Errorf("envoy successful polls = %d, want 2", n)
	}

	// Envoy's text format where JSON was expected is malformed.
	fx.set([]byte("fake_cluster::1.2.3.4:80::health_flags::healthy\n"))
	hh.pollAndEmit(0)
	if n := testutil.Int64Sum(t, hh.tel, "otelcol_receiver_gateway_health_polls", attribute.String("outcome", "malformed")); n != 1 {
		t.Errorf("malformed polls = %d, want 1", n)
	}
}
