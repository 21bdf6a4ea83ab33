package e2e

// Upstream health end to end: the distribution polls a fake Kong Admin API
// with 10k upstreams and 20k targets (Kong's paginated shapes), the kong
// naming profile turns it into kong_upstream_target_health, and a real
// Prometheus scrapes the 80k series.

import (
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	healthUpstreams  = 10_000
	healthTargetsPer = 2
	healthInterval   = 3 * time.Second
)

// fakeKongAdmin serves GET /upstreams and GET /upstreams/{id}/health as Kong
// does (docs/gateways.md §1b): `data`, an opaque `offset`, `next` as a
// path (null on the last page), node_id. Every target has one address.
type fakeKongAdmin struct {
	upstreams int // upstreams served (upstream-00000 …), healthTargetsPer targets each
	mu        sync.Mutex
	health    map[string]string // "upstream/target index" → HEALTHY | UNHEALTHY
	cycleAt   time.Time         // when the current poll cycle's first list page was served
	lastDur   time.Duration     // list page 1 to the last upstream's health, last full cycle
	served    atomic.Int64
}

func newFakeKongAdmin() *fakeKongAdmin { return newFakeKongAdminN(healthUpstreams) }

// newFakeKongAdminN serves n upstreams (the fleet test's smaller Kong).
func newFakeKongAdminN(n int) *fakeKongAdmin {
	return &fakeKongAdmin{upstreams: n, health: map[string]string{}}
}

func upstreamName(i int) string { return fmt.Sprintf("upstream-%05d", i) }

func targetAddr(u, j int) (string, int) {
	k := u*healthTargetsPer + j
	return fmt.Sprintf("10.%d.%d.%d", k>>16&255, k>>8&255, k&255), 8000
}

func (f *fakeKongAdmin) set(u, j int, health string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.health[upstreamName(u)+"/"+strconv.Itoa(j)] = health
}

func (f *fakeKongAdmin) lastCycle() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastDur
}

func (f *fakeKongAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.served.Add(1)
	q := r.URL.Query()
	size, _ := strconv.Atoi(q.Get("size"))
	if size <= 0 {
		size = 100
	}
	offset := 0
	if b, err := base64.StdEncoding.DecodeString(q.Get("offset")); err == nil && len(b) > 0 {
		offset, _ = strconv.Atoi(string(b))
	}
	var sb strings.Builder
	sb.WriteString(`{"data":[`)
	switch {
	case r.URL.Path == "/upstreams":
		if offset == 0 {
			f.mu.Lock()
			f.cycleAt = time.Now()
			f.mu.Unlock()
		}
		end := min(offset+size, f.upstreams)
		for i := offset; i < end; i++ {
			if i > offset {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"id":"id-%d","name":"%s","algorithm":"round-robin","slots":10000,"tags":null}`, i, upstreamName(i))
		}
		writeKongPage(w, &sb, "/upstreams", end, f.upstreams, size)
	case strings.HasPrefix(r.URL.Path, "/upstreams/id-") && strings.HasSuffix(r.URL.Path, "/health"):
		u, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/upstreams/id-"), "/health"))
		if err != nil || u < 0 || u >= f.upstreams {
			http.Error(w, `{"message":"Not found"}`, http.StatusNotFound)
			return
		}
		f.mu.Lock()
		for j := range healthTargetsPer {
			if j > 0 {
				sb.WriteByte(',')
			}
			h := f.health[upstreamName(u)+"/"+strconv.Itoa(j)]
			if h == "" {
				h = "HEALTHY"
			}
			ip, port := targetAddr(u, j)
			fmt.Fprintf(&sb, `{"id":"t-%d-%d","target":"%s:%d","weight":100,"health":"%s","upstream":{"id":"id-%d"},"created_at":1700000000.123,"tags":null,`+
				`"data":{"host":"%s","port":%d,"dns":"A","nodeWeight":100,"weight":{"total":100,"unavailable":0,"available":100},"addresses":[{"ip":"%s","port":%d,"weight":100,"health":"%s"}]}}`,
				u, j, ip, port, h, u, ip, port, ip, port, h)
		}
		if u == f.upstreams-1 && !f.cycleAt.IsZero() {
			f.lastDur = time.Since(f.cycleAt)
		}
		f.mu.Unlock()
		writeKongPage(w, &sb, r.URL.Path, healthTargetsPer, healthTargetsPer, size)
	default:
		http.Error(w, `{"message":"Not found"}`, http.StatusNotFound)
	}
}

func writeKongPage(w http.ResponseWriter, sb *strings.Builder, path string, end, total, size int) {
	if end >= total {
		sb.WriteString(`],"next":null,"node_id":"cbb297c0-14a9-46bc-ad91-1d0ef9b42df9"}`)
	} else {
		off := base64.StdEncoding.EncodeToString([]byte(strconv.Itoa(end)))
		fmt.Fprintf(sb, `],"offset":"%s","next":"%s?offset=%s&size=%d","node_id":"cbb297c0-14a9-46bc-ad91-1d0ef9b42df9"}`,
			off, path, strings.ReplaceAll(off, "=", "%3D"), size)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_, _ = w.Write([]byte(sb.String()))
}

// collectorConfigHealth is collectorConfig plus a health section polling
// kongURL with the kong naming profile.
func collectorConfigHealth(kongURL string) string {
	health := `    health:
      profile: kong
      report_interval: 30s
      stale_after: 1m
      kong:
        - endpoint: ` + kongURL + `
          instance: kong-e2e
          interval: ` + healthInterval.String() + `
          timeout: 10s
          max_concurrency: 16
