package gatewayreceiver

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/health"
)

func pushHarness(t *testing.T, maxTargets int) *healthHarness {
	return newHealthHarness(t, func(c *HealthConfig) {
		c.Profile = ProfileKong
		p := c.Push.Get()
		p.StaleAfter, p.Expiry, p.MaxTargets = time.Minute, 5*time.Minute, maxTargets
	})
}

func kongEvent(target, ip, state string) *gateway.HealthEvent {
	st, _ := gateway.ParseHealthState(state)
	return &gateway.HealthEvent{Gateway: "kong-7", Kind: gateway.KindKong,
		TargetHealth: gateway.TargetHealth{Upstream: "billing", Target: target, IP: ip, Port: "8080", State: st}}
}

// A pushed row turns unknown push.stale_after after its last event and is
// removed (series withdrawn) push.expiry after it; an event in between
// refreshes it.
func TestPushedRowsStaleThenExpire(t *testing.T) {
	hh := pushHarness(t, 10)
	m := hh.h
	t0 := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	step := func(at time.Duration) {
		m.ExpirePushed(t0.Add(at))
		m.Emit(false)
	}
	for _, ev := range []*gateway.HealthEvent{kongEvent("a:8080", "10.0.0.1", "healthy"), kongEvent("b:8080", "10.0.0.2", "unhealthy")} {
		if got := m.ApplyEvent(ev, t0); got != health.PushApplied {
			t.Fatalf("apply: %d", got)
		}
	}
	step(0)
	want := map[string]int64{}
	kongSeries(want, "kong-7", "billing", "a:8080", "10.0.0.1:8080", "healthy")
	kongSeries(want, "kong-7", "billing", "b:8080", "10.0.0.2:8080", "unhealthy")
	checkSeries(t, seriesState(hh.sink.AllMetrics()), want)

	// a is refreshed at 30s; at 60s exactly neither is stale yet (strictly
	// older than the cutoff), at 61s b is unknown (0 in Kong's four series).
	m.ApplyEvent(kongEvent("a:8080", "10.0.0.1", "healthy"), t0.Add(30*time.Second))
	step(time.Minute)
	checkSeries(t, seriesState(hh.sink.AllMetrics()), want)
	step(61 * time.Second)
	kongSeries(want, "kong-7", "billing", "b:8080", "10.0.0.2:8080", "unknown")
	checkSeries(t, seriesState(hh.sink.AllMetrics()), want)
	if got := testutil.Int64Gauge(t, hh.tel, "otelcol_receiver_gateway_health_targets", attribute.String("state", "unknown")); got != 1 {
		t.Errorf("targets{state=unknown} = %d, want 1", got)
	}

	// 91s: a is stale too. 5m1s: b (last event at 0) is removed; a (30s)
	// stays unknown until 5m31s.
	step(91 * time.Second)
	kongSeries(want, "kong-7", "billing", "a:8080", "10.0.0.1:8080", "unknown")
	checkSeries(t, seriesState(hh.sink.AllMetrics()), want)
	step(5*time.Minute + time.Second)
	delete4(want, "b:8080", "10.0.0.2:8080")
	checkSeries(t, seriesState(hh.sink.AllMetrics()), want)
	step(5*time.Minute + 31*time.Second)
	if got := seriesState(hh.sink.AllMetrics()); len(got) != 0 {
		t.Fatalf("series left after expiry: %v", got)
	}
	if rows, pushed := m.Rows(); pushed != 0 || rows != 0 {
		t.Fatalf("table keeps %d pushed rows, %d rows", pushed, rows)
	}
	// A removal is sent with no recorded value: the last batch withdraws a.
	last := hh.sink.AllMetrics()[len(hh.sink.AllMetrics())-1]
	n := 0
	forEachPoint(last, func(_ string, dp pmetric.NumberDataPoint) {
		if !dp.Flags().NoRecordedValue() {
			t.Errorf("removal batch carries a value")
		}
		n++
	})
	if n != 4 {
		t.Errorf("removal batch has %d points, want Kong's 4", n)
	}
}

