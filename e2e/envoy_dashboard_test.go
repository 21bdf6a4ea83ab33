package e2e

// Envoy Gateway's "Envoy Clusters" dashboard (testdata/dashboards/
// envoy-clusters.json, unmodified; docs/gateways.md §3e) fed only by Envoy's
// OpenTelemetry stats sink pushing to the built collector over gRPC, as
// Envoy does: cumulative, and as deltas through the cumulative processor
// (report_counters_as_deltas, report_histograms_as_deltas), served under
// promstream's compatibility: envoy and scraped by a real Prometheus.
//
// The stats are the receiver's cluster-stats fixture (a Gateway API route's
// cluster, the xDS cluster, an http-10080 connection manager, the server's
// gauges) with part of its 2xx answers moved to 3xx and 4xx, so every
// response class panel has a series. Envoy pushes twice, the second flush
// carrying as much traffic again, so every rate has two samples.
//
// Every panel's PromQL, with the harness's Grafana substitution
// (dashboards_test.go: $__rate_interval 1m, the variables in "All" mode),
// must have data except the kube-state-metrics queries listed in
// envoyDashboardGaps. The request, response-class and bytes panels are
// evaluated at the scrape that first held the second push: each must be
// exactly (second push − first push) / the seconds between Prometheus's two
// samples, and the samples exactly the pushed values; the latency panel's
// three quantiles there exactly what histogram_quantile gives over the
// pushed buckets. The gauge panels must be exactly the pushed gauges.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

const (
	envoyDashboard    = "envoy-clusters.json"
	envoyRouteCluster = "httproute/default/backend/rule/0"
	envoyHCMPrefix    = "http-10080"
)

// envoyDashboardGaps are the queries (panel → refId → why) no Envoy stat can
// answer: the memory panels' second query is the envoy container's memory
// limit from kube-state-metrics, which this stack does not run.
var envoyDashboardGaps = map[string]map[string]string{
	"Allocated Memory": {"B": `kube_pod_container_resource_limits{container="envoy"}: kube-state-metrics' memory limit, not an Envoy stat`},
	"Heap Size":        {"B": `kube_pod_container_resource_limits{container="envoy"}: kube-state-metrics' memory limit, not an Envoy stat`},
}

// envoyCounterPanel is a rate panel's query over one pushed counter series.
type envoyCounterPanel struct {
	panel, ref string
	selector   string   // the one series the query sums, in Prometheus
	stat       string   // the sink's metric name
	attrs      []string // the sink's attributes, key value …
}

var envoyCounterPanels = func() []envoyCounterPanel {
	c := `envoy_cluster_name="` + envoyRouteCluster + `"`
	h := `envoy_http_conn_manager_prefix="` + envoyHCMPrefix + `"`
	cl := []string{"envoy.cluster_name", envoyRouteCluster}
	out := []envoyCounterPanel{
		{"Total requests", "A", "envoy_cluster_upstream_rq_total{" + c + "}", "cluster.upstream_rq_total", cl},
		{"Upstream Network Traffic", "A", "envoy_cluster_upstream_cx_rx_bytes_total{" + c + "}", "cluster.upstream_cx_rx_bytes_total", cl},
		{"Upstream Network Traffic", "B", "envoy_cluster_upstream_cx_tx_bytes_total{" + c + "}", "cluster.upstream_cx_tx_bytes_total", cl},
		{"Downstream Network Traffic", "A", "envoy_http_downstream_cx_rx_bytes_total{" + h + "}", "http.downstream_cx_rx_bytes_total", []string{"envoy.http_conn_manager_prefix", envoyHCMPrefix}},
		{"Downstream Network Traffic", "B", "envoy_http_downstream_cx_tx_bytes_total{" + h + "}", "http.downstream_cx_tx_bytes_total", []string{"envoy.http_conn_manager_prefix", envoyHCMPrefix}},
	}
	for _, class := range []string{"2", "3", "4", "5"} {
		out = append(out, envoyCounterPanel{"Upstream " + class + "xx Responses", "A",
			"envoy_cluster_upstream_rq_xx{" + c + `,envoy_response_code_class="` + class + `"}`,
			"cluster.upstream_rq_xx", append(append([]string(nil), cl...), "envoy.response_code_class", class)})
	}
	return out
}()