`
	return strings.Replace(collectorConfig, "    flush_interval: 1s\n", "    flush_interval: 1s\n"+health, 1)
}

// promScalar runs a query whose result is one sample (or none: -1).
func promScalar(p *promServer, query string) (float64, error) {
	v, err := promQuery(p, query)
	if err != nil {
		return 0, err
	}
	if len(v) == 0 {
		return -1, nil
	}
	return float64(v[0].Value), nil
}

func TestKongHealthAt20kTargets(t *testing.T) {
	kong := newFakeKongAdmin()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: kong, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	col := startCollectorWith(t, collectorConfigHealth("http://"+ln.Addr().String()), 4)
	prom := startPrometheus(t, col.promAddr)

	const total = healthUpstreams * healthTargetsPer
	eventually(t, 3*convergeTimeout, "Prometheus to hold 20k healthy targets in 80k series", func() (bool, string) {
		ones, err := promScalar(prom, `count(kong_upstream_target_health == 1)`)
		if err != nil {
			return false, err.Error()
		}
		all, err := promScalar(prom, `count(kong_upstream_target_health)`)
		if err != nil {
			return false, err.Error()
		}
		healthy, _ := promScalar(prom, `count(kong_upstream_target_health{state="healthy",subsystem="http",job="kong",instance="kong-e2e"} == 1)`)
		return ones == total && all == 4*total && healthy == total,
			fmt.Sprintf("count(==1) = %v, want %d; count = %v, want %d; healthy = %v", ones, total, all, 4*total, healthy)
	})
	t.Logf("fake Kong served %d requests; last full poll cycle took %v", kong.served.Load(), kong.lastCycle())

	// Flip one target: it must show up within one interval, give or take
	// the polls around it and Prometheus's 1s scrape.
	ip, port := targetAddr(4242, 1)
	target := ip + ":" + strconv.Itoa(port)
	flipped := time.Now()
	kong.set(4242, 1, "UNHEALTHY")
	base := `upstream="upstream-04242",target="` + target + `",address="` + target + `",subsystem="http"`
	query := `kong_upstream_target_health{` + base + `,state="unhealthy"}`
	eventually(t, convergeTimeout, "the flipped target to be unhealthy in Prometheus", func() (bool, string) {
		v, err := promScalar(prom, query)
		if err != nil {
			return false, err.Error()
		}
		return v == 1, fmt.Sprintf("%s = %v", query, v)
	})
	took := time.Since(flipped)
	// Worst case: the flip lands just after a poll read upstream-04242; it
	// waits out the rest of that cycle, one interval, and the next cycle up
	// to that upstream (whose rows are emitted as soon as it answers), then
	// Prometheus's 1s scrape and the query.
	bound := healthInterval + 2*kong.lastCycle() + 2*time.Second
	t.Logf("flip visible in Prometheus after %v (bound: interval %v + 2 × poll cycle %v + 2s scrape)", took, healthInterval, kong.lastCycle())
	if took > bound {
		t.Errorf("flip took %v to reach Prometheus, want at most %v", took, bound)
	}
	for q, want := range map[string]float64{
		`count(kong_upstream_target_health == 1)`:                   total,
		`count(kong_upstream_target_health{state="healthy"} == 1)`:  total - 1,
		`kong_upstream_target_health{` + base + `,state="healthy"}`: 0,
	} {
		eventually(t, convergeTimeout, q, func() (bool, string) {
			v, err := promScalar(prom, q)
			if err != nil {
				return false, err.Error()
			}
			return v == want, fmt.Sprintf("%s = %v, want %v", q, v, want)
		})
	}
}
