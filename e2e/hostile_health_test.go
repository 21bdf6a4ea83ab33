package e2e

// The hostile suite's health cases (issue 24, items 1, 4 and 7): an admin
// API that redirects the poller, or names other origins in its `next`
// links; one that answers 1 GiB; pushed events dated years away. Each runs
// on a collector of its own with the receiver's defaults (hostileConfig)
// plus a health section, with good traffic alongside counted exactly (the
// harness of hostile_test.go), and holds the documented outcome:
// credentials reach the configured origin only, memory follows the bound,
// and no timestamp pins a target.

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
)

const (
	// hostileKongToken and hostileKongKey are the poller's credentials:
	// its admin_token and a confighttp `headers` entry.
	hostileKongToken = "e2e-admin-token"
	hostileKongKey   = "e2e-api-key"
	// hostileKongUpstreams of healthTargetsPer targets, listed 2 a page,
	// so the list has a `next` page.
	hostileKongUpstreams = 3
	// adminBodyRSSGrowth: a refused 1 GiB answer may grow RSS by this much
	// over the case's baseline: Kong's max_response_body_size (16 MiB) in
	// buffers grown by doubling, and what Go keeps around (before the
	// bound: 617–680 MiB, issue 24).
	adminBodyRSSGrowth = 96 * mib
)

// hostileKongConfig is hostileConfig plus a health section: the kong
// profile, push on (its defaults), and unless kongURL is "" one Kong
// poller of kongURL every second with both credentials.
func hostileKongConfig(kongURL string) string {
	health := `    health:
      profile: kong
      stale_after: 1m
`
	if kongURL != "" {
		health += `      kong:
        - endpoint: ` + kongURL + `
          instance: kong-hostile
          interval: 1s
          timeout: 5s
          page_size: 2
          admin_token: ` + hostileKongToken + `
          headers:
            X-Api-Key: ` + hostileKongKey + `
`
	}
	cfg := hostileConfig("")
	if !strings.Contains(cfg, "    flush_interval: 1s\n") {
		panic("collectorConfig changed: no flush_interval line to put the health section after")
	}
	return strings.Replace(cfg, "    flush_interval: 1s\n", "    flush_interval: 1s\n"+health, 1)
}

// startHostileHealthRun is startHostileRun on config: the collector, the
// monitor, the good traffic held, a few seconds of baseline.
func startHostileHealthRun(t *testing.T, config string) *hostileRun {
	t.Helper()
	col := startCollectorWith(t, config, 4)
	mon := startMonitor(t, col, 100*time.Millisecond, time.Second)
	good := startGoodSender(t, col, 200*time.Millisecond, 5, 3*time.Minute)
	eventually(t, convergeTimeout, "the good traffic's tuples on the exporter", func() (bool, string) {
		got, _, err := scrapeFamily(col, metricName, func(l string) bool { return strings.Contains(l, `job="`+goodJob+`"`) })
		if err != nil {
			return false, err.Error()
		}
		return len(got) == len(goodRoutes), fmt.Sprintf("%d good series", len(got))
	})
	time.Sleep(2 * time.Second) // the baseline the monitor samples
	mon.setPhase("attack")
	return &hostileRun{col: col, mon: mon, good: good}
}

// hostileAdmin serves a small Kong (fakeKongAdmin) that asks for both
// credentials, and misbehaves as set: mode answers a request itself
// (true) or leaves it to the fake. It counts the polls it saw (requests for
// the list's first page), and the requests each mode answered itself: every
// such answer fails the poll it belongs to.
type hostileAdmin struct {
	kong *fakeKongAdmin
	mu   sync.Mutex
	mode string
	// modes answer a request in the named way; nil answers nothing.
	modes    map[string]func(w http.ResponseWriter, r *http.Request) bool
	polls    int
	answered map[string]int
}

func (a *hostileAdmin) set(mode string) {
	a.mu.Lock()
	a.mode = mode
	a.mu.Unlock()
}

// counts is the polls seen and the requests mode answered itself.
func (a *hostileAdmin) counts(mode string) (polls, answered int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.polls, a.answered[mode]
}

func (a *hostileAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Kong-Admin-Token") != hostileKongToken || r.Header.Get("X-Api-Key") != hostileKongKey {
		http.Error(w, `{"message":"Invalid credentials. Token or User credentials required"}`, http.StatusUnauthorized)
		return
	}
	a.mu.Lock()
	mode := a.mode
	if r.URL.Path == "/upstreams" && r.URL.Query().Get("offset") == "" {
		a.polls++
	}
	a.mu.Unlock()
	if f := a.modes[mode]; f != nil && f(w, r) {
		a.mu.Lock()
		a.answered[mode]++
		a.mu.Unlock()
		return
	}
	a.kong.ServeHTTP(w, r)
}