func delete4(want map[string]int64, target, address string) {
	for k := range want {
		if strings.Contains(k, `target="`+target+`"`) && strings.Contains(k, `address="`+address+`"`) {
			delete(want, k)
		}
	}
}

// A polled row is its poller's: push expiry leaves it alone, and a poll
// that reports a pushed row takes it over, freeing its push slot.
func TestPushExpiryLeavesPolledRows(t *testing.T) {
	hh := pushHarness(t, 1)
	m := hh.h
	t0 := time.Now()
	pushed := func() int { _, n := m.Rows(); return n }
	m.ApplyPoll("kong-7", gateway.KindKong, 1, t0, []gateway.TargetHealth{{Upstream: "billing", Target: "a:8080", IP: "10.0.0.1", Port: "8080", State: gateway.HealthHealthy}})
	// A push about the polled row updates it but takes no push slot.
	if got := m.ApplyEvent(kongEvent("a:8080", "10.0.0.1", "unhealthy"), t0); got != health.PushApplied || pushed() != 0 {
		t.Fatalf("push on a polled row: %d, pushed %d", got, pushed())
	}
	if got := m.ApplyEvent(kongEvent("b:8080", "10.0.0.2", "healthy"), t0); got != health.PushApplied || pushed() != 1 {
		t.Fatalf("push b: %d, pushed %d", got, pushed())
	}
	if got := m.ApplyEvent(kongEvent("c:8080", "10.0.0.3", "healthy"), t0); got != health.PushOverLimit {
		t.Fatalf("push c over the limit: %d", got)
	}
	// The poller now lists b: it becomes the poller's, the slot frees up.
	m.ApplyPoll("kong-7", gateway.KindKong, 2, t0, []gateway.TargetHealth{{Upstream: "billing", Target: "b:8080", IP: "10.0.0.2", Port: "8080", State: gateway.HealthHealthy}})
	if pushed() != 0 {
		t.Fatalf("pushed = %d after the poll took b over", pushed())
	}
	if got := m.ApplyEvent(kongEvent("c:8080", "10.0.0.3", "healthy"), t0); got != health.PushApplied {
		t.Fatalf("push c after room freed: %d", got)
	}
	m.ExpirePushed(t0.Add(time.Hour))
	m.Emit(false)
	want := map[string]int64{}
	kongSeries(want, "kong-7", "billing", "a:8080", "10.0.0.1:8080", "unhealthy")
	kongSeries(want, "kong-7", "billing", "b:8080", "10.0.0.2:8080", "healthy")
	checkSeries(t, seriesState(hh.sink.AllMetrics()), want)
}

// Over push.max_targets, events about new targets are refused by index
// with a message naming the option; known targets still update.
func TestPushMaxTargets(t *testing.T) {
	hh := pushHarness(t, 2)
	body := `[{"gateway":"kong-7","kind":"kong","upstream":"billing","target":"a:8080","address":"10.0.0.1:8080","state":"healthy"},
	 {"gateway":"kong-7","kind":"kong","upstream":"billing","target":"b:8080","address":"10.0.0.2:8080","state":"healthy"},
	 {"gateway":"kong-7","kind":"kong","upstream":"billing","target":"c:8080","address":"10.0.0.3:8080","state":"healthy"},
	 {"gateway":"kong-7","upstream":"billing","target":"x:1","state":"purple"},
	 {"gateway":"kong-7","kind":"kong","upstream":"billing","target":"d:8080","address":"10.0.0.4:8080","state":"healthy"}]`
	const refused = "refused: 2 pushed targets are kept already (limits.max_pushed_targets); an event about a new target is refused until pushed targets expire"
	code, got := pushTo(hh, body)
	want := `{"accepted":2,"out_of_order":0,"rejected":[{"index":2,"error":"` + refused + `"},` +
		`{"index":3,"error":"\"state\" \"purple\" is not one of healthy, unhealthy, dns_error, healthchecks_off, mostly_healthy, mostly_unhealthy, degraded, unknown"},` +
		`{"index":4,"error":"` + refused + `"}]}`
	if code != http.StatusOK || got != want {
		t.Fatalf("%d %s\nwant 200 %s", code, got, want)
	}
	// Only new targets: nothing applied, 400.
	code, got = pushTo(hh, `{"gateway":"kong-7","kind":"kong","upstream":"billing","target":"c:8080","address":"10.0.0.3:8080","state":"healthy"}`)
	if want := `{"accepted":0,"out_of_order":0,"rejected":[{"index":0,"error":"` + refused + `"}]}`; code != http.StatusBadRequest || got != want {
		t.Fatalf("%d %s\nwant 400 %s", code, got, want)
	}
	// A known target still updates.
	code, got = pushTo(hh, `{"gateway":"kong-7","kind":"kong","upstream":"billing","target":"a:8080","address":"10.0.0.1:8080","state":"unhealthy"}`)
	if code != http.StatusOK || got != `{"accepted":1,"out_of_order":0}` {
		t.Fatalf("update: %d %s", code, got)
	}
	for outcome, n := range map[string]int64{"accepted": 3, "rejected": 1, "over_limit": 3, "out_of_order": 0} {
		if got := testutil.Int64Sum(t, hh.tel, "otelcol_receiver_gateway_health_events", attribute.String("outcome", outcome)); got != n {
			t.Errorf("events{outcome=%s} = %d, want %d", outcome, got, n)
		}
	}
}