// envoyDashboardStats is the cluster-stats fixture with 12 of its 2xx
// answers made 302s and 8 made 404s, upstream and downstream alike, so the
// totals (1520 requests, the latency histograms' counts) still agree.
func envoyDashboardStats(t *testing.T) *colmetricspb.ExportMetricsServiceRequest {
	t.Helper()
	req, _ := envoyFixture(t, "cluster-stats")
	sm := req.ResourceMetrics[0].ScopeMetrics[0]
	moves := []struct {
		key, from, to string
		n             int64
	}{
		{"envoy.response_code_class", "2", "3", 12},
		{"envoy.response_code_class", "2", "4", 8},
		{"envoy.response_code", "200", "302", 12},
		{"envoy.response_code", "200", "404", 8},
	}
	var added []*metricspb.Metric
	for _, mv := range moves {
		found := 0
		for _, m := range sm.Metrics {
			s := m.GetSum()
			if s == nil {
				continue
			}
			for _, p := range s.DataPoints {
				if attrValue(p.Attributes, mv.key) != mv.from {
					continue
				}
				found++
				p.Value = &metricspb.NumberDataPoint_AsInt{AsInt: p.GetAsInt() - mv.n}
				c := proto.Clone(m).(*metricspb.Metric)
				cp := c.GetSum().DataPoints[0]
				c.GetSum().DataPoints = []*metricspb.NumberDataPoint{cp}
				cp.Value = &metricspb.NumberDataPoint_AsInt{AsInt: mv.n}
				for _, a := range cp.Attributes {
					if a.Key == mv.key {
						a.Value = &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: mv.to}}
					}
				}
				added = append(added, c)
			}
		}
		if found == 0 {
			t.Fatalf("cluster-stats fixture: no point with %s=%q", mv.key, mv.from)
		}
	}
	sm.Metrics = append(sm.Metrics, added...)
	return req
}

func attrValue(attrs []*commonpb.KeyValue, key string) string {
	for _, a := range attrs {
		if a.Key == key {
			return a.GetValue().GetStringValue()
		}
	}
	return ""
}

// envoyStat is the value of the base push's point of the named stat with
// exactly the given attributes (key value …).
func envoyStat(t *testing.T, req *colmetricspb.ExportMetricsServiceRequest, name string, attrs ...string) float64 {
	t.Helper()
	var out []float64
	for _, m := range req.ResourceMetrics[0].ScopeMetrics[0].Metrics {
		if m.Name != name {
			continue
		}
		var pts []*metricspb.NumberDataPoint
		if s := m.GetSum(); s != nil {
			pts = s.DataPoints
		} else if g := m.GetGauge(); g != nil {
			pts = g.DataPoints
		}
	points:
		for _, p := range pts {
			if len(p.Attributes)*2 != len(attrs) {
				continue
			}
			for i := 0; i < len(attrs); i += 2 {
				if attrValue(p.Attributes, attrs[i]) != attrs[i+1] {
					continue points
				}
			}
			if _, ok := p.Value.(*metricspb.NumberDataPoint_AsDouble); ok {
				out = append(out, p.GetAsDouble())
			} else {
				out = append(out, float64(p.GetAsInt()))
			}
		}
	}
	if len(out) != 1 {
		t.Fatalf("stat %s%v: %d points in the push, want 1", name, attrs, len(out))
	}
	return out[0]
}

