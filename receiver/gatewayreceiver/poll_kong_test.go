package gatewayreceiver

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/health"
)

func TestKongPollKongProfile(t *testing.T) {
	f := smallKong()
	f.Token = "s3cret"
	srv := startFakeKong(t, f)
	hh := newHealthHarness(t, func(c *HealthConfig) {
		c.Profile = ProfileKong
		c.Pollers = pollersOf("kong", kongPoller(srv.URL, func(p *PollerConfig) { p.AdminToken = "s3cret" }))
	})
	hh.pollAndEmit(0)
	want := smallKongWant()
	checkSeries(t, seriesState(hh.sink.AllMetrics()), want)
	// Page size 2: upstreams in 2 pages, billing's targets in 2 pages,
	// the others 1 each.
	if n := f.Requests(); n != 6 {
		t.Errorf("requests = %d, want 6", n)
	}

	// A target flips: the next emission carries its four series only.
	f.SetHealth("billing", 2, 0, "UNHEALTHY")
	hh.pollAndEmit(0)
	all := hh.sink.AllMetrics()
	if n := pointsIn(all[len(all)-1]); n != 4 {
		t.Errorf("change batch has %d points, want 4", n)
	}
	kongSeries(want, "kong-1", "billing", "10.0.0.9:80", "10.0.0.9:80", "unhealthy")
	checkSeries(t, seriesState(all), want)

	// Nothing changed: nothing is emitted until the snapshot.
	hh.pollAndEmit(0)
	if got := len(hh.sink.AllMetrics()); got != len(all) {
		t.Errorf("a poll without changes emitted %d batches", got-len(all))
	}
	hh.h.Emit(true)
	last := hh.sink.AllMetrics()[len(hh.sink.AllMetrics())-1]
	if n := pointsIn(last); n != 6*4 {
		t.Errorf("snapshot has %d points, want 24", n)
	}

	// Targets and upstreams that disappear take their series with them.
	f.RemoveUpstream("search")
	f.AddUpstream("mock-upstream", nil)
	hh.pollAndEmit(0)
	for k := range want {
		if strings.Contains(k, `upstream="search"`) || strings.Contains(k, `upstream="mock-upstream"`) {
			delete(want, k)
		}
	}
	checkSeries(t, seriesState(hh.sink.AllMetrics()), want)
	if n := testutil.Int64Sum(t, hh.tel, "otelcol_receiver_gateway_health_polls", attribute.String("outcome", "success"), attribute.String("gateway", "kong"), attribute.String("instance", "kong-1")); n != 4 {
		t.Errorf("successful polls = %d, want 4", n)
	}
	if n := testutil.Int64Gauge(t, hh.tel, "otelcol_receiver_gateway_health_targets", attribute.String("state", "unhealthy")); n != 2 {
		t.Errorf("unhealthy targets = %d, want 2", n)
	}
	if n := testutil.Int64Gauge(t, hh.tel, "otelcol_receiver_gateway_health_last_success", attribute.String("instance", "kong-1")); n < time.Now().Add(-time.Minute).Unix() {
		t.Errorf("last success = %d", n)
	}
}

func TestKongPollOTelProfile(t *testing.T) {
	srv := startFakeKong(t, smallKong())
	hh := newHealthHarness(t, func(c *HealthConfig) {
		c.Pollers = pollersOf("kong", kongPoller(srv.URL, nil))
	})
	hh.pollAndEmit(0)
	want := map[string]int64{}
	row := func(up, target, addr, state string) {
		for _, s := range []string{"healthy", "unhealthy", "dns_error", "healthchecks_off", "unknown"} {
			v := int64(0)
			if s == state {
				v = 1
			}
			want[`gateway.upstream.target.health{gateway.target.address="`+addr+`",gateway.target="`+target+`",gateway.upstream.name="`+up+`",state="`+s+`"}@kong-1`] = v
		}
	}
	counts := func(up string, byState map[string]int64) {
		for _, s := range []string{"healthy", "unhealthy", "dns_error", "healthchecks_off", "unknown"} {
			want[`gateway.upstream.targets{gateway.upstream.name="`+up+`",state="`+s+`"}@kong-1`] = byState[s]
		}
	}
	row("billing", "api.internal:8080", "10.0.0.1:8080", "healthy")
	row("billing", "api.internal:8080", "10.0.0.2:8080", "unhealthy")
	row("billing", "some-random-dns:80", "", "dns_error")
	row("billing", "10.0.0.9:80", "10.0.0.9:80", "healthy")
	row("search", "10.0.1.1:9200", "10.0.1.1:9200", "healthchecks_off")
	row("mock-upstream", "10.0.2.1:80", "10.0.2.1:80", "unhealthy")
	counts("billing", map[string]int64{"healthy": 2, "unhealthy": 1, "dns_error": 1})
	counts("search", map[string]int64{"healthchecks_off": 1})
	counts("mock-upstream", map[string]int64{"unhealthy": 1})
	checkSeries(t, seriesState(hh.sink.AllMetrics()), want)
	rm := hh.sink.AllMetrics()[0].ResourceMetrics().At(0).Resource().Attributes().AsRaw()
	if len(rm) != 2 || rm["service.name"] != "kong" || rm["service.instance.id"] != "kong-1" {
		t.Errorf("resource = %v", rm)
	}
}

