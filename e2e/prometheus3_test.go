package e2e

// Prometheus 3, as users run it: the version the Makefile builds from its Go
// module into a cache outside the repository (make prometheus3), passed as
// PROMETHEUS3_BIN.

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// prometheus3Bin returns the Prometheus 3 binary the Makefile built. A
// missing one fails the test (a skip would let the suite look green
// without it).
func prometheus3Bin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("PROMETHEUS3_BIN")
	if err := checkBinary(bin); err != nil {
		t.Fatalf("PROMETHEUS3_BIN: run `make e2e`, which builds Prometheus 3 once into ~/.cache/otelgateway (%v)", err)
	}
	return bin
}

// startPrometheus3 starts Prometheus 3 with config (a whole prometheus.yml)
// and flags. Targets are picked up within a second of the start, instead of
// Prometheus's default 5s (--scrape.discovery-reload-interval, hidden).
func startPrometheus3(t *testing.T, config string, flags ...string) *promServer {
	t.Helper()
	flags = append([]string{"--scrape.discovery-reload-interval=1s"}, flags...)
	return startPrometheusBin(t, prometheus3Bin(t), hostPort(freePorts(t, 1)[0]), config, flags...)
}

// promQueryAt runs an instant query evaluated at ts.
func promQueryAt(p *promServer, query string, ts model.Time) (model.Vector, error) {
	status, body, err := httpGet("http://" + p.addr + "/api/v1/query?query=" + url.QueryEscape(query) +
		"&time=" + strconv.FormatFloat(float64(ts)/1000, 'f', 3, 64))
	if err != nil {
		return nil, err
	}
	var resp promQueryResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("status %d, decode %q: %w", status, truncate(body), err)
	}
	if resp.Status != "success" || resp.Data.ResultType != "vector" {
		return nil, fmt.Errorf("status %d, query %q: %s (%s)", status, query, resp.Error, resp.Data.ResultType)
	}
	return resp.Data.Result, nil
}

// postKong posts n Kong requests to a collector as one OTLP export, spread
// round-robin over fleetCalls, and returns the count per call.
func postKong(t *testing.T, col *collector, n int) map[int]int {
	t.Helper()
	body, calls := kongExport("kong-node-0", 0, n)
	if status, resp := httpPost(t, col.tracesURL(), "application/x-protobuf", body); status != 200 {
		t.Fatalf("POST %s: %d %s", col.tracesURL(), status, resp)
	}
	return calls
}

// TestRestartCreatedTimestampsPrometheus3: a collector restarted under
// Prometheus 3 with created-timestamp-zero-ingestion, scraped by two jobs
// (the protobuf that feature flag makes the default, and OpenMetrics with
// its _created lines).
//
// Without storage each counter comes back higher than it was, so only the
// zero sample at its created time can show the reset. The collector serves
// a series only from its first flush (3s here), so the scrapes before that
// write staleness markers: the zero sample must be dated after them, or
// Prometheus refuses it as out of order. resets() must count one reset per
// series, and increase() over the whole run, evaluated at the last sample
// (no extrapolation: the first sample is the zero at the first created
// time), must equal what was acknowledged, exactly.
//
// With storage the counters continue with their created time: no reset,
// increase() exact.
func TestRestartCreatedTimestampsPrometheus3(t *testing.T) {
	for _, storage := range []bool{false, true} {
		name := "without storage"
		if storage {
			name = "with storage"
		}
		t.Run(name, func(t *testing.T) { restartCreatedTimestamps(t, storage) })
	}
}

func restartCreatedTimestamps(t *testing.T, storage bool) {
	const before, after = 12 * 5, 12 * 8 // per series: 5, then 8 (more than before)
	o := fleetOpts{name: "ct", flushInterval: 3 * time.Second}
	wantResets := 1.0
	if storage {
		o.storageDir, wantResets = t.TempDir(), 0
	}
	m := newFleetMember(t, o, freePorts(t, 4))
	m.launch(t)
	m.waitReady(t)
	scrape := func(job, protocol string) string {
		return fmt.Sprintf(`  - job_name: %s
    scrape_protocols: [%s]
    static_configs: [{targets: ['%s']}]
`, job, protocol, m.col.promAddr)
	}
	prom := startPrometheus3(t, prometheusConfig+scrape("proto", "PrometheusProto")+scrape("openmetrics", "OpenMetricsText1.0.0"),
		"--enable-feature=created-timestamp-zero-ingestion")

	// Both jobs see the first lifetime's values.
	want := map[string]float64{}
	for ci, n := range postKong(t, m.col, before) {
		want[seriesKey("ct", fleetCalls[ci])] = float64(n)
	}
	waitJobs := func(what string) {
		t.Helper()
		eventually(t, convergeTimeout, what, func() (bool, string) {
			for _, job := range []string{"proto", "openmetrics"} {
				v, err := promQuery(prom, `gateway_requests_total{job="`+job+`"}`)
				if err != nil {
					return false, err.Error()
				}
				got := map[string]float64{}
				for _, s := range v {
					got[metricSeriesKey(s.Metric)] = float64(s.Value)
				}
				if d := diffTotals(got, want); d != "" {
					return false, job + ": " + d
				}
			}
			return true, ""
		})
	}
	waitJobs("both jobs to hold the first lifetime")
	m.terminate(t)
	m.launch(t)
	m.waitReady(t)
	total := map[string]float64{}
	for k, v := range want {
		total[k] = v
	}
	for ci, n := range postKong(t, m.col, after) {
		total[seriesKey("ct", fleetCalls[ci])] += float64(n)
	}
	if storage {
		want = total // the counters continue
	} else {
		want = map[string]float64{}
		for k, v := range total {
			want[k] = v - float64(before/12)
		}
	}
	waitJobs("both jobs to hold the values after the restart")

	for _, job := range []string{"proto", "openmetrics"} {
		for _, name := range []string{"gateway_requests_total", histCount} {
			sel := name + `{job="` + job + `"}[5m]`
			raw, err := promQueryMatrix(prom, sel)
			if err != nil {
				t.Fatal(err)
			}
			var last model.Time
			for _, s := range raw {
				if n := len(s.Values); n > 0 && s.Values[n-1].Timestamp > last {
					last = s.Values[n-1].Timestamp
				}
			}
			resets, err := promQueryAt(prom, "resets("+sel+")", last)
			if err != nil {
				t.Fatal(err)
			}
			inc, err := promQueryAt(prom, "increase("+sel+")", last)
			if err != nil {
				t.Fatal(err)
			}
			gotResets, gotInc := map[string]float64{}, map[string]float64{}
			var sumResets, sumInc, sumWant float64
			for _, s := range resets {
				gotResets[metricSeriesKey(s.Metric)] = float64(s.Value)
				sumResets += float64(s.Value)
			}
			for _, s := range inc {
				gotInc[metricSeriesKey(s.Metric)] = float64(s.Value)
				sumInc += float64(s.Value)
			}
			wantR := map[string]float64{}
			for k, v := range total {
				wantR[k] = wantResets
				sumWant += v
			}
			t.Logf("%s, %s: resets() %v over %d series (want %v each), increase() %v of %v", job, name, sumResets, len(total), wantResets, sumInc, sumWant)
			if d := diffTotals(gotResets, wantR); d != "" {
				t.Errorf("%s, resets(%s): %s", job, name, d)
			}
			if d := diffTotals(gotInc, total); d != "" {
				t.Errorf("%s, increase(%s) at the last sample: %s", job, name, d)
			}
		}
	}
}
