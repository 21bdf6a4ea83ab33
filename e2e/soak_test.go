//go:build soak

package e2e

// TestSoak: mixed good and hostile traffic at a sustained rate against the
// built collector (receiver defaults, as in hostile_test.go) for
// SOAK_MINUTES (default 10). Built only with -tags soak: `make soak`, never
// `make test`.
//
// Every second: good OTLP traffic (goodSender, protobuf and JSON), a Kong
// http-log batch of good entries and absurd ones, 500 spans with a new
// http.route each and 100 with a new service.name each, a garbage protobuf
// body, a stalled upload (closed by the server after read_timeout); every
// 5s a JSON body nested 100k levels; every 15s six concurrent 15 MB
// protobuf exports (some throttled). RSS is sampled every 2s, /metrics
// scraped (gzip, as Prometheus does) every 5s.
//
// It asserts: the good traffic (OTLP and the Kong entries) and the accepted
// big exports are counted exactly; every hostile request is answered (the
// stalled ones closed within read_timeout + 10s); every refused request is
// counted in the receiver's telemetry; each minute's mean RSS after the
// warm-up is within ±10 % of the median of those minutes' means (RSS is
// flat: no minute strays and nothing grows by 20 % over the run). It prints
// a table per minute.

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// soakRSSTolerance is the allowed distance of a minute's mean RSS from the
// median of the minutes after the warm-up.
const soakRSSTolerance = 0.10