// Each fault: the poll's outcome, the rows keep their last state (nothing
// swept), one warning for three failing polls, and after stale_after the
// rows turn unknown (all four Kong series 0).
// kongPollInterval is a Kong poller's interval when none is set.
const kongPollInterval = 30 * time.Second

func TestKongFaults(t *testing.T) {
	cases := []struct {
		name    string
		fault   testutil.Fault
		down    bool
		outcome string
		logMsg  string
	}{
		{name: "500", fault: testutil.Fault500, outcome: "http_status", logMsg: `status 500, body starts "{\"message\":\"An unexpected error occurred\"}"`},
		{name: "HTML", fault: testutil.FaultHTML, outcome: "malformed", logMsg: `Kong upstream list: invalid character '<' looking for beginning of value (body starts "<html><head><title>502 Bad Gateway</title></head><body>nginx</bo"…)`},
		{name: "truncated", fault: testutil.FaultTruncated, outcome: "malformed", logMsg: "Kong upstream list: unexpected end of JSON input"},
		{name: "wrong JSON", fault: testutil.FaultWrongJSON, outcome: "malformed", logMsg: "Kong upstream list: json: cannot unmarshal object into Go struct field"},
		{name: "pagination loop", fault: testutil.FaultLoop, outcome: "pagination_loop", logMsg: `pagination loop: next page "/upstreams?size=2" after 2 pages was already fetched`},
		{name: "slow", fault: testutil.FaultSlow, outcome: "timeout", logMsg: `Get "http://` /* then either "context deadline exceeded" or "request canceled (Client.Timeout …)" */},
		{name: "down", down: true, outcome: "connection_error", logMsg: "connection refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := smallKong()
			srv := startFakeKong(t, f)
			// Only the slow case needs a short timeout; the others keep a
			// long one, so that a loaded machine (a poll of several pages
			// took over 200 ms under -race with other work) cannot turn
			// their outcome into a timeout.
			timeout := 10 * time.Second
			if c.fault == testutil.FaultSlow {
				timeout = 200 * time.Millisecond
			}
			hh := newHealthHarness(t, func(hc *HealthConfig) {
				hc.Profile = ProfileKong
				hc.Pollers = pollersOf("kong", kongPoller(srv.URL, func(p *PollerConfig) { p.Timeout = timeout }))
			})
			hh.pollAndEmit(0)
			want := smallKongWant()
			checkSeries(t, seriesState(hh.sink.AllMetrics()), want)

			if c.down {
				f.Release()
				srv.Close()
			}
			f.SetFault(c.fault)
			for range 3 {
				hh.pollAndEmit(0)
			}
			// Failing polls keep the last known state.
			checkSeries(t, seriesState(hh.sink.AllMetrics()), want)
			if n := testutil.Int64Sum(t, hh.tel, "otelcol_receiver_gateway_health_polls", attribute.String("outcome", c.outcome)); n != 3 {
				t.Errorf("polls{outcome=%s} = %d, want 3", c.outcome, n)
			}
			warns := hh.logs.FilterMessage("Health poll failed; logged again only when the outcome changes").All()
			if len(warns) != 1 {
				t.Fatalf("%d warnings for 3 failed polls, want 1", len(warns))
			}
			if got := warns[0].ContextMap()["error"].(string); !strings.Contains(got, c.logMsg) {
				t.Errorf("logged error %q, want it to contain %q", got, c.logMsg)
			}
			if failures, next := hh.h.PollerBackoff(0); failures != 3 || next != 8*kongPollInterval {
				t.Errorf("after 3 failures: failures %d, next delay %v, want 3 and %v", failures, next, 8*kongPollInterval)
			}

			// Past stale_after every polled row is unknown: Kong prints 0
			// for all four states.
			hh.h.ExpireStale(time.Now().Add(hh.h.Config().StaleAfter+time.Second), hh.h.Config().StaleAfter)
			hh.h.Emit(false)
			for k := range want {
				want[k] = 0
			}
			checkSeries(t, seriesState(hh.sink.AllMetrics()), want)
			if n := testutil.Int64Gauge(t, hh.tel, "otelcol_receiver_gateway_health_targets", attribute.String("state", "unknown")); n != 6 {
				t.Errorf("unknown targets = %d, want 6", n)
			}
			if c.down {
				return
			}
			// Recovery: states come back, logged once.
			f.SetFault(testutil.FaultNone)
			hh.pollAndEmit(0)
			checkSeries(t, seriesState(hh.sink.AllMetrics()), smallKongWant())
			if n := hh.logs.FilterMessage("Health poll succeeds again").Len(); n != 1 {
				t.Errorf("%d recovery logs, want 1", n)
			}
		})
	}
}