// envoyFlush is flush k (0, 1) of a sink whose every flush carries the base
// push's traffic: cumulative, counters and histograms are (k+1) × base since
// start; as deltas, each flush is base over (from, at]. Gauges are whole, as
// the sink sends them, the uptime k seconds on.
func envoyFlush(base *colmetricspb.ExportMetricsServiceRequest, k int, delta bool, start, from, at uint64) *colmetricspb.ExportMetricsServiceRequest {
	r := proto.Clone(base).(*colmetricspb.ExportMetricsServiceRequest)
	temporality := metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE
	mult, begin := uint64(k+1), start
	if delta {
		temporality = metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA
		mult, begin = 1, from
	}
	for _, m := range r.ResourceMetrics[0].ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case *metricspb.Metric_Sum:
			d.Sum.AggregationTemporality = temporality
			for _, p := range d.Sum.DataPoints {
				p.Value = &metricspb.NumberDataPoint_AsInt{AsInt: p.GetAsInt() * int64(mult)}
				p.StartTimeUnixNano, p.TimeUnixNano = begin, at
			}
		case *metricspb.Metric_Histogram:
			d.Histogram.AggregationTemporality = temporality
			for _, p := range d.Histogram.DataPoints {
				for i := range p.BucketCounts {
					p.BucketCounts[i] *= mult
				}
				p.Count *= mult
				s := p.GetSum() * float64(mult)
				p.Sum = &s
				p.StartTimeUnixNano, p.TimeUnixNano = begin, at
			}
		case *metricspb.Metric_Gauge:
			for _, p := range d.Gauge.DataPoints {
				if m.Name == "server.uptime" {
					p.Value = &metricspb.NumberDataPoint_AsInt{AsInt: p.GetAsInt() + int64(k)}
				}
				p.TimeUnixNano = at
			}
		}
	}
	return r
}

// envoyQuantile is what Prometheus's histogram_quantile gives over the
// named histogram stat's buckets in the base push (its rate between two
// flushes that each carry the base push is those buckets over dt, and the
// quantile does not depend on the scale): Prometheus's bucketQuantile, the
// linear interpolation inside the bucket holding rank q·count, the last
// finite bound for the +Inf bucket.
func envoyQuantile(t *testing.T, req *colmetricspb.ExportMetricsServiceRequest, q float64, name string, attrs ...string) float64 {
	t.Helper()
	var p *metricspb.HistogramDataPoint
	for _, m := range req.ResourceMetrics[0].ScopeMetrics[0].Metrics {
		if h := m.GetHistogram(); m.Name == name && h != nil {
			for _, dp := range h.DataPoints {
				match := len(dp.Attributes)*2 == len(attrs)
				for i := 0; match && i < len(attrs); i += 2 {
					match = attrValue(dp.Attributes, attrs[i]) == attrs[i+1]
				}
				if match {
					p = dp
				}
			}
		}
	}
	if p == nil || len(p.BucketCounts) != len(p.ExplicitBounds)+1 {
		t.Fatalf("histogram %s%v: not one point with bounds in the push", name, attrs)
	}
	cum := make([]float64, len(p.BucketCounts))
	var n float64
	for i, c := range p.BucketCounts {
		n += float64(c)
		cum[i] = n
	}
	rank := q * n
	b := sort.Search(len(cum)-1, func(i int) bool { return cum[i] >= rank })
	if b == len(cum)-1 {
		return p.ExplicitBounds[len(p.ExplicitBounds)-1]
	}
	start, count := 0.0, cum[b]
	if b > 0 {
		start = p.ExplicitBounds[b-1]
		count -= cum[b-1]
		rank -= cum[b-1]
	}
	return start + (p.ExplicitBounds[b]-start)*(rank/count)
}

