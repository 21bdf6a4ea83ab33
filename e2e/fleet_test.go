package e2e

// Fleet exactness: three collectors behind a round-robin "load balancer",
// one real Prometheus that both scrapes them (two sharded jobs, the shape of
// examples/prometheus-sharded.yml) and receives their remote writes. Two
// collectors are restarted mid-run, one with file_storage, one relying on
// promstream's shutdown_grace; every acknowledged request must be counted
// once, in both paths. Two collectors poll the same Kong Admin API and
// Prometheus must deduplicate them and survive either. A second exporter that
// keeps failing (connection refused, then 400) must not change what is served.

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

const (
	fleetTraffic = 6000 // Kong requests (traces) spread over the fleet
	fleetPerPost = 25   // traces per OTLP export
	fleetPace    = 120 * time.Millisecond
	fleetWindow  = "15m" // covers the whole run

	haUpstreams = 10 // fake Kong: 10 upstreams × 2 targets

	// The otel profile's request latency histogram: one observation per
	// request, with the request counter's labels.
	histCount   = "http_server_request_duration_seconds_count"
	histCreated = "http_server_request_duration_seconds_created"
)

// fleetRow is one line of the summary table.
type fleetRow struct {
	scenario          string
	sent, acked       string
	pull, remoteWrite string
	restart           string
}

func TestFleet(t *testing.T) {
	var rows []fleetRow
	t.Run("sharded pull and remote write across restarts", func(t *testing.T) {
		rows = append(rows, testFleetRestarts(t)...)
	})
	t.Run("failing second exporter", func(t *testing.T) {
		for _, tc := range []struct{ name, kind string }{
			{"connection refused", "refused"},
			{"400 permanent", "400"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				rows = append(rows, testFailingSecondExporter(t, tc.kind))
			})
		}
	})
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-40s %6s %6s %6s %12s  %s\n", "scenario", "sent", "acked", "pull", "remote write", "notes")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-40s %6s %6s %6s %12s  %s\n", r.scenario, r.sent, r.acked, r.pull, r.remoteWrite, r.restart)
	}
	t.Log(b.String())
}