func soakMinutes(t *testing.T) int {
	t.Helper()
	s := os.Getenv("SOAK_MINUTES")
	if s == "" {
		return 10
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 2 || n > 24*60 {
		t.Fatalf("SOAK_MINUTES=%q: want a whole number of minutes from 2 to 1440", s)
	}
	return n
}

// soakMinute is what one minute of the soak saw.
type soakMinute struct {
	goodSpans, hostileSpans int64
	rss                     []int64
	heapMax                 float64
	scrapeMax               time.Duration
	scrapeBytes             int64
	throttled, overflow     float64 // telemetry at the minute's end
}

func TestSoak(t *testing.T) {
	minutes := soakMinutes(t)
	warmup := 1
	if minutes >= 6 {
		warmup = 2
	}
	total := time.Duration(minutes) * time.Minute
	// The soak collector also serves pprof (port 5), so a drifting RSS can
	// be explained: its heap profile is saved at the end of the traffic.
	col := startCollectorWith(t, pprofConfig(), 5)
	pprofAddr := col.otlpHTTPAddr // the fifth port; no otlp receiver here
	good := startGoodSender(t, col, 50*time.Millisecond, 20, total+time.Minute)
	start := time.Now()
	end := start.Add(total)
	minuteOf := func() int { return min(int(time.Since(start)/time.Minute), minutes-1) }

	var (
		mu       sync.Mutex
		perMin   = make([]soakMinute, minutes)
		hostile  atomic.Int64 // hostile spans sent
		failures []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 30 {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
	}
	client := newAttackClient()
	ans := newAnswers()
	var wg sync.WaitGroup
	every := func(period time.Duration, f func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(period)
			defer tick.Stop()
			for i := 0; time.Now().Before(end); i++ {
				f(i)
				<-tick.C
			}
		}()
	}

	// Good Kong entries (route /soak-kong) with absurd ones mixed in.
	var kongGood, kongBatches atomic.Int64
	every(time.Second, func(int) {
		entries := []string{
			absurdEntry("1", "10", "11.5", "1000"), absurdEntry("1e300", "10", "11", "1000"),
			absurdEntry("2", "20", "22.5", "1000"), absurdEntry("3", "1e300", "33", "1000"),
			absurdEntry("3", "30", "33.5", "1000"),
		}
		body := strings.ReplaceAll("["+strings.Join(entries, ",")+"]", `"/absurd"`, `"/soak-kong"`)
		if status, _, msg := postCount(client, ans, col.url("/kong/http-log"), "application/json", []byte(body)); status == http.StatusOK {
			kongGood.Add(3)
			kongBatches.Add(1)
		} else if status != 0 {
			fail("Kong batch: status %d: %s", status, truncate(msg))
		}
	})
	// Cardinality: new routes and new services.
	every(time.Second, func(i int) {
		p := newProtoExport().resource("soak-routes")
		for j := range 500 {
			p.span("GET", fmt.Sprintf("/soak/%d/%d", i, j), 200, 0)
		}
		for j := range 100 {
			p.resource(fmt.Sprintf("soak-svc-%d-%d", i, j)).span("GET", "/svc", 200, 0)
		}
		hostile.Add(600)
		if status, _, msg := postCount(client, ans, col.tracesURL(), "application/x-protobuf", p.bytes()); status != http.StatusOK && status != 0 {
			fail("cardinality export: status %d: %s", status, truncate(msg))
		}
	})
	// Garbage protobuf every second, deep JSON every 5s.
	deep := deepJSON(100_000)
	every(time.Second, func(i int) {
		if status, _, _ := postCount(client, ans, col.tracesURL(), "application/x-protobuf", []byte("\x0a\xff\xff\xff\xff\x0fnot a protobuf")); status != http.StatusBadRequest && status != 0 {
			fail("garbage protobuf: status %d", status)
		}
		if i%5 == 0 {
			if status, _, _ := postCount(client, ans, col.tracesURL(), "application/json", deep); status != http.StatusBadRequest && status != 0 {
				fail("deep JSON: status %d", status)
			}
		}
	})
	// A stalled upload per second.
	var stalls, stallsOpen atomic.Int64
	every(time.Second, func(int) {
		c, err := net.DialTimeout("tcp", col.httpAddr, 5*time.Second)
		if err != nil {
			fail("dial a stalled upload: %v", err)
			return
		}
		_, _ = fmt.Fprintf(c, "POST /v1/traces HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\n\x0a\x03abc", col.httpAddr, 4<<20)
		sent := time.Now()
		stalls.Add(1)
		stallsOpen.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			defer stallsOpen.Add(-1)
			_ = c.SetReadDeadline(sent.Add(defaultReadTimeout + 10*time.Second))
			buf := make([]byte, 512)
			for {
				if _, err := c.Read(buf); err != nil {
					if ne, ok := err.(net.Error); ok && ne.Timeout() {
						fail("a stalled upload still open %s after it stalled", time.Since(sent).Round(time.Second))
					}
					return
				}
			}
		}()
	})
	// Six concurrent 15 MB protobuf exports every 15s (SOAK_BIG=0: none,
	// to tell the known pinned-body bug, see testPinnedBodies, from other
	// drift).
	var bigAccepted, bigThrottled atomic.Int64
	bigOn := os.Getenv("SOAK_BIG") != "0"
	bigSpans := 0
	big := func() []byte {
		p := newProtoExport().resource("soak-big")
		for bigSpans = 0; len(p.body) < 15_000_000; bigSpans++ {
			p.span("POST", "/soak-big", 200, 1000)
		}
		return p.bytes()
	}()
	every(15*time.Second, func(int) {
		if !bigOn {
			return
		}
		var bw sync.WaitGroup
		for range 6 {
			bw.Add(1)
			go func() {
				defer bw.Done()
				hostile.Add(int64(bigSpans))
				switch status, retryAfter, msg := postCount(client, ans, col.tracesURL(), "application/x-protobuf", big); {
				case status == http.StatusOK:
					bigAccepted.Add(1)
				case status == http.StatusTooManyRequests && retryAfter != "":
					bigThrottled.Add(1)
				case status != 0:
					fail("big export: status %d: %s", status, truncate(msg))
				}
			}()
		}
		bw.Wait()
	})
	// Samplers: RSS every 2s; scrape and telemetry every 5s; good spans per
	// minute from the sender's running total.
	var lastGood int64
	every(2*time.Second, func(i int) {
		rss, err := readRSS(col.pid())
		if err != nil {
			fail("read RSS: %v", err)
			return
		}
		m := minuteOf()
		mu.Lock()
		perMin[m].rss = append(perMin[m].rss, rss)
		mu.Unlock()
		if i%5 != 0 {
			return
		}
		d, n, err := timedScrape(col.metricsURL())
		if err != nil {
			fail("scrape /metrics: %v", err)
		}
		thr, _ := telemetryValue(col, telemetryName, requestsOutcome("throttled"))
		ovf, _ := telemetryValue(col, "otelcol_receiver_gateway_events", map[string]string{"outcome": "overflow"})
		heap, _ := telemetryValue(col, "otelcol_process_runtime_heap_alloc_bytes", nil)
		g := good.total() + kongGood.Load()
		mu.Lock()
		pm := &perMin[m]
		pm.scrapeMax, pm.scrapeBytes = max(pm.scrapeMax, d), max(pm.scrapeBytes, n)
		pm.throttled, pm.overflow = thr, ovf
		pm.heapMax = max(pm.heapMax, heap)
		pm.goodSpans += g - lastGood
		lastGood = g
		pm.hostileSpans = hostile.Load()
		mu.Unlock()
	})
	// Progress, once a minute, so a long soak shows it is alive.
	every(time.Minute, func(i int) {
		if i > 0 {
			t.Logf("soak: minute %d of %d, %d stalled uploads open, answers %s", i, minutes, stallsOpen.Load(), ans)
		}
	})
	wg.Wait()
	good.stop()
	soakElapsed := time.Since(start)
	profile := saveProfiles(t, pprofAddr)

	// Exact counts: the good OTLP traffic, the good Kong entries, the
	// accepted big exports.
	waitGoodExact(t, col, good)
	wantOther := seriesCounts{
		`{collector="e2e-0", http_request_method="GET", http_response_status_code="200", http_route="/soak-kong"}`:                 float64(kongGood.Load()),
		`{collector="e2e-0", http_request_method="POST", http_response_status_code="200", http_route="/soak-big", job="soak-big"}`: float64(bigAccepted.Load()) * float64(bigSpans),
	}
	if bigAccepted.Load() == 0 {
		delete(wantOther, `{collector="e2e-0", http_request_method="POST", http_response_status_code="200", http_route="/soak-big", job="soak-big"}`)
	}
	eventually(t, convergeTimeout, "the good Kong entries and the accepted big exports", func() (bool, string) {
		got, _, err := scrapeFamily(col, metricName, func(l string) bool {
			return strings.Contains(l, `"/soak-kong"`) || strings.Contains(l, `job="soak-big"`)
		})
		if err != nil {
			return false, err.Error()
		}
		d := diffCounts(got, wantOther)
		return d == "", d
	})
	// Refusals counted: every 429 the clients saw, and the log entries.
	waitTelemetry(t, col, telemetryName, requestsOutcome("throttled"), float64(ans.get(http.StatusTooManyRequests))+float64(good.throttled.Load()))
	// the garbage, deep and stalled uploads as malformed, and the absurd
	// log entries (two per batch) as rejected.
	waitTelemetry(t, col, telemetryName, requestsOutcome("malformed"), float64(ans.get(http.StatusBadRequest))+float64(stalls.Load()))
	waitTelemetry(t, col, "otelcol_receiver_gateway_log_entries", map[string]string{"format": "kong_http_log", "outcome": "rejected"},
		float64(2*kongBatches.Load()))

	// The table.
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-6s %14s %14s %16s %10s %10s %10s %10s %10s\n", "minute", "good spans/s", "hostile spans/s", "RSS MiB min–max", "RSS mean", "heap max", "scrape ms", "throttled", "overflow")
	var prevHostile int64
	var prevThr, prevOvf float64
	means := make([]float64, minutes)
	for m, pm := range perMin {
		var lo, hi int64 = math.MaxInt64, 0
		var sum float64
		for _, r := range pm.rss {
			lo, hi, sum = min(lo, r), max(hi, r), sum+float64(r)
		}
		if len(pm.rss) > 0 {
			means[m] = sum / float64(len(pm.rss)) / mib
		}
		fmt.Fprintf(&b, "%-6d %14.0f %14.0f %16s %10.0f %10.0f %10d %10.0f %10.0f\n", m+1,
			float64(pm.goodSpans)/60, float64(pm.hostileSpans-prevHostile)/60,
			fmt.Sprintf("%.0f–%.0f", float64(lo)/mib, float64(hi)/mib), means[m], pm.heapMax/mib, pm.scrapeMax.Milliseconds(),
			pm.throttled-prevThr, pm.overflow-prevOvf)
		prevHostile, prevThr, prevOvf = pm.hostileSpans, pm.throttled, pm.overflow
	}
	fmt.Fprintf(&b, "elapsed %s; answers to hostile requests: %s; stalled uploads: %d, all closed by the server; big exports: %d accepted, %d throttled; good: %d OTLP spans and %d Kong entries counted exactly",
		soakElapsed.Round(time.Second), ans, stalls.Load(), bigAccepted.Load(), bigThrottled.Load(), good.total(), kongGood.Load())
	t.Log(b.String())

	t.Logf("heap and goroutine profiles of the collector at the end of the traffic: %s", profile)
	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Errorf("soak failures:\n%s", strings.Join(failures, "\n"))
	}
	ans.checkAllAnswered(t)
	// The baseline is the median of the minutes after the warm-up (RSS
	// climbs from the cold start through the warm-up). A sample of a few
	// seconds is no baseline: RSS swings with each GC cycle and each
	// admitted 20 MB export by more than the tolerance within a minute.
	after := slices.Clone(means[warmup:])
	slices.Sort(after)
	base := after[len(after)/2]
	if len(after)%2 == 0 {
		base = (after[len(after)/2-1] + after[len(after)/2]) / 2
	}
	t.Logf("RSS baseline (median of the %d minutes' means after the warm-up): %.0f MiB; tolerance ±%.0f%% for each of them", len(after), base, 100*soakRSSTolerance)
	for m := warmup; m < minutes; m++ {
		if drift := means[m]/base - 1; math.Abs(drift) > soakRSSTolerance {
			t.Errorf("minute %d: mean RSS %.0f MiB is %+.0f%% from the median after the warm-up (%.0f MiB), tolerance ±%.0f%%",
				m+1, means[m], 100*drift, base, 100*soakRSSTolerance)
		}
	}
}

// saveProfiles fetches the collector's heap profile and goroutine dump into
// a directory that outlives the test, and returns a summary with its path.
func saveProfiles(t *testing.T, pprofAddr string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "soak-profiles-")
	if err != nil {
		return err.Error()
	}
	var out []string
	for name, path := range map[string]string{"heap.pb.gz": "/debug/pprof/heap", "goroutines.txt": "/debug/pprof/goroutine?debug=1"} {
		status, body, err := httpGet("http://" + pprofAddr + path)
		if err != nil || status != http.StatusOK {
			out = append(out, fmt.Sprintf("%s: status %d %v", path, status, err))
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o600); err != nil {
			out = append(out, err.Error())
			continue
		}
		if name == "goroutines.txt" {
			first, _, _ := strings.Cut(string(body), "\n")
			out = append(out, first)
		}
	}
	return dir + " (" + strings.Join(out, "; ") + ")"
}