// promAt runs an instant query at a stored sample's timestamp.
func promAt(p *promServer, q string, ts model.Time) ([]float64, error) {
	at := fmt.Sprintf("%d.%03d", int64(ts)/1000, int64(ts)%1000)
	status, body, err := httpGet("http://" + p.addr + "/api/v1/query?time=" + at + "&query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	var resp promQueryResponse
	if err := json.Unmarshal(body, &resp); err != nil || resp.Status != "success" {
		return nil, fmt.Errorf("%s at %s: status %d: %s", q, at, status, truncate(body))
	}
	out := make([]float64, len(resp.Data.Result))
	for i, s := range resp.Data.Result {
		out[i] = float64(s.Value)
	}
	return out, nil
}

// envoyPanelExpr is a panel query as Grafana sends it ("All" mode).
func envoyPanelExpr(t *testing.T, panels []dashPanel, title, ref string) string {
	t.Helper()
	for _, p := range panels {
		if p.title != title {
			continue
		}
		for _, tg := range p.targets {
			if tg.RefID == ref {
				q, err := substitute(tg.Expr, nil)
				if err != nil {
					t.Fatal(err)
				}
				return q
			}
		}
	}
	t.Fatalf("%s has no query %s in panel %q", envoyDashboard, ref, title)
	return ""
}

func TestEnvoyDashboard(t *testing.T) {
	title, panels, _ := loadDashboard(t, envoyDashboard)
	if len(panels) != 20 {
		t.Fatalf("%s: %d panels with queries, want 20", envoyDashboard, len(panels))
	}
	for name := range envoyDashboardGaps {
		envoyPanelExpr(t, panels, name, "B")
	}
	base := envoyDashboardStats(t)
	stat := func(name string, attrs ...string) float64 { return envoyStat(t, base, name, attrs...) }
	cl := []string{"envoy.cluster_name", envoyRouteCluster}
	// The gauge panels, exactly the second push's gauges.
	gauges := []struct {
		panel, ref string
		want       float64
	}{
		{"Live servers", "A", stat("server.live")},
		{"Avg uptime per node", "A", stat("server.uptime") + 1},
		{"Allocated Memory", "A", stat("server.memory_allocated")},
		{"Heap Size", "A", stat("server.memory_heap_size")},
		{"Unhealthy Clusters", "A", stat("cluster.membership_total", cl...) - stat("cluster.membership_healthy", cl...)},
		{"Cluster State", "A", 0}, // one host of three unhealthy: not "== bool 0"
		{"Total active connections", "A", stat("cluster.upstream_cx_active", cl...)},
		{"Outlier ejected", "C", stat("cluster.outlier_detection.ejections_active", cl...)},
		{"Degraded", "D", stat("cluster.membership_degraded", cl...)},
		{"Excluded", "E", stat("cluster.membership_excluded", cl...)},
	}

	for _, variant := range []string{"cumulative", "delta"} {
		t.Run(variant, func(t *testing.T) {
			col := startCollectorWith(t, strings.Replace(collectorConfig, "    without_scope_info: true\n", "    compatibility: envoy\n", 1), 4)
			conn, err := grpc.NewClient(col.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			client := colmetricspb.NewMetricsServiceClient(conn)

			var prom *promServer
			start := uint64(time.Now().Add(-time.Hour).UnixNano())
			from := start
			for k := 0; k < 2; k++ {
				at := uint64(time.Now().UnixNano())
				resp, err := client.Export(context.Background(), envoyFlush(base, k, variant == "delta", start, from, at))
				if err != nil {
					t.Fatalf("export %d: %v", k+1, err)
				}
				if ps := resp.GetPartialSuccess(); ps.GetRejectedDataPoints() != 0 {
					t.Fatalf("export %d: %d points rejected: %s", k+1, ps.GetRejectedDataPoints(), ps.GetErrorMessage())
				}
				from = at
				// The first flush is stored before Prometheus starts
				// (Export returns once the pipeline has consumed it: the
				// cumulative processor emits per_batch), so every series'
				// first sample comes from the same scrape: a scrape reads
				// the exporter page by page and could otherwise catch a
				// flush half stored.
				if k == 0 {
					prom = startPrometheusWith(t, fmt.Sprintf(plainScrapeConfig, col.promAddr))
				}
				// Every checked series scraped at this flush's values
				// before the next flush: each rate then has both samples.
				eventually(t, convergeTimeout, fmt.Sprintf("flush %d in Prometheus", k+1), func() (bool, string) {
					var diffs []string
					for _, c := range envoyCounterPanels {
						want := float64(k+1) * stat(c.stat, c.attrs...)
						v, err := promValues(prom, c.selector)
						if err != nil {
							return false, err.Error()
						}
						if len(v) != 1 || v[0] != want {
							diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", c.selector, v, want))
						}
					}
					return len(diffs) == 0, strings.Join(diffs, "\n")
				})
			}

			// Every panel: data in each query but the listed gaps.
			rs := evalPanels(prom, panels, nil)
			t.Logf("\n%s", panelTable(title, "Envoy's stats sink ("+variant+", gRPC)", "", rs, nil, nil))
			for _, r := range rs {
				gaps := envoyDashboardGaps[r.panel.name()]
				var empty []string
				for _, m := range r.missing {
					ref, _, _ := strings.Cut(m, ":")
					empty = append(empty, ref)
					if _, ok := gaps[ref]; !ok {
						t.Errorf("panel %q (row %q) has no data: %s", r.panel.name(), r.panel.row, m)
					}
				}
				for ref, why := range gaps {
					if !contains(empty, ref) {
						t.Errorf("panel %q query %s has data, but is listed as empty (%s): update envoyDashboardGaps", r.panel.name(), ref, why)
					} else {
						t.Logf("as expected, panel %q query %s stays empty: %s", r.panel.name(), ref, why)
					}
				}
			}

			// The rate panels at the scrape that first held the second
			// flush: (second − first) / the seconds between the samples.
			for _, c := range envoyCounterPanels {
				v1 := stat(c.stat, c.attrs...)
				v2 := 2 * v1
				m, err := promQueryMatrix(prom, c.selector+"[5m]")
				if err != nil || len(m) != 1 {
					t.Fatalf("%s[5m]: %v (%d series)", c.selector, err, len(m))
				}
				ss := m[0].Values
				// Exactly the pushed values, the first flush's then the
				// second's; i is the first sample of the second.
				i := sort.Search(len(ss), func(i int) bool { return float64(ss[i].Value) == v2 })
				ok := i > 0 && i < len(ss)
				for j, s := range ss {
					want := v2
					if j < i {
						want = v1
					}
					ok = ok && float64(s.Value) == want
				}
				if !ok {
					t.Fatalf("%s: samples %v, want %v then %v", c.selector, ss, v1, v2)
				}
				dt := float64(ss[i].Timestamp-ss[i-1].Timestamp) / 1000
				q := envoyPanelExpr(t, panels, c.panel, c.ref)
				got, err := promAt(prom, q, ss[i].Timestamp)
				want := (v2 - v1) / dt
				if err != nil || len(got) != 1 || math.Abs(got[0]-want) > 1e-9*want {
					t.Errorf("panel %q %s at %v: %v (%v), want one series at (%v − %v) / %vs = %v", c.panel, c.ref, ss[i].Timestamp, got, err, v2, v1, dt, want)
					continue
				}
				t.Logf("panel %q %s: %v/s = (%v − %v) / %vs, exact", c.panel, c.ref, got[0], v2, v1, dt)
			}
			// The latency panel at the first scrape that holds the second
			// flush in every bucket (rate over the panel's 1m then takes
			// the same first and last sample times for every bucket, so
			// the quantile is the pushed buckets' one), per quantile.
			latency := `{__name__=~"envoy_cluster_upstream_rq_time_(bucket|count)",envoy_cluster_name="` + envoyRouteCluster + `"}`
			m, err := promQueryMatrix(prom, latency+"[5m]")
			if err != nil || len(m) < 2 {
				t.Fatalf("%s[5m]: %v (%d series)", latency, err, len(m))
			}
			var at model.Time
			for _, series := range m {
				vs := series.Values
				last := vs[len(vs)-1].Value
				for _, s := range vs {
					if s.Value == last {
						at = max(at, s.Timestamp)
						break
					}
				}
			}
			var quantiles []string
			for _, lq := range []struct {
				ref string
				q   float64
			}{{"A", 0.99}, {"B", 0.9}, {"C", 0.5}} {
				want := envoyQuantile(t, base, lq.q, "cluster.upstream_rq_time", cl...)
				got, err := promAt(prom, envoyPanelExpr(t, panels, "Upstream Latency", lq.ref), at)
				if err != nil || len(got) != 1 || math.Abs(got[0]-want) > 1e-9*want {
					t.Errorf("panel \"Upstream Latency\" %s (%v) at %v: %v (%v), want %v ms from the pushed buckets", lq.ref, lq.q, at, got, err, want)
					continue
				}
				quantiles = append(quantiles, fmt.Sprintf("p%v %v ms", lq.q*100, got[0]))
			}
			if len(quantiles) == 3 {
				t.Logf("panel \"Upstream Latency\": %s, exactly the pushed buckets' quantiles", strings.Join(quantiles, ", "))
			}
			for _, g := range gauges {
				q := envoyPanelExpr(t, panels, g.panel, g.ref)
				got, err := promValues(prom, q)
				if err != nil || len(got) != 1 || got[0] != g.want {
					t.Errorf("panel %q %s: %v (%v), want %v", g.panel, g.ref, got, err, g.want)
				}
			}
			if !t.Failed() {
				t.Logf("%d gauge panel queries exactly the pushed gauges (uptime %v s, one of %v hosts unhealthy, %v ejected)",
					len(gauges), gauges[1].want, stat("cluster.membership_total", cl...), gauges[7].want)
			}
		})
	}
}