// testFleetRestarts runs the three-collector scenario and returns its rows.
func testFleetRestarts(t *testing.T) []fleetRow {
	start := time.Now()
	phase := func(what string) { t.Logf("[%6.1fs] %s", time.Since(start).Seconds(), what) }
	// The shipped example must be a valid Prometheus config; the test's
	// config is the same file with the test's targets and intervals.
	example, err := os.ReadFile(filepath.Join("..", "examples", "prometheus-sharded.yml"))
	if err != nil {
		t.Fatalf("read the shipped example: %v", err)
	}
	promtoolCheckConfig(t, filepath.Join("..", "examples", "prometheus-sharded.yml"))
	validateCollectorConfig(t, filepath.Join("..", "examples", "otelcol-fleet.yaml"))

	kong := newFakeKongAdminN(haUpstreams)
	kong.set(3, 1, "UNHEALTHY")
	kong.set(7, 0, "UNHEALTHY")
	kln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ksrv := &http.Server{Handler: kong, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = ksrv.Serve(kln) }()
	t.Cleanup(func() { _ = ksrv.Close() })
	kongURL := "http://" + kln.Addr().String()

	ports := freePorts(t, 3*4+1)
	promAddr := hostPort(ports[12])
	storage := filepath.Join(t.TempDir(), "c1-file_storage")
	if err := os.MkdirAll(storage, 0o700); err != nil {
		t.Fatal(err)
	}
	rw := "http://" + promAddr + "/api/v1/write"
	members := []*fleetMember{
		// c0: never restarted; polls Kong.
		newFleetMember(t, fleetOpts{name: "c0", kongURL: kongURL, rwURL: rw}, ports[0:4]),
		// c1: restarted with file_storage behind the cumulative processor.
		newFleetMember(t, fleetOpts{name: "c1", storageDir: storage, rwURL: rw}, ports[4:8]),
		// c2: restarted without storage (promstream's shutdown_grace); polls
		// the same Kong as c0, the health replica that is stopped. Its
		// receiver also passes the spans to a traces pipeline, so its
		// SIGTERM stops a receiver shared by two pipelines.
		newFleetMember(t, fleetOpts{name: "c2", kongURL: kongURL, rwURL: rw, tracesPipeline: true}, ports[8:12]),
	}
	var targets []string
	for _, m := range members {
		targets = append(targets, "'"+m.col.promAddr+"'")
	}
	promCfg := fleetPrometheusConfig(t, string(example), targets)
	prom := startPrometheusOn(t, promAddr, promCfg, "--web.enable-remote-write-receiver")
	promtoolCheckConfig(t, filepath.Join(prom.dir, "prometheus.yml"))
	for _, m := range members {
		m.launch(t)
	}
	for _, m := range members {
		m.waitReady(t)
	}
	byName := map[string]*fleetMember{}
	for _, m := range members {
		byName[m.name] = m
	}

	phase("collectors ready")
	// Health: two collectors, the same Kong, the same (default) shard.
	wantHealth := haWant(kong)
	eventually(t, convergeTimeout, "both collectors' health copies in Prometheus", func() (bool, string) {
		return haCheck(prom, wantHealth, []string{"c0", "c2"})
	})

	phase("health converged")
	// Traffic: round-robin over the three, two restarts while it flows.
	var tt []trafficTarget
	for _, m := range members {
		tt = append(tt, trafficTarget{m.name, m.col.tracesURL()})
	}
	drv := newTrafficDriver(tt, fleetPerPost)
	release := make(chan struct{})
	done := make(chan struct{}) // closed when the driver returns runErr
	var runErr error
	began := time.Now()
	go func() {
		defer close(done)
		runErr = drv.run(fleetTraffic, fleetPace, fleetTraffic-1000, release, 2*time.Minute)
	}()
	released := false
	defer func() { // on an early failure: let the driver end (within its bounds)
		if !released {
			close(release)
		}
		select {
		case <-done:
		case <-time.After(3 * time.Minute):
		}
	}()

	// c1: SIGTERM at a third of the traffic, started again at once with the
	// same config and storage directory.
	drv.waitAcked(t, fleetTraffic/3, done)
	c1Stop := members[1].terminate(t)
	c1Before := drv.ackedTotal("c1")
	members[1].launch(t)
	members[1].waitReady(t)
	t.Logf("c1 restarted (storage) after %d acknowledged traces: shutdown took %v", drv.ackedN.Load(), c1Stop)

	// c2: SIGTERM at two thirds; while it is down, the health view must
	// survive on c0 alone.
	drv.waitAcked(t, 2*fleetTraffic/3, done)
	c2Stop := members[2].terminate(t)
	// With sharded jobs no scrape is whole, so the grace runs out: the
	// exporter logs that its last points were not served, though both shard
	// jobs read them (the exact pull totals below prove it).
	t.Logf("c2's shutdown_grace log: %q", members[2].logLines("shutdown_grace"))
	c2Before := drv.ackedTotal("c2")
	eventually(t, convergeTimeout, "Prometheus to see c2 down and its health series stale", func() (bool, string) {
		up, err := promQuery(prom, `up{instance="`+members[2].col.promAddr+`"}`)
		if err != nil {
			return false, err.Error()
		}
		downs := 0
		for _, s := range up {
			if s.Value == 0 {
				downs++
			}
		}
		if downs != 2 {
			return false, fmt.Sprintf("up of c2's two shard jobs: %v", up)
		}
		return haCheck(prom, wantHealth, []string{"c0"})
	})
	t.Logf("c2 down (no storage) after %d acknowledged traces: shutdown took %v; health deduplicated from c0 alone", drv.ackedN.Load(), c2Stop)
	members[2].launch(t)
	members[2].waitReady(t)
	close(release)
	released = true

	select {
	case <-done:
		if runErr != nil {
			t.Fatal(runErr)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("traffic did not finish within 3m")
	}
	t.Logf("traffic: %d traces in %v; sent by first target %v, failed posts %v, lost %d",
		fleetTraffic, time.Since(began).Round(time.Millisecond), drv.sent, drv.failed, drv.lost)
	if drv.lost != 0 {
		t.Errorf("%d traces were acknowledged by no collector", drv.lost)
	}
	for name, before := range map[string]int{"c1": c1Before, "c2": c2Before} {
		if after := drv.ackedTotal(name); after <= before {
			t.Errorf("%s acknowledged nothing after its restart (%d before, %d in all)", name, before, after)
		}
	}
	phase("traffic done")
	want := drv.expected()

	// Pull: per series, the sum of every counter lifetime's last value; the
	// latency histogram's _count must say the same.
	var pull, pushed map[string]float64
	var lives, resets map[string]int
	eventually(t, convergeTimeout, "Prometheus's scraped totals to equal the acknowledged requests", func() (bool, string) {
		got, l, problems, err := lifetimeTotals(prom, "gateway_requests_total", "gateway_requests_created", fleetWindow)
		if err != nil {
			return false, err.Error()
		}
		pull, lives = got, l
		diff := diffTotals(got, want)
		return diff == "" && len(problems) == 0, diff + "\n" + strings.Join(problems, "\n")
	})
	eventually(t, convergeTimeout, "Prometheus's scraped latency histogram counts to equal the acknowledged requests", func() (bool, string) {
		got, _, problems, err := lifetimeTotals(prom, histCount, histCreated, fleetWindow)
		if err != nil {
			return false, err.Error()
		}
		diff := diffTotals(got, want)
		return diff == "" && len(problems) == 0, diff + "\n" + strings.Join(problems, "\n")
	})
	phase("pull exact")
	// Remote write: every emitted point, resets detected.
	eventually(t, convergeTimeout, "Prometheus's remote-written totals to equal the acknowledged requests", func() (bool, string) {
		got, r, problems, err := resetTotals(prom, "rw_gateway_requests_total", fleetWindow)
		if err != nil {
			return false, err.Error()
		}
		pushed, resets = got, r
		diff := diffTotals(got, want)
		return diff == "" && len(problems) == 0, diff + "\n" + strings.Join(problems, "\n")
	})
	eventually(t, convergeTimeout, "Prometheus's remote-written latency histogram counts to equal the acknowledged requests", func() (bool, string) {
		got, _, problems, err := resetTotals(prom, "rw_"+histCount, fleetWindow)
		if err != nil {
			return false, err.Error()
		}
		diff := diffTotals(got, want)
		return diff == "" && len(problems) == 0, diff + "\n" + strings.Join(problems, "\n")
	})
	phase("remote write exact")
	// Lifetimes: storage keeps c1's counters (one created time, no reset);
	// c2's restart without storage starts them again (two, one reset).
	for k := range want {
		wantLives, wantResets := 1, 0
		if strings.HasPrefix(k, "c2 ") {
			wantLives, wantResets = 2, 1
		}
		if lives[k] != wantLives {
			t.Errorf("%s: %d counter lifetimes (_created values) scraped, want %d", k, lives[k], wantLives)
		}
		if resets[k] != wantResets {
			t.Errorf("%s: %d resets in the remote-written series, want %d", k, resets[k], wantResets)
		}
	}
	if n, err := telemetrySum(members[1].col, "otelcol_processor_cumulative_checkpoints", map[string]string{"outcome": "restored"}); err != nil || n != 1 {
		t.Errorf("c1 after its restart: checkpoints{outcome=restored} = %v (%v), want 1", n, err)
	}
	phase("lifetimes checked")
	checkFleetPromQL(t, prom, want)
	checkPromIngestion(t, prom)
	checkCollectorLabel(t, prom)
	checkPushedMatchesScraped(t, prom)
	for _, m := range members {
		checkShardPartition(t, prom, m)
	}

	phase("checks done")
	rows := make([]fleetRow, 0, 4)
	restart := map[string]string{
		"c0": "none",
		"c1": fmt.Sprintf("restarted, file_storage: 1 counter lifetime, 0 resets (shutdown %v)", c1Stop.Round(100*time.Millisecond)),
		"c2": fmt.Sprintf("restarted, no storage, shutdown_grace %v: 2 lifetimes, 1 reset (shutdown %v)", fleetShutdownGrace, c2Stop.Round(100*time.Millisecond)),
	}
	var sent, acked int
	for _, m := range members {
		a := drv.ackedTotal(m.name)
		sent += drv.sent[m.name]
		acked += a
		rows = append(rows, fleetRow{
			scenario: "fleet " + m.name, sent: strconv.Itoa(drv.sent[m.name]), acked: strconv.Itoa(a),
			pull: fmtCount(sumWhere(pull, m.name+" ")), remoteWrite: fmtCount(sumWhere(pushed, m.name+" ")),
			restart: restart[m.name],
		})
	}
	rows = append(rows, fleetRow{
		scenario: "fleet total", sent: strconv.Itoa(sent), acked: strconv.Itoa(acked),
		pull: fmtCount(sumWhere(pull, "")), remoteWrite: fmtCount(sumWhere(pushed, "")),
		restart: fmt.Sprintf("lost %d; failed posts %v", drv.lost, drv.failed),
	})
	rows = append(rows, fleetRow{
		scenario: fmt.Sprintf("health HA (%d targets, c0+c2)", len(wantHealth)/4), sent: "-", acked: "-", pull: "exact", remoteWrite: "-",
		restart: fmt.Sprintf("max without (collector): %d series, right values, with both and with c2 down", len(wantHealth)),
	})
	return rows
}

func fmtCount(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// fleetPrometheusConfig is the shipped example with the test's targets and
// a 1s scrape interval.
func fleetPrometheusConfig(t *testing.T, example string, targets []string) string {
	t.Helper()
	replace := func(s, old, new string, n int) string {
		if c := strings.Count(s, old); c != n {
			t.Fatalf("examples/prometheus-sharded.yml: %q occurs %d times, want %d: the test no longer matches its shape", old, c, n)
		}
		return strings.ReplaceAll(s, old, new)
	}
	cfg := replace(example, "scrape_interval: 15s", "scrape_interval: 1s\n  evaluation_interval: 1s", 1)
	cfg = replace(cfg, "scrape_timeout: 10s", "scrape_timeout: 1s", 1)
	return replace(cfg, "['otelgateway-0:9464', 'otelgateway-1:9464', 'otelgateway-2:9464']", "["+strings.Join(targets, ", ")+"]", 2)
}

// promtoolCheckConfig runs `promtool check config` on path.
func promtoolCheckConfig(t *testing.T, path string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found in PATH: %v", err)
	}
	if out, err := exec.Command(bin, "check", "config", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config %s: %v\n%s", path, err, out)
	}
}

// validateCollectorConfig runs `otelcol-gateway validate` on a shipped
// collector config, with its environment variables set.
func validateCollectorConfig(t *testing.T, path string) {
	t.Helper()
	cmd := exec.Command(otelcolBin, "validate", "--config", path)
	cmd.Env = append(os.Environ(), "COLLECTOR_NAME=c0", "STORAGE_DIR="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("otelcol-gateway validate --config %s: %v\n%s", path, err, out)
	}
}

// haWant is the deduplicated kong_upstream_target_health the fake Kong's
// targets must produce: four series per target, 1 for its state.
func haWant(k *fakeKongAdmin) seriesCounts {
	out := seriesCounts{}
	k.mu.Lock()
	defer k.mu.Unlock()
	for u := range k.upstreams {
		for j := range healthTargetsPer {
			ip, port := targetAddr(u, j)
			target := ip + ":" + strconv.Itoa(port)
			state := "healthy"
			if k.health[upstreamName(u)+"/"+strconv.Itoa(j)] == "UNHEALTHY" {
				state = "unhealthy"
			}
			for _, s := range []string{"healthchecks_off", "healthy", "unhealthy", "dns_error"} {
				v := 0.0
				if s == state {
					v = 1
				}
				out[fmt.Sprintf(`{address=%q, instance="kong-0", job="kong", state=%q, subsystem="http", target=%q, upstream=%q}`,
					target, s, target, upstreamName(u))] = v
			}
		}
	}
	return out
}

// haCheck asserts the health view: `max without (collector)` returns exactly
// want, and every target/state is reported by exactly the collectors live.
func haCheck(p *promServer, want seriesCounts, live []string) (bool, string) {
	v, err := promQuery(p, `max without (collector) (kong_upstream_target_health)`)
	if err != nil {
		return false, err.Error()
	}
	if diff := diffCounts(vectorCounts(v), want); diff != "" {
		return false, "max without (collector): " + diff
	}
	byCollector, err := promQuery(p, `count by (collector) (kong_upstream_target_health)`)
	if err != nil {
		return false, err.Error()
	}
	got := map[string]float64{}
	for _, s := range byCollector {
		got[string(s.Metric["collector"])] = float64(s.Value)
	}
	wantBy := map[string]float64{}
	for _, c := range live {
		wantBy[c] = float64(len(want))
	}
	if fmt.Sprint(got) != fmt.Sprint(wantBy) {
		return false, fmt.Sprintf("series by collector %v, want %v", got, wantBy)
	}
	return true, ""
}

// checkFleetPromQL runs the queries a user would: max_over_time per series
// is the total for a counter that kept its lifetime (c0, c1 with storage);
// for c2 (two lifetimes) it is not, and increase() is an extrapolated
// estimate; both are logged beside the exact totals.
func checkFleetPromQL(t *testing.T, p *promServer, want map[string]float64) {
	t.Helper()
	v, err := promQuery(p, `sum by (collector, http_route, http_request_method, http_response_status_code) (max_over_time(gateway_requests_total[`+fleetWindow+`]))`)
	if err != nil {
		t.Fatal(err)
	}
	var c2Max float64
	for _, s := range v {
		k := metricSeriesKey(s.Metric)
		if strings.HasPrefix(k, "c2 ") {
			c2Max += float64(s.Value)
			continue
		}
		if float64(s.Value) != want[k] {
			t.Errorf("max_over_time for %s = %v, want %v", k, s.Value, want[k])
		}
	}
	inc, err := promQuery(p, `sum by (collector) (increase(gateway_requests_total[`+fleetWindow+`]))`)
	if err != nil {
		t.Fatal(err)
	}
	rwInc, err := promQuery(p, `sum by (collector) (increase(rw_gateway_requests_total[`+fleetWindow+`]))`)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("PromQL: c2 sum(max_over_time) = %v (one lifetime of two; acknowledged %v); increase() pull %v, remote write %v (acknowledged c0 %v, c1 %v, c2 %v)",
		c2Max, sumWhere(want, "c2 "), compactVector(inc), compactVector(rwInc), sumWhere(want, "c0 "), sumWhere(want, "c1 "), sumWhere(want, "c2 "))
}

func compactVector(v model.Vector) string {
	var parts []string
	for _, s := range v {
		parts = append(parts, fmt.Sprintf("%s=%.1f", s.Metric["collector"], float64(s.Value)))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// checkPromIngestion reads Prometheus's own counters: nothing refused out
// of order, out of bounds or as a duplicate, on either path, and no
// remote-write request answered other than 2xx.
func checkPromIngestion(t *testing.T, p *promServer) {
	t.Helper()
	sums, samples, err := promSelfMetrics(p)
	if err != nil {
		t.Fatalf("Prometheus's own metrics: %v", err)
	}
	for _, name := range []string{
		"prometheus_tsdb_out_of_order_samples_total", "prometheus_tsdb_out_of_bound_samples_total",
		"prometheus_tsdb_too_old_samples_total",
		"prometheus_target_scrapes_sample_out_of_order_total", "prometheus_target_scrapes_sample_duplicate_timestamp_total",
		"prometheus_target_scrapes_sample_out_of_bounds_total",
	} {
		if sums[name] != 0 {
			t.Errorf("Prometheus %s = %v, want 0", name, sums[name])
		}
	}
	var ok, bad float64
	for _, s := range samples {
		if s.labels.Get("__name__") != "prometheus_http_requests_total" || s.labels.Get("handler") != "/api/v1/write" {
			continue
		}
		if strings.HasPrefix(s.labels.Get("code"), "2") {
			ok += s.value
		} else {
			bad += s.value
			t.Errorf("Prometheus answered %v remote writes with %s", s.value, s.labels.Get("code"))
		}
	}
	t.Logf("Prometheus: %v remote-write requests accepted, %v refused; samples appended out of order/bounds: 0", ok, bad)
	if ok == 0 {
		t.Error("Prometheus accepted no remote write")
	}
}

// checkCollectorLabel: every gateway series, scraped or pushed, carries the
// collector label, three distinct values, and no two series share the
// labels that identify them.
func checkCollectorLabel(t *testing.T, p *promServer) {
	t.Helper()
	for _, q := range []string{
		`count({job="kong", collector=""})`,
		`count({__name__=~"rw_.+", collector=""})`,
		`count by (__name__, collector, job, instance, http_route, http_request_method, http_response_status_code) ({__name__=~"gateway_requests_total|rw_gateway_requests_total"}) > 1`,
	} {
		if v, err := promQuery(p, q); err != nil || len(v) != 0 {
			t.Errorf("%s = %v (%v), want nothing", q, v, err)
		}
	}
	for _, name := range []string{"gateway_requests_total", "rw_gateway_requests_total"} {
		v, err := promQuery(p, `count by (collector) (`+name+`)`)
		if err != nil {
			t.Fatal(err)
		}
		got := compactVector(v)
		wantN := float64(len(fleetCalls))
		if want := fmt.Sprintf("c0=%.1f c1=%.1f c2=%.1f", wantN, wantN, wantN); got != want {
			t.Errorf("count by (collector) (%s) = %s, want %s", name, got, want)
		}
	}
}

// checkPushedMatchesScraped: a series pushed by remote write carries the
// labels of the same series scraped from promstream, so queries need not
// know which path a series took: the README's recipe pairs promstream's
// without_scope_info with the remote-write exporter's disable_scope_info
// (without it, pushed series kept otel_scope_name). The series differ only
// by name (namespace rw) and instance, which Prometheus gives a scraped
// series (its target) and a pushed one does not have.
func checkPushedMatchesScraped(t *testing.T, p *promServer) {
	t.Helper()
	labelsBy := func(name string) map[string]string {
		v, err := promQuery(p, name)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, s := range v {
			m := model.Metric{}
			for k, val := range s.Metric {
				if k != model.MetricNameLabel && k != model.InstanceLabel {
					m[k] = val
				}
			}
			out[metricSeriesKey(s.Metric)] = m.String()
		}
		return out
	}
	scraped, pushed := labelsBy("gateway_requests_total"), labelsBy("rw_gateway_requests_total")
	if len(pushed) == 0 || len(pushed) != len(scraped) {
		t.Errorf("%d pushed series, %d scraped", len(pushed), len(scraped))
	}
	for k, l := range pushed {
		if scraped[k] != l {
			t.Errorf("%s: pushed with %s, scraped with %s", k, l, scraped[k])
		}
	}
}

// checkShardPartition: the collector's two shards are disjoint and together
// its whole /metrics (read from the exporter), and in Prometheus the two
// shard jobs' samples add up to the collector's series, so no series was
// written by both jobs.
func checkShardPartition(t *testing.T, p *promServer, m *fleetMember) {
	t.Helper()
	eventually(t, convergeTimeout, m.name+"'s shards to partition its /metrics", func() (bool, string) {
		whole, err := exporterSampleSet(m.col.metricsURL())
		if err != nil {
			return false, err.Error()
		}
		var shards [2]map[string]bool
		for i := range shards {
			if shards[i], err = exporterSampleSet(fmt.Sprintf("%s?shard=%d&shards=2", m.col.metricsURL(), i)); err != nil {
				return false, err.Error()
			}
		}
		var problems []string
		for k := range shards[0] {
			if shards[1][k] {
				problems = append(problems, "in both shards: "+k)
			}
		}
		for i, s := range shards {
			for k := range s {
				if !whole[k] {
					problems = append(problems, fmt.Sprintf("in shard %d only: %s", i, k))
				}
			}
		}
		for k := range whole {
			if !shards[0][k] && !shards[1][k] {
				problems = append(problems, "in no shard: "+k)
			}
		}
		if len(shards[0]) == 0 || len(shards[1]) == 0 {
			problems = append(problems, fmt.Sprintf("an empty shard: %d and %d samples", len(shards[0]), len(shards[1])))
		}
		sort.Strings(problems)
		if len(problems) > 5 {
			problems = append(problems[:5], fmt.Sprintf("… %d problems", len(problems)))
		}
		return len(problems) == 0, strings.Join(problems, "\n")
	})
	eventually(t, convergeTimeout, m.name+"'s shard jobs to add up to its series in Prometheus", func() (bool, string) {
		scraped, err := promScalar(p, `sum(scrape_samples_post_metric_relabeling{instance="`+m.col.promAddr+`"})`)
		if err != nil {
			return false, err.Error()
		}
		stored, err := promScalar(p, `count({collector="`+m.name+`", __name__!~"rw_.+"})`)
		if err != nil {
			return false, err.Error()
		}
		return scraped == stored && scraped > 0, fmt.Sprintf("samples scraped by both shard jobs %v, series stored %v", scraped, stored)
	})
}

// testFailingSecondExporter runs one collector with exporters [promstream,
// otlp_http] where otlp_http always fails: kind "refused" (nothing listens:
// retryable, the receiver resends its window) or "400" (a server answering
// 400: permanent, the receiver drops the window it already handed over).
// What promstream serves and Prometheus stores must equal what was
// acknowledged, exactly.
func testFailingSecondExporter(t *testing.T, kind string) fleetRow {
	ports := freePorts(t, 5)
	var endpoint string
	var got400 atomic.Int64
	switch kind {
	case "refused":
		endpoint = "http://" + hostPort(ports[4]) // reserved and released: nothing listens
	case "400":
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got400.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"code":3,"message":"refused by the test"}`))
		}))
		t.Cleanup(srv.Close)
		endpoint = srv.URL
	}
	name := "x-" + kind
	m := newFleetMember(t, fleetOpts{name: name, otlpHTTP: endpoint}, ports[:4])
	m.launch(t)
	m.waitReady(t)
	prom := startPrometheus(t, m.col.promAddr)

	const total = 1500
	drv := newTrafficDriver([]trafficTarget{{name, m.col.tracesURL()}}, fleetPerPost)
	release := make(chan struct{})
	close(release)
	if err := drv.run(total, 80*time.Millisecond, total, release, time.Second); err != nil {
		t.Fatal(err)
	}
	want := drv.expected()
	if drv.lost != 0 {
		t.Errorf("%d traces were not acknowledged", drv.lost)
	}

	var served, stored map[string]float64
	check := func(what string) {
		eventually(t, convergeTimeout, what, func() (bool, string) {
			s, err := exporterTotals(m.col, metricName)
			if err != nil {
				return false, err.Error()
			}
			h, err := exporterTotals(m.col, histCount)
			if err != nil {
				return false, err.Error()
			}
			v, err := promQuery(prom, metricName)
			if err != nil {
				return false, err.Error()
			}
			p := map[string]float64{}
			for _, x := range v {
				p[metricSeriesKey(x.Metric)] += float64(x.Value)
			}
			served, stored = s, p
			d1, d2, d3 := diffTotals(s, want), diffTotals(h, want), diffTotals(p, want)
			return d1 == "" && d2 == "" && d3 == "", "exporter:\n" + d1 + "\nexporter " + histCount + ":\n" + d2 + "\nPrometheus:\n" + d3
		})
	}
	check("promstream and Prometheus to serve exactly the acknowledged requests")
	// The failing exporter keeps failing: with "refused" every flush resends
	// the window; the totals must not move.
	time.Sleep(3 * time.Second)
	check("the totals to stay exact while the second exporter keeps failing")

	retried, _ := telemetrySum(m.col, "otelcol_receiver_gateway_flushed_points", map[string]string{"outcome": "retried"})
	dropped, _ := telemetrySum(m.col, "otelcol_receiver_gateway_flushed_points", map[string]string{"outcome": "dropped"})
	replaced, _ := telemetrySum(m.col, "otelcol_processor_cumulative_points", map[string]string{"reason": "replaced"})
	detail := fmt.Sprintf("receiver points retried %v, dropped %v; processor replaced %v", retried, dropped, replaced)
	switch kind {
	case "refused":
		if retried == 0 || replaced == 0 {
			t.Errorf("the refused exporter did not exercise the resend path: %s", detail)
		}
	case "400":
		detail += fmt.Sprintf("; 400 server got %d requests", got400.Load())
		if dropped == 0 || got400.Load() == 0 {
			t.Errorf("the 400 exporter did not exercise the permanent-error path: %s", detail)
		}
	}
	t.Log(detail)
	return fleetRow{
		scenario: "second exporter " + kind + " (otlp_http)", sent: strconv.Itoa(drv.sent[name]), acked: strconv.Itoa(drv.ackedTotal(name)),
		pull: fmtCount(sumWhere(stored, "")), remoteWrite: "-",
		restart: "promstream's /metrics " + fmtCount(sumWhere(served, "")) + "; " + detail,
	}
}

// exporterTotals scrapes promstream and keys the samples of name by
// seriesKey.
func exporterTotals(col *collector, name string) (map[string]float64, error) {
	body, _, err := scrape(col.metricsURL())
	if err != nil {
		return nil, err
	}
	samples, err := parseExposition(body, exporterContentType)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range samples {
		if s.labels.Get("__name__") != name {
			continue
		}
		m := model.Metric{}
		s.labels.Range(func(l labels.Label) { m[model.LabelName(l.Name)] = model.LabelValue(l.Value) })
		out[metricSeriesKey(m)] += s.value
	}
	return out, nil
}