func startHostileAdmin(t *testing.T, modes map[string]func(http.ResponseWriter, *http.Request) bool) (*hostileAdmin, string) {
	t.Helper()
	a := &hostileAdmin{kong: newFakeKongAdminN(hostileKongUpstreams), modes: modes, answered: map[string]int{}}
	return a, serve(t, a)
}

// serve runs h on a loopback port of its own until the test ends.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// hostileKongWant is the kong profile's series of the small Kong, all
// healthy.
func hostileKongWant() seriesCounts {
	want := seriesCounts{}
	for u := range hostileKongUpstreams {
		for j := range healthTargetsPer {
			ip, port := targetAddr(u, j)
			addr := ip + ":" + strconv.Itoa(port)
			for _, state := range []string{"healthy", "unhealthy", "dns_error", "healthchecks_off"} {
				v := 0.0
				if state == "healthy" {
					v = 1
				}
				want[labelKey(labels.FromMap(map[string]string{"collector": "e2e-0", "job": "kong", "instance": "kong-hostile",
					"upstream": upstreamName(u), "target": addr, "address": addr, "state": state, "subsystem": "http"}))] = v
			}
		}
	}
	return want
}

// checkKongSeries checks the exporter holds exactly the small Kong's
// series, all healthy: the rows kept their state.
func checkKongSeries(t *testing.T, col *collector, when string) {
	t.Helper()
	eventually(t, convergeTimeout, "the Kong health series "+when, func() (bool, string) {
		got, _, err := scrapeFamily(col, "kong_upstream_target_health", nil)
		if err != nil {
			return false, err.Error()
		}
		d := diffCounts(got, hostileKongWant())
		return d == "", d
	})
}

// polls is the Kong poller's count of polls of outcome ("": every
// outcome but success).
func polls(col *collector, outcome string) (float64, error) {
	if outcome != "" {
		return telemetryValue(col, "otelcol_receiver_gateway_health_polls", map[string]string{"outcome": outcome, "instance": "kong-hostile"})
	}
	all, err := telemetryValue(col, "otelcol_receiver_gateway_health_polls", map[string]string{"instance": "kong-hostile"})
	if err != nil {
		return 0, err
	}
	ok, err := polls(col, "success")
	return all - ok, err
}

// waitPolls waits until the collector counted more than after polls of
// outcome ("": failed ones), or stop reports true, and returns the count.
func waitPolls(t *testing.T, col *collector, outcome string, after float64, stop func() bool) float64 {
	t.Helper()
	var n float64
	eventually(t, convergeTimeout, "a poll counted "+outcome, func() (bool, string) {
		var err error
		n, err = polls(col, outcome)
		return err == nil && n > after || stop != nil && stop(), fmt.Sprintf("%v (%v)", n, err)
	})
	return n
}

// TestHostileHealth runs the health cases one after the other, each on a
// collector of its own.
func TestHostileHealth(t *testing.T) {
	t.Run("admin_api_sends_elsewhere", testAdminSendsElsewhere)
	t.Run("admin_api_answers_1GiB", testAdminAnswers1GiB)
	t.Run("pushed_timestamps", testPushedTimestamps)
}

