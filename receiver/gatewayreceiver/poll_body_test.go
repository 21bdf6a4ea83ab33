package gatewayreceiver

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelgateway/otelgateway/internal/testutil"
)

// Memory follows the bound, not what the admin API sends (issue 24, item
// 7): an answer larger than max_response_body_size is refused after at
// most one byte more than the bound was read (too_large), the rows keep
// their last state, and a poll against an admin API streaming 1 GiB
// allocates a small multiple of the bound, not of what was sent.

const giB = 1 << 30

// streamer is an admin API answer of total bytes, streamed from one small
// chunk (the test never holds it): head, then filler repeated, then tail.
// It counts what it managed to write.
type streamer struct {
	head, filler, tail string
	total              int64
	announce           bool // send Content-Length
	written            atomic.Int64
}

func (s *streamer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if s.announce {
		w.Header().Set("Content-Length", strconv.FormatInt(s.total, 10))
	}
	chunk := []byte(strings.Repeat(s.filler, max(1, (64<<10)/len(s.filler))))
	if n, err := w.Write([]byte(s.head)); err != nil {
		return
	} else {
		s.written.Add(int64(n))
	}
	for left := s.total - int64(len(s.head)) - int64(len(s.tail)); left > 0; {
		c := chunk[:min(int64(len(chunk)), left)]
		n, err := w.Write(c)
		s.written.Add(int64(n))
		if err != nil {
			return
		}
		left -= int64(n)
	}
	if n, err := w.Write([]byte(s.tail)); err == nil {
		s.written.Add(int64(n))
	}
}

// heapPeak samples the Go heap's live objects every millisecond (runtime
// metrics, no stop-the-world) until stopped, and keeps the highest.
type heapPeak struct {
	stop chan struct{}
	done sync.WaitGroup
	peak uint64
}

func startHeapPeak() *heapPeak {
	h := &heapPeak{stop: make(chan struct{})}
	h.done.Go(func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			h.peak = max(h.peak, s[0].Value.Uint64())
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	})
	return h
}

func (h *heapPeak) finish() uint64 {
	close(h.stop)
	h.done.Wait()
	return h.peak
}

// upstreamFiller is one Kong upstream entity, repeated to fill a list.
const upstreamFiller = `{"id":"0a6c0a4e-5c1f-4d47-9d0b-2f3c1b7a8e00","name":"upstream-x","algorithm":"round-robin","slots":10000,"tags":null},`