func pushTo(hh *healthHarness, body string) (int, string) {
	req := httptest.NewRequest(http.MethodPost, health.DefaultPushPath, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	hh.h.PushHandler().ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// The running receiver applies the push lifetime on its report ticks.
func TestPushExpiryRunsOnReportTicks(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) {
		hc := defaultHealthConfig()
		hc.Profile = ProfileKong
		hc.ReportInterval = 20 * time.Millisecond
		p := hc.Push.Get()
		p.StaleAfter, p.Expiry = 100*time.Millisecond, 300*time.Millisecond
		c.Health = configoptional.Some(hc)
	})
	if code, body := postHealth(t, "http://"+h.httpAddr+health.DefaultPushPath, "application/json",
		`{"gateway":"kong-7","kind":"kong","upstream":"billing","target":"a:8080","address":"10.0.0.1:8080","state":"healthy"}`); code != http.StatusOK {
		t.Fatalf("push: %d %s", code, body)
	}
	want := map[string]int64{}
	kongSeries(want, "kong-7", "billing", "a:8080", "10.0.0.1:8080", "unknown")
	waitFor(t, func() bool {
		got := seriesState(sink.AllMetrics())
		return len(got) == 4 && got[`kong_upstream_target_health{address="10.0.0.1:8080",state="healthy",subsystem="http",target="a:8080",upstream="billing"}@kong-7`] == 0
	})
	checkSeries(t, seriesState(sink.AllMetrics()), want)
	waitFor(t, func() bool { return len(seriesState(sink.AllMetrics())) == 0 })
}

// TestPushedTargetMemory reports what a pushed health row costs the
// receiver (the README's Limits table, limits.max_pushed_targets): the
// seeds' 20,000 targets (10,000 upstreams of 2), pushed, fail above the
// budget (the figure measured, 574 B, with ~5 % room).
func TestPushedTargetMemory(t *testing.T) {
	const n = 20_000
	hh := pushHarness(t, n)
	now := time.Now()
	var before, after runtime.MemStats
	// Twice: what earlier tests left in sync.Pools survives one GC (in the
	// pools' victim caches) and would be freed by the GC below, counted
	// against the rows (the difference then wraps below zero).
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		ev := kongEvent("t"+strconv.Itoa(i%2)+":8080", "10.0."+strconv.Itoa(i/256%256)+"."+strconv.Itoa(i%256), "healthy")
		ev.Upstream = "upstream-" + strconv.Itoa(i/2)
		if got := hh.h.ApplyEvent(ev, now); got != health.PushApplied {
			t.Fatalf("event %d: %v", i, got)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("pushed health row: %.0f B each (%d rows)", per, n)
	if per > 600 {
		t.Errorf("a pushed row costs %.0f B, want at most 600", per)
	}
	runtime.KeepAlive(hh)
}