// One upstream failing does not hold back the others; its rows are kept
// (unconfirmed) rather than swept.
func TestKongOneUpstreamFails(t *testing.T) {
	f := smallKong()
	srv := startFakeKong(t, f)
	hh := newHealthHarness(t, func(c *HealthConfig) {
		c.Profile = ProfileKong
		c.Pollers = pollersOf("kong", kongPoller(srv.URL, nil))
	})
	hh.pollAndEmit(0)
	f.SetUpstreamFault("search", testutil.FaultHTML)
	f.SetHealth("billing", 0, 0, "UNHEALTHY")
	secondPoll := time.Now()
	hh.pollAndEmit(0)
	want := smallKongWant()
	kongSeries(want, "kong-1", "billing", "api.internal:8080", "10.0.0.1:8080", "unhealthy")
	checkSeries(t, seriesState(hh.sink.AllMetrics()), want)
	if n := testutil.Int64Sum(t, hh.tel, "otelcol_receiver_gateway_health_polls", attribute.String("outcome", "malformed")); n != 1 {
		t.Errorf("malformed polls = %d, want 1", n)
	}
	// Only the failing upstream's row goes stale: it was last confirmed
	// before the second poll, every other row by it.
	now := time.Now()
	hh.h.ExpireStale(now, now.Sub(secondPoll))
	hh.h.Emit(false)
	kongSeries(want, "kong-1", "search", "10.0.1.1:9200", "10.0.1.1:9200", "none")
	checkSeries(t, seriesState(hh.sink.AllMetrics()), want)
}

func TestKongAdminTokenRequired(t *testing.T) {
	f := smallKong()
	f.Token = "s3cret"
	srv := startFakeKong(t, f)
	hh := newHealthHarness(t, func(c *HealthConfig) { c.Pollers = pollersOf("kong", kongPoller(srv.URL, nil)) })
	hh.pollAndEmit(0)
	if n := testutil.Int64Sum(t, hh.tel, "otelcol_receiver_gateway_health_polls", attribute.String("outcome", "http_status")); n != 1 {
		t.Errorf("polls without the token: http_status = %d, want 1", n)
	}
	if len(hh.sink.AllMetrics()) != 0 {
		t.Errorf("emitted %d batches, want none", len(hh.sink.AllMetrics()))
	}
}

// Two collectors with shard 0/2 and 1/2 poll disjoint upstreams that
// together are all of them.
func TestKongShards(t *testing.T) {
	f := testutil.NewFakeKong(50, 1)
	srv := startFakeKong(t, f)
	seen := map[string]int{}
	for i := range 2 {
		hh := newHealthHarness(t, func(c *HealthConfig) {
			c.Profile = ProfileKong
			c.Shard = health.ShardConfig{Index: i, Count: 2}
			c.Pollers = pollersOf("kong", kongPoller(srv.URL, func(p *PollerConfig) { p.PageSize = 0 }))
		})
		hh.pollAndEmit(0)
		n := 0
		for k, v := range seriesState(hh.sink.AllMetrics()) {
			if v == 1 {
				seen[k]++
				n++
			}
		}
		if n == 0 || n == 50 {
			t.Errorf("shard %d holds %d of 50 upstreams", i, n)
		}
	}
	if len(seen) != 50 {
		t.Fatalf("shards together hold %d upstreams, want 50", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s polled by %d shards", k, n)
		}
	}
}

// A poller against a Kong that never answers leaves the traffic path and
// other pollers alone: the receiver keeps accepting spans while the slow
// poll is in flight, and a healthy poller completes.
func TestSlowPollerBlocksNothing(t *testing.T) {
	slow := smallKong()
	slow.SetFault(testutil.FaultSlow)
	slowSrv := startFakeKong(t, slow)
	fast := smallKong()
	fastSrv := startFakeKong(t, fast)
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) {
		hc := defaultHealthConfig()
		hc.Profile = ProfileKong
		hc.Pollers = pollersOf("kong",
			kongPoller(slowSrv.URL, func(p *PollerConfig) { p.Instance = "slow"; p.Timeout = time.Hour }),
			kongPoller(fastSrv.URL, func(p *PollerConfig) { p.Interval = time.Second }), // its requests spread over 0.9s
		)
		c.Health = configoptional.Some(hc)
	})
	waitFor(t, func() bool { return len(seriesState(sink.AllMetrics())) == 24 })
	if code, body := post(t, h.httpAddr, pbContentType, protoBody(t, kongExport("GET", "/a", 200))); code != http.StatusOK {
		t.Fatalf("traffic export while a poll hangs: %d %s", code, body)
	}
	if slow.Requests() == 0 {
		t.Fatal("the slow Kong was never asked")
	}
}