// testAdminSendsElsewhere: the admin API redirects the poller (302 on the
// list, 307 on one upstream's health) to a second listener, or names it in
// the list's `next` (absolute, scheme-relative). Each poll so misled is
// refused and counted foreign_origin; the second listener receives no
// request at all, so no credential; the rows keep their state; every poll
// is counted once, exactly.
func testAdminSendsElsewhere(t *testing.T) {
	var foreignRequests, foreignCredentials atomic.Int64
	foreign := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		foreignRequests.Add(1)
		if r.Header.Get("Kong-Admin-Token") != "" || r.Header.Get("X-Api-Key") != "" {
			foreignCredentials.Add(1)
		}
		_, _ = w.Write([]byte(`{"data":[],"next":null}`))
	}))
	foreignHost := strings.TrimPrefix(foreign, "http://")
	redirect := func(code int, path func(string) bool) func(http.ResponseWriter, *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			if !path(r.URL.Path) {
				return false
			}
			http.Redirect(w, r, foreign+r.URL.RequestURI(), code)
			return true
		}
	}
	nextTo := func(prefix string) func(http.ResponseWriter, *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path != "/upstreams" || r.URL.Query().Get("offset") != "" {
				return false
			}
			rec := &bufferedResponse{header: http.Header{}}
			admin := newFakeKongAdminN(hostileKongUpstreams)
			admin.ServeHTTP(rec, r)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(bytes.Replace(rec.body.Bytes(), []byte(`"next":"/`), []byte(`"next":"`+prefix+`/`), 1))
			return true
		}
	}
	modes := map[string]func(http.ResponseWriter, *http.Request) bool{
		"302 on the list":      redirect(http.StatusFound, func(p string) bool { return p == "/upstreams" }),
		"307 on one upstream":  redirect(http.StatusTemporaryRedirect, func(p string) bool { return strings.HasPrefix(p, "/upstreams/id-1/") }),
		"absolute next":        nextTo(foreign),
		"scheme-relative next": nextTo("//" + foreignHost),
	}
	admin, adminURL := startHostileAdmin(t, modes)
	h := startHostileHealthRun(t, hostileKongConfig(adminURL))
	checkKongSeries(t, h.col, "before the attack")

	leaked := func() bool { return foreignRequests.Load() > 0 }
	refused, succeeded := 0.0, waitPolls(t, h.col, "success", 0, nil)
	for _, mode := range []string{"302 on the list", "307 on one upstream", "absolute next", "scheme-relative next"} {
		admin.set(mode)
		refused = waitPolls(t, h.col, "foreign_origin", refused, leaked)
		admin.set("")
		if leaked() {
			t.Fatalf("%s: the second listener received %d requests, %d with credentials; want none", mode, foreignRequests.Load(), foreignCredentials.Load())
		}
		succeeded = waitPolls(t, h.col, "success", succeeded, nil)
		t.Logf("%s: refused (foreign_origin %v, success %v)", mode, refused, succeeded)
	}
	checkKongSeries(t, h.col, "after the attack")
	h.finish(t, h.mon.stats("before").rssMax+flatRSSGrowth, 0, scrapeBound)

	if n := foreignRequests.Load(); n != 0 {
		t.Errorf("the second listener received %d requests (%d with credentials), want none", n, foreignCredentials.Load())
	}
	// Every poll the admin API saw is counted once: each one it misled as
	// foreign_origin, the others as success. (A poll in flight may not be
	// counted yet: wait for the counts to agree.)
	var sent, misled int
	var fo, ok float64
	eventually(t, convergeTimeout, "every poll counted once", func() (bool, string) {
		fo, _ = polls(h.col, "foreign_origin")
		ok, _ = polls(h.col, "success")
		misled = 0
		for mode := range modes {
			var n int
			sent, n = admin.counts(mode)
			misled += n
		}
		return fo == float64(misled) && fo+ok == float64(sent),
			fmt.Sprintf("foreign_origin %v (misled %d) + success %v, polls seen %d", fo, misled, ok, sent)
	})
	t.Logf("polls: %d seen by the admin API, %d misled and counted foreign_origin, %v success; the second listener got %d requests",
		sent, misled, ok, foreignRequests.Load())
}

// bufferedResponse is a ResponseWriter that keeps the answer.
type bufferedResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header         { return b.header }
func (b *bufferedResponse) WriteHeader(code int)        { b.code = code }
func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }

// testAdminAnswers1GiB: the admin API answers the list with 1 GiB, streamed
// (no Content-Length), announced (Content-Length), and as one JSON string.
// Each poll is refused (too_large) after at most max_response_body_size,
// the collector's RSS stays within adminBodyRSSGrowth of its baseline, and
// the rows keep their state.
func testAdminAnswers1GiB(t *testing.T) {
	stream := func(head, filler, tail string, announce bool) func(http.ResponseWriter, *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path != "/upstreams" {
				return false
			}
			const total = 1 << 30
			w.Header().Set("Content-Type", "application/json")
			if announce {
				w.Header().Set("Content-Length", strconv.Itoa(total))
			}
			chunk := []byte(strings.Repeat(filler, (64<<10)/len(filler)))
			if _, err := w.Write([]byte(head)); err != nil {
				return true
			}
			for left := total - len(head) - len(tail); left > 0; left -= len(chunk) {
				if _, err := w.Write(chunk[:min(len(chunk), left)]); err != nil {
					return true // the poller stopped reading
				}
			}
			_, _ = w.Write([]byte(tail))
			return true
		}
	}
	const upstream = `{"id":"id-x","name":"upstream-x","algorithm":"round-robin","slots":10000,"tags":null},`
	modes := map[string]func(http.ResponseWriter, *http.Request) bool{
		"1 GiB of upstreams, streamed":  stream(`{"data":[`, upstream, `{"id":"id-y"}],"next":null}`, false),
		"1 GiB of upstreams, announced": stream(`{"data":[`, upstream, `{"id":"id-y"}],"next":null}`, true),
		"one string of 1 GiB":           stream(`{"data":[{"id":"id-x","name":"`, "a", `"}],"next":null}`, false),
	}
	admin, adminURL := startHostileAdmin(t, modes)
	h := startHostileHealthRun(t, hostileKongConfig(adminURL))
	checkKongSeries(t, h.col, "before the attack")

	failed, succeeded := 0.0, waitPolls(t, h.col, "success", 0, nil)
	for _, mode := range []string{"1 GiB of upstreams, streamed", "1 GiB of upstreams, announced", "one string of 1 GiB"} {
		start := time.Now()
		admin.set(mode)
		failed = waitPolls(t, h.col, "", failed, nil)
		took := time.Since(start)
		admin.set("")
		succeeded = waitPolls(t, h.col, "success", succeeded, nil)
		rss, _ := readRSS(h.col.pid())
		t.Logf("%s: refused after %s, RSS now %.0f MiB", mode, took.Round(time.Millisecond), mibOf(rss))
	}
	checkKongSeries(t, h.col, "after the attack")
	before := h.mon.stats("before")
	h.finish(t, before.rssMax+adminBodyRSSGrowth, 0, scrapeBound)
	tooLarge, _ := polls(h.col, "too_large")
	answered := 0
	for mode := range modes {
		_, n := admin.counts(mode)
		answered += n
	}
	if float64(answered) != tooLarge || tooLarge != failed {
		t.Errorf("%d polls answered 1 GiB, %v failed, %v counted too_large; want all %d too_large", answered, failed, tooLarge, answered)
	} else {
		t.Logf("%d polls answered 1 GiB, all counted too_large", answered)
	}
}