func TestKongAnswerTooLarge(t *testing.T) {
	const bound = 4 << 20 // max_response_body_size
	cases := []struct {
		name string
		path string // the request answered by the streamer
		s    *streamer
	}{
		{"1 GiB of upstreams, streamed", "/upstreams", &streamer{head: `{"data":[`, filler: upstreamFiller, tail: `{"id":"y"}],"next":null}`, total: giB}},
		{"1 GiB of upstreams, announced", "/upstreams", &streamer{head: `{"data":[`, filler: upstreamFiller, tail: `{"id":"y"}],"next":null}`, total: giB, announce: true}},
		{"one string of 1 GiB", "/upstreams", &streamer{head: `{"data":[{"id":"x","name":"`, filler: "a", tail: `"}],"next":null}`, total: giB}},
		{"one upstream's health, 1 GiB", "/upstreams/id-billing/health", &streamer{head: `{"data":[`, filler: `{"target":"a:1","health":"HEALTHY","data":{"addresses":[]}},`, tail: `{}],"next":null}`, total: giB}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := smallKong()
			var hostile atomic.Bool
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if hostile.Load() && r.URL.Path == c.path {
					c.s.ServeHTTP(w, r)
					return
				}
				f.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			hh := newHealthHarness(t, func(hc *HealthConfig) {
				hc.Profile = ProfileKong
				hc.Pollers = pollersOf("kong", kongPoller(srv.URL, func(p *PollerConfig) {
					p.MaxResponseBodySize = bound
					p.Timeout = time.Minute // the 1 GiB would arrive in time: the bound must stop it
				}))
			})
			hh.pollAndEmit(0)
			want := smallKongWant()
			checkSeries(t, seriesState(hh.sink.AllMetrics()), want)

			hostile.Store(true)
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			peak := startHeapPeak()
			start := time.Now()
			hh.pollAndEmit(0)
			took := time.Since(start)
			heapPeak := peak.finish()
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("poll against %s: %s, allocated %.1f MiB, live heap peak %.1f MiB (before %.1f MiB), the server wrote %.1f MiB of %d MiB",
				c.name, took.Round(time.Millisecond), float64(allocated)/(1<<20), float64(heapPeak)/(1<<20), float64(before.HeapAlloc)/(1<<20),
				float64(c.s.written.Load())/(1<<20), c.s.total>>20)
			// One buffer grown by doubling to bound+1 allocates under
			// 2×bound; the harness's own work is small beside it.
			if allocated > 4*bound {
				t.Errorf("the poll allocated %d bytes, want at most 4 × max_response_body_size (%d)", allocated, 4*bound)
			}
			if heapPeak > before.HeapAlloc+4*bound {
				t.Errorf("live heap peaked at %d bytes, %d above the start, want at most 4 × max_response_body_size (%d)", heapPeak, heapPeak-before.HeapAlloc, 4*bound)
			}
			checkSeries(t, seriesState(hh.sink.AllMetrics()), want) // rows kept, not flipped, not swept
			if n := testutil.Int64Sum(t, hh.tel, "otelcol_receiver_gateway_health_polls", attribute.String("outcome", "too_large")); n != 1 {
				t.Errorf("polls{outcome=too_large} = %d, want 1", n)
			}
			warns := hh.logs.FilterMessage("Health poll failed; logged again only when the outcome changes").All()
			wantMsg := "health.kong[0].max_response_body_size (4194304 bytes); refused unread, the last state is kept"
			if len(warns) != 1 || !strings.Contains(warns[0].ContextMap()["error"].(string), wantMsg) {
				t.Errorf("warnings %v, want one containing %q", warns, wantMsg)
			}
		})
	}
}

// APISIX and Envoy answer in one document: one over the bound is refused
// and the rows are kept.
func TestDocumentAnswerTooLarge(t *testing.T) {
	for _, g := range []struct{ gateway, path, file, head string }{
		{"apisix", "/v1/healthcheck", "apisix_tutorial.json", `[{"name":"/apisix/routes/1","nodes":[`},
		{"envoy", "/clusters?format=json", "envoy_clusters.json", `{"cluster_statuses":[{"name":"c","host_statuses":[`},
	} {
		t.Run(g.gateway, func(t *testing.T) {
			fx, _ := startFixture(t, g.path, g.file)
			big := &streamer{head: g.head, filler: `{"ip":"10.0.0.1","port":80,"status":"healthy"},`, tail: `{}]}]`, total: giB}
			var hostile atomic.Bool
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if hostile.Load() {
					big.ServeHTTP(w, r)
					return
				}
				fx.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			hh := newHealthHarness(t, func(hc *HealthConfig) {
				hc.Pollers = pollersOf(g.gateway, simplePoller(srv.URL, "gw-1"))
				hc.Pollers[g.gateway][0].MaxResponseBodySize = 1 << 20
			})
			hh.pollAndEmit(0)
			want := seriesState(hh.sink.AllMetrics())
			if len(want) == 0 {
				t.Fatal("no series from the good answer")
			}
			hostile.Store(true)
			hh.pollAndEmit(0)
			checkSeries(t, seriesState(hh.sink.AllMetrics()), want)
			if n := testutil.Int64Sum(t, hh.tel, "otelcol_receiver_gateway_health_polls", attribute.String("outcome", "too_large")); n != 1 {
				t.Errorf("polls{outcome=too_large} = %d, want 1", n)
			}
		})
	}
}
