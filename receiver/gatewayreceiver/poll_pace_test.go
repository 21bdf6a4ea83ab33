package gatewayreceiver

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelgateway/otelgateway/internal/testutil"
)

// inFlightAdmin wraps an admin API and records when each request arrived
// and the most it was serving at once.
type inFlightAdmin struct {
	inner    http.Handler
	mu       sync.Mutex
	arrivals []time.Time
	inFlight int
	peak     int
}

func (a *inFlightAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.arrivals = append(a.arrivals, time.Now())
	a.inFlight++
	a.peak = max(a.peak, a.inFlight)
	a.mu.Unlock()
	a.inner.ServeHTTP(w, r)
	a.mu.Lock()
	a.inFlight--
	a.mu.Unlock()
}

func (a *inFlightAdmin) stats() ([]time.Time, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.arrivals), a.peak
}

// Gentle on the gateway by default (issue 25, item 4): with the default
// settings a running poller spreads one poll's requests over its interval,
// one at a time against an API that answers at once, instead of
// max_concurrency of them in a burst. Before, the 41 requests below
// arrived within a few milliseconds, up to 16 at once.
func TestPollerSpreadsRequestsOverTheInterval(t *testing.T) {
	const (
		upstreams = 40
		interval  = time.Second
	)
	admin := &inFlightAdmin{inner: testutil.NewFakeKong(upstreams, 1)}
	srv := httptest.NewServer(admin)
	t.Cleanup(srv.Close)
	h := start(t, new(consumertest.MetricsSink), func(c *Config) {
		hc := defaultHealthConfig()
		p := PollerConfig{Instance: "kong-1", Interval: interval}
		p.Endpoint = srv.URL
		hc.Pollers = pollersOf("kong", p)
		c.Health = configoptional.Some(hc)
	})
	waitFor(t, func() bool {
		return testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_health_polls", attribute.String("outcome", "success")) >= 1
	})
	arrivals, peak := admin.stats()
	const perPoll = 1 + upstreams // one list page, one health page per upstream
	if len(arrivals) < perPoll {
		t.Fatalf("%d requests for a complete poll, want %d", len(arrivals), perPoll)
	}
	health := arrivals[1:perPoll]
	spread := health[len(health)-1].Sub(health[0])
	gaps := make([]time.Duration, len(health)-1)
	for i := range gaps {
		gaps[i] = health[i+1].Sub(health[i])
	}
	slices.Sort(gaps)
	ideal := time.Duration(0.9 * float64(interval) / upstreams)
	t.Logf("%d health requests over %v (ideal %v), median gap %v (ideal %v), peak %d in flight",
		len(health), spread.Round(time.Millisecond), (ideal * (upstreams - 1)).Round(time.Millisecond), gaps[len(gaps)/2], ideal, peak)
	// Timers fire late, never early: a loaded machine stretches the spread
	// and may bunch two requests, but the median gap and the spread hold.
	if spread < interval/2 || spread > 2*interval {
		t.Errorf("the health requests of one poll arrived over %v, want them spread over most of the %v interval", spread, interval)
	}
	if gaps[len(gaps)/2] < ideal*3/4 {
		t.Errorf("median gap between requests %v, want about %v", gaps[len(gaps)/2], ideal)
	}
	if peak > 4 {
		t.Errorf("%d requests in flight at once, want them one after the other (max_concurrency is only a cap)", peak)
	}
}

// A poll that cannot fit its interval (here request_rate is too low for
// its requests) is logged once, naming what to raise, and so is the poll
// that fits again; the next poll starts at once rather than an interval
// later.
func TestPollOverrunIsLoggedOnce(t *testing.T) {
	f := smallKong()
	srv := startFakeKong(t, f)
	hh := newHealthHarness(t, func(hc *HealthConfig) {
		hc.Profile = ProfileKong
		hc.Pollers = pollersOf("kong", kongPoller(srv.URL, func(p *PollerConfig) {
			p.Interval = 500 * time.Millisecond
			p.RequestRate = 8 // 125 ms apart
		}))
	})
	hh.h.Pace()
	// 2 list pages and 4 health pages: 6 requests, 625 ms of gaps at
	// least (timers never fire early): run twice, logged once.
	for range 2 {
		hh.pollAndEmit(0)
	}
	checkSeries(t, seriesState(hh.sink.AllMetrics()), smallKongWant())
	warns := hh.logs.FilterMessageSnippet("Health poll ran past its interval").All()
	if len(warns) != 1 {
		t.Fatalf("%d overrun warnings for 2 overrunning polls, want 1", len(warns))
	}
	fields := warns[0].ContextMap()
	if fields["requests"] != int64(6) || fields["request_rate"] != float64(8) || fields["interval"] != 500*time.Millisecond {
		t.Errorf("warning fields %v, want requests 6, request_rate 8, interval 500ms", fields)
	}
	if _, next := hh.h.PollerBackoff(0); next != 0 {
		t.Errorf("after an overrun the next poll waits %v, want 0 (at once)", next)
	}
	// One upstream left: 1 list page, 1 health page, at most 250 ms of
	// waiting (the first request waits out the last poll's gap).
	f.RemoveUpstream("billing")
	f.RemoveUpstream("mock-upstream")
	hh.pollAndEmit(0)
	if n := hh.logs.FilterMessage("Health polls fit their interval again").Len(); n != 1 {
		t.Errorf("%d logs of polls fitting again, want 1", n)
	}
	if _, next := hh.h.PollerBackoff(0); next <= 0 || next >= 500*time.Millisecond {
		t.Errorf("after a poll that fits the next waits %v, want the rest of the 500ms interval", next)
	}
}