// testPushedTimestamps pushes, for each of years 1, 1677, 2200, 2262 and
// 9999, an event so dated and then one stamped now of another state: the
// first is refused (400, clock_skew), the second always applies, and the
// target ends in the last state pushed.
func testPushedTimestamps(t *testing.T) {
	h := startHostileHealthRun(t, hostileKongConfig(""))
	pushURL := h.col.url("/v1/health")
	event := func(state, ts string) []byte {
		return []byte(`{"gateway":"kong-pushed","kind":"kong","upstream":"billing","target":"api:8080","address":"10.0.0.1:8080","state":"` +
			state + `","timestamp":"` + ts + `"}`)
	}
	client := newAttackClient()
	ans := newAnswers()
	years := []string{"0001-01-01T00:00:00Z", "1677-09-21T00:12:43.145224191Z", "2200-01-01T00:00:00Z", "2262-04-11T23:47:16.854775808Z", "9999-12-31T23:59:59.999999999Z"}
	for _, ts := range years {
		time.Sleep(2 * attackPause) // the monitor samples while the pushes run
		status, _, msg := postCount(client, ans, pushURL, "application/json", event("UNHEALTHY", ts))
		if status != http.StatusBadRequest || !strings.Contains(string(msg), "health.push.max_clock_skew") {
			t.Errorf("an event of %s: %d %s, want 400 naming health.push.max_clock_skew", ts, status, truncate(msg))
		}
		status, _, msg = postCount(client, ans, pushURL, "application/json", event("HEALTHY", time.Now().UTC().Format(time.RFC3339Nano)))
		if status != http.StatusOK || string(msg) != `{"accepted":1,"out_of_order":0}` {
			t.Errorf("after an event of %s, one stamped now: %d %s, want accepted", ts, status, truncate(msg))
		}
	}
	ans.checkAllAnswered(t)
	t.Logf("pushes answered %s", ans)
	want := seriesCounts{}
	for _, state := range []string{"healthy", "unhealthy", "dns_error", "healthchecks_off"} {
		v := 0.0
		if state == "healthy" {
			v = 1
		}
		want[labelKey(labels.FromMap(map[string]string{"collector": "e2e-0", "job": "kong", "instance": "kong-pushed",
			"upstream": "billing", "target": "api:8080", "address": "10.0.0.1:8080", "state": state, "subsystem": "http"}))] = v
	}
	eventually(t, convergeTimeout, "the pushed target healthy", func() (bool, string) {
		got, _, err := scrapeFamily(h.col, "kong_upstream_target_health", func(l string) bool { return strings.Contains(l, "kong-pushed") })
		if err != nil {
			return false, err.Error()
		}
		d := diffCounts(got, want)
		return d == "", d
	})
	for outcome, n := range map[string]float64{"clock_skew": float64(len(years)), "accepted": float64(len(years)), "out_of_order": 0, "rejected": 0} {
		waitTelemetry(t, h.col, "otelcol_receiver_gateway_health_events", map[string]string{"outcome": outcome}, n)
	}
	eventually(t, convergeTimeout, "two scrapes sampled during the pushes", func() (bool, string) {
		n := h.mon.stats("attack").scrapes
		return n >= 2, fmt.Sprintf("%d scrapes", n)
	})
	h.finish(t, h.mon.stats("before").rssMax+flatRSSGrowth, 0, scrapeBound)
}
