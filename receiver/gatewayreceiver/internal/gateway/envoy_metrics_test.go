package gateway

import (
	"os"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// mapAll maps every ResourceMetrics of md with mapFn.
func mapAll(md pmetric.Metrics, mapFn func(pmetric.Metrics, pmetric.ResourceMetrics, *MetricsOptions, *MetricsStats), o *MetricsOptions) (pmetric.Metrics, MetricsStats) {
	out := pmetric.NewMetrics()
	var st MetricsStats
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		mapFn(out, rms.At(i), o, &st)
	}
	return out, st
}

// The fixtures in testdata/envoy are one push of Envoy's stats sink
// (*.push.json, as the sink writes it with its defaults: tag-extracted
// names, tags as string attributes in Envoy's tag order) and the
// exposition Envoy's /stats/prometheus writes for the same stats (*.prom,
// by the formatter's rules, docs/gateways.md §3d: families grouped by type
// and sorted, series sorted, `{}` for no tags, le and _sum in %.32g).
//
// The stat sets pin what Envoy's own formatter tests pin
// (test/server/admin/prometheus_stats_test.cc: OutputWithAllMetricTypes,
// OutputSortedByMetricName, CustomNamespace, SanitizeMetricName*,
// FormattedTags, HistogramWithNonDefaultBuckets), on stats a Gateway API
// deployment has: every family the Envoy Gateway "Envoy Clusters"
// dashboard queries is in cluster-stats.
var envoyFixtures = []struct {
	name string
	opts MetricsOptions
	// points by outcome that the push must give (the rest mapped).
	invalid int
}{
	// envoy_cluster_upstream_rq (per response code) beside
	// envoy_cluster_upstream_rq_total: two counters, both served under
	// compatibility: envoy (docs/gateways.md §3d).
	{name: "cluster-stats", opts: MetricsOptions{Origin: "10.1.2.3:50000"}},
	// The sink's prefix (`edge`), a registered custom namespace (promtest),
	// a name Envoy refuses in it, sanitized names and tag names, escaped
	// values, an empty value, custom buckets, per-endpoint stats.
	{name: "names", opts: MetricsOptions{Origin: "10.0.0.9:41000", EnvoyPrefix: "edge", EnvoyNamespaces: []string{"promtest"}}, invalid: 1},
}

// TestEnvoyStatsSinkMatchesStatsPrometheus maps each push, runs it through
// the cumulative processor and the promstream exporter, and diffs the
// scrape line by line against what /stats/prometheus writes for the same
// stats: same families, TYPE, series, label order, values. Lines are
// compared as Prometheus reads them (value and le as numbers; `{}` the same
// as no braces): Envoy prints %.32g (`3600000`,
// `40123.456789000000397884286940098`) where the exporter writes the
// shortest form (`3.6e+06`, `40123.456789`), the same float64.
func TestEnvoyStatsSinkMatchesStatsPrometheus(t *testing.T) {
	for _, tc := range envoyFixtures {
		t.Run(tc.name, func(t *testing.T) {
			md := readMetricsJSON(t, "testdata/envoy/"+tc.name+".push.json")
			want, err := os.ReadFile("testdata/envoy/" + tc.name + ".prom")
			if err != nil {
				t.Fatal(err)
			}
			in := md.DataPointCount()
			out, st := mapAll(md, MapEnvoyMetrics, &tc.opts)
			if st.Points[PointInvalid] != tc.invalid || st.Points[PointMapped] != in-tc.invalid {
				t.Fatalf("outcomes %v, want %d mapped and %d invalid of %d (err %v)", st.Points, in-tc.invalid, tc.invalid, in, st.Err)
			}
			p := newPromPipeline(t, "envoy")
			p.push(t, out)
			got := p.scrape(t)
			same, total := diffExpositions(t, got, string(want), expoDiff{dropGot: []string{"job", "instance"},
				extraGot: []string{"target_info"}})
			t.Logf("%d of %d lines byte for byte as Envoy writes them; the others differ in number spelling or `{}` only", same, total)
			if t.Failed() {
				t.Logf("scrape:\n%s", got)
			}
		})
	}
}

// deltaPushes splits a cumulative push into two delta pushes whose sums are
// it (report_counters_as_deltas and report_histograms_as_deltas): the first
// a third of every counter and bucket, the second the rest, one flush
// interval later; gauges are sent whole in both, as the sink sends them.
func deltaPushes(md pmetric.Metrics, mid pcommon.Timestamp) (pmetric.Metrics, pmetric.Metrics) {
	a, b := pmetric.NewMetrics(), pmetric.NewMetrics()
	md.CopyTo(a)
	md.CopyTo(b)
	for _, part := range []struct {
		md    pmetric.Metrics
		first bool
	}{{a, true}, {b, false}} {
		ms := part.md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
		for i := 0; i < ms.Len(); i++ {
			m := ms.At(i)
			third := func(v uint64) uint64 {
				if part.first {
					return v / 3
				}
				return v - v/3
			}
			switch m.Type() {
			case pmetric.MetricTypeSum:
				m.Sum().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
				dps := m.Sum().DataPoints()
				for j := 0; j < dps.Len(); j++ {
					p := dps.At(j)
					p.SetIntValue(int64(third(uint64(p.IntValue()))))
					window(p.SetStartTimestamp, p.SetTimestamp, p.StartTimestamp(), p.Timestamp(), mid, part.first)
				}
			case pmetric.MetricTypeHistogram:
				m.Histogram().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
				dps := m.Histogram().DataPoints()
				for j := 0; j < dps.Len(); j++ {
					p := dps.At(j)
					var n uint64
					for k := 0; k < p.BucketCounts().Len(); k++ {
						c := third(p.BucketCounts().At(k))
						p.BucketCounts().SetAt(k, c)
						n += c
					}
					p.SetCount(n)
					if part.first {
						p.SetSum(p.Sum() / 4)
					} else {
						p.SetSum(p.Sum() - p.Sum()/4)
					}
					window(p.SetStartTimestamp, p.SetTimestamp, p.StartTimestamp(), p.Timestamp(), mid, part.first)
				}
			}
		}
	}
	return a, b
}

// window sets a delta point's window: [start, mid] first, [mid, end] second.
func window(setStart, setEnd func(pcommon.Timestamp), start, end, mid pcommon.Timestamp, first bool) {
	if first {
		setStart(start)
		setEnd(mid)
		return
	}
	setStart(mid)
	setEnd(end)
}

// TestEnvoyDeltaPushesMatchCumulative: the same stats reported as deltas in
// two flushes come out, through the cumulative processor, as the one
// cumulative exposition (counters and buckets exactly; _sum as the sum of
// the two deltas' sums, here exact in binary).
func TestEnvoyDeltaPushesMatchCumulative(t *testing.T) {
	md := readMetricsJSON(t, "testdata/envoy/cluster-stats.push.json")
	want, err := os.ReadFile("testdata/envoy/cluster-stats.prom")
	if err != nil {
		t.Fatal(err)
	}
	first, second := deltaPushes(md, 1767223800000000000)
	p := newPromPipeline(t, "envoy")
	for _, push := range []pmetric.Metrics{first, second} {
		out, st := mapAll(push, MapEnvoyMetrics, &MetricsOptions{Origin: "10.1.2.3:50000"})
		if st.Dropped() != 0 {
			t.Fatalf("dropped %v: %v", st.Points, st.Err)
		}
		if temp := out.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().AggregationTemporality(); temp != pmetric.AggregationTemporalityDelta {
			t.Fatalf("temporality %v, want delta kept as sent", temp)
		}
		p.push(t, out)
	}
	diffExpositions(t, p.scrape(t), string(want), expoDiff{dropGot: []string{"job", "instance"},
		extraGot: []string{"target_info"}})
}

// envoyClustersDashboard lists the metric names the queries of Envoy
// Gateway's "Envoy Clusters" add-on dashboard read
// (charts/gateway-addons-helm/dashboards/envoy-clusters.json at d32f2829,
// docs/gateways.md §3e), leaving out kube-state-metrics' one.
var envoyClustersDashboard = []string{
	"envoy_server_live", "envoy_server_uptime", "envoy_server_memory_allocated", "envoy_server_memory_heap_size",
	"envoy_cluster_membership_total", "envoy_cluster_membership_healthy", "envoy_cluster_membership_degraded",
	"envoy_cluster_membership_excluded", "envoy_cluster_upstream_cx_active", "envoy_cluster_upstream_rq_total",
	"envoy_cluster_upstream_cx_rx_bytes_total", "envoy_cluster_upstream_cx_tx_bytes_total",
	"envoy_http_downstream_cx_rx_bytes_total", "envoy_http_downstream_cx_tx_bytes_total",
	"envoy_cluster_upstream_rq_time_bucket", "envoy_cluster_upstream_rq_xx", "envoy_cluster_outlier_detection_ejections_active",
}

// TestEnvoyDashboardFamiliesFromSink: every series the dashboard reads is
// served from the sink's push, with the labels it filters on.
func TestEnvoyDashboardFamiliesFromSink(t *testing.T) {
	md := readMetricsJSON(t, "testdata/envoy/cluster-stats.push.json")
	out, _ := mapAll(md, MapEnvoyMetrics, nil)
	p := newPromPipeline(t, "envoy")
	p.push(t, out)
	_, fams := parseExposition(t, p.scrape(t), "job", "instance")
	has := func(sample string, labels ...string) bool {
		for _, f := range fams {
			for _, l := range f.lines {
				if l.name != sample {
					continue
				}
				n := 0
				for _, kv := range l.labels {
					if slices.Contains(labels, kv[0]) {
						n++
					}
				}
				if n == len(labels) {
					return true
				}
			}
		}
		return false
	}
	for _, name := range envoyClustersDashboard {
		if !has(name) {
			t.Errorf("no %s series", name)
		}
	}
	if !has("envoy_cluster_upstream_rq_xx", "envoy_response_code_class", "envoy_cluster_name") {
		t.Error("no envoy_cluster_upstream_rq_xx series with envoy_response_code_class and envoy_cluster_name")
	}
	if !has("envoy_http_downstream_cx_rx_bytes_total", "envoy_http_conn_manager_prefix") {
		t.Error("no envoy_http_downstream_cx_rx_bytes_total series with envoy_http_conn_manager_prefix")
	}
}

// envoyPush builds a push of one metric per spec; attrs are tag pairs.
type envoyStat struct {
	name  string
	typ   pmetric.MetricType
	delta bool
	tags  []string
	value int64
	// histogram
	bounds []float64
	counts []uint64
	sum    float64
}

func envoyPush(stats ...envoyStat) pmetric.ResourceMetrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	for _, s := range stats {
		m := ms.AppendEmpty()
		m.SetName(s.name)
		var attrs pcommon.Map
		switch s.typ {
		case pmetric.MetricTypeSum:
			sum := m.SetEmptySum()
			sum.SetIsMonotonic(true)
			sum.SetAggregationTemporality(temporality(s.delta))
			p := sum.DataPoints().AppendEmpty()
			p.SetIntValue(s.value)
			p.SetTimestamp(2)
			attrs = p.Attributes()
		case pmetric.MetricTypeGauge:
			p := m.SetEmptyGauge().DataPoints().AppendEmpty()
			p.SetIntValue(s.value)
			p.SetTimestamp(2)
			attrs = p.Attributes()
		case pmetric.MetricTypeHistogram:
			h := m.SetEmptyHistogram()
			h.SetAggregationTemporality(temporality(s.delta))
			p := h.DataPoints().AppendEmpty()
			p.ExplicitBounds().FromRaw(s.bounds)
			p.BucketCounts().FromRaw(s.counts)
			var n uint64
			for _, c := range s.counts {
				n += c
			}
			p.SetCount(n)
			p.SetSum(s.sum)
			p.SetTimestamp(2)
			attrs = p.Attributes()
		}
		for i := 0; i+1 < len(s.tags); i += 2 {
			attrs.PutStr(s.tags[i], s.tags[i+1])
		}
	}
	return rm
}

func counter(name string, v int64, tags ...string) envoyStat {
	return envoyStat{name: name, typ: pmetric.MetricTypeSum, value: v, tags: tags}
}

func gaugeStat(name string, v int64, tags ...string) envoyStat {
	return envoyStat{name: name, typ: pmetric.MetricTypeGauge, value: v, tags: tags}
}

// series lists the output points as "name{k=v,...} value" in output order.
func seriesOf(md pmetric.Metrics) []string {
	var out []string
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		ms := rms.At(i).ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			m := ms.At(j)
			add := func(attrs pcommon.Map, v string) {
				var b strings.Builder
				b.WriteString(m.Name() + "{")
				first := true
				for k, val := range attrs.All() {
					if !first {
						b.WriteByte(',')
					}
					first = false
					b.WriteString(k + "=" + val.AsString())
				}
				b.WriteString("} " + v)
				out = append(out, b.String())
			}
			switch m.Type() {
			case pmetric.MetricTypeSum:
				for k := 0; k < m.Sum().DataPoints().Len(); k++ {
					p := m.Sum().DataPoints().At(k)
					add(p.Attributes(), numberText(p))
				}
			case pmetric.MetricTypeGauge:
				for k := 0; k < m.Gauge().DataPoints().Len(); k++ {
					p := m.Gauge().DataPoints().At(k)
					add(p.Attributes(), numberText(p))
				}
			case pmetric.MetricTypeHistogram:
				for k := 0; k < m.Histogram().DataPoints().Len(); k++ {
					p := m.Histogram().DataPoints().At(k)
					v := "count=" + intString(int64(p.Count())) + " bounds=" + floatsText(p.ExplicitBounds().AsRaw()) + " counts=" + uintsText(p.BucketCounts().AsRaw())
					if p.HasSum() {
						v += " sum=" + floatText(p.Sum())
					}
					add(p.Attributes(), v)
				}
			}
		}
	}
	return out
}

func numberText(p pmetric.NumberDataPoint) string {
	if p.ValueType() == pmetric.NumberDataPointValueTypeDouble {
		return floatText(p.DoubleValue())
	}
	return intString(p.IntValue())
}

func floatText(f float64) string { return pcommon.NewValueDouble(f).AsString() }

func floatsText(fs []float64) string {
	var s []string
	for _, f := range fs {
		s = append(s, floatText(f))
	}
	return "[" + strings.Join(s, " ") + "]"
}

func uintsText(us []uint64) string {
	var s []string
	for _, u := range us {
		s = append(s, intString(int64(u)))
	}
	return "[" + strings.Join(s, " ") + "]"
}

func TestMapEnvoyMetrics(t *testing.T) {
	long := strings.Repeat("x", DefaultMaxPushLabelBytes+1)
	for _, tc := range []struct {
		name  string
		opts  MetricsOptions
		push  pmetric.ResourceMetrics
		want  []string
		count map[PointOutcome]int
		err   string
	}{
		{name: "names and tag names sanitized, tag order kept",
			push: envoyPush(counter("cluster.upstream_rq", 3, "envoy.response_code", "200", "envoy.cluster_name", "a")),
			want: []string{"envoy_cluster_upstream_rq{envoy_response_code=200,envoy_cluster_name=a} 3"}},
		{name: "a counter keeps its name: no _total added",
			push: envoyPush(counter("cluster.upstream_cx_connect_fail", 1)),
			want: []string{"envoy_cluster_upstream_cx_connect_fail{} 1"}},
		{name: "every byte outside [a-zA-Z0-9_] becomes _, digits first allowed after envoy_",
			push: envoyPush(gaugeStat("3.artists.play-violin@019street", 1), gaugeStat("x.é", 2)),
			want: []string{"envoy_3_artists_play_violin_019street{} 1", "envoy_x___{} 2"}},
		{name: "stats of one name in separate metrics make one family",
			push: envoyPush(counter("cluster.upstream_rq_total", 1, "envoy.cluster_name", "a"), counter("cluster.upstream_rq_total", 2, "envoy.cluster_name", "b")),
			want: []string{"envoy_cluster_upstream_rq_total{envoy_cluster_name=a} 1", "envoy_cluster_upstream_rq_total{envoy_cluster_name=b} 2"}},
		{name: "without tags as attributes, stats of one name add up (the sink's own aggregation)",
			push: envoyPush(counter("cluster.upstream_rq_total", 1), counter("cluster.upstream_rq_total", 2), gaugeStat("cluster.membership_total", 3), gaugeStat("cluster.membership_total", 4)),
			want: []string{"envoy_cluster_upstream_rq_total{} 3", "envoy_cluster_membership_total{} 7"}},
		{name: "the sink's prefix is stripped",
			opts: MetricsOptions{EnvoyPrefix: "edge"},
			push: envoyPush(counter("edge.cluster.upstream_rq_total", 1), counter("edgecluster.x", 1)),
			want: []string{"envoy_cluster_upstream_rq_total{} 1", "envoy_edgecluster_x{} 1"}},
		{name: "a custom namespace goes without envoy_, its digit-first names are refused",
			opts:  MetricsOptions{EnvoyNamespaces: []string{"promtest"}},
			push:  envoyPush(counter("promtest.myapp.foo", 1), gaugeStat("promtest.1234.bar", 1), gaugeStat("promtest", 1)),
			want:  []string{"myapp_foo{} 1", "envoy_promtest{} 1"},
			count: map[PointOutcome]int{PointInvalid: 1},
			err:   `metric "promtest.1234.bar": a custom-namespace name Envoy does not expose (empty, or a digit first)`},
		{name: "histogram copied: Envoy's buckets and overflow",
			push: envoyPush(envoyStat{name: "cluster.upstream_rq_time", typ: pmetric.MetricTypeHistogram, bounds: []float64{0.5, 1, 5}, counts: []uint64{0, 2, 3, 1}, sum: 12.5, tags: []string{"envoy.cluster_name", "a"}}),
			want: []string{"envoy_cluster_upstream_rq_time{envoy_cluster_name=a} count=6 bounds=[0.5 1 5] counts=[0 2 3 1] sum=12.5"}},
		{name: "duplicate histograms add up bucket by bucket",
			push: envoyPush(envoyStat{name: "h", typ: pmetric.MetricTypeHistogram, bounds: []float64{1}, counts: []uint64{1, 2}, sum: 4},
				envoyStat{name: "h", typ: pmetric.MetricTypeHistogram, bounds: []float64{1}, counts: []uint64{3, 4}, sum: 10}),
			want: []string{"envoy_h{} count=10 bounds=[1] counts=[4 6] sum=14"}},
		{name: "duplicate histograms with other buckets: the second is a conflict",
			push: envoyPush(envoyStat{name: "h", typ: pmetric.MetricTypeHistogram, bounds: []float64{1}, counts: []uint64{1, 2}},
				envoyStat{name: "h", typ: pmetric.MetricTypeHistogram, bounds: []float64{2}, counts: []uint64{3, 4}}),
			want:  []string{"envoy_h{} count=3 bounds=[1] counts=[1 2] sum=0"},
			count: map[PointOutcome]int{PointConflict: 1},
			err:   `metric "h": points of one series with different buckets`},
		{name: "one name as a counter and a gauge: the later type is a conflict",
			push:  envoyPush(counter("a.b", 1), gaugeStat("a_b", 2)),
			want:  []string{"envoy_a_b{} 1"},
			count: map[PointOutcome]int{PointConflict: 1},
			err:   `metric "a_b": family envoy_a_b already has points of another type or temporality`},
		{name: "buckets that do not add up to the count",
			push: func() pmetric.ResourceMetrics {
				rm := envoyPush(envoyStat{name: "h", typ: pmetric.MetricTypeHistogram, bounds: []float64{1}, counts: []uint64{1, 2}})
				rm.ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints().At(0).SetCount(7)
				return rm
			}(),
			count: map[PointOutcome]int{PointInvalid: 1},
			err:   `metric "h": bucket_counts add up to 3, count is 7`},
		{name: "bucket counts that do not match the bounds",
			push:  envoyPush(envoyStat{name: "h", typ: pmetric.MetricTypeHistogram, bounds: []float64{1, 2}, counts: []uint64{1, 2}}),
			count: map[PointOutcome]int{PointInvalid: 1},
			err:   `metric "h": bucket_counts has 2 entries for 2 bounds`},
		{name: "a label value too long drops the point, not the rest",
			push:  envoyPush(counter("a", 1, "k", long), counter("b", 2, "k", "v")),
			want:  []string{"envoy_b{k=v} 2"},
			count: map[PointOutcome]int{PointLabelTooLong: 1},
			err:   `metric "a": attribute k longer than 1024 bytes`},
		{name: "delta temporality kept as sent",
			push: envoyPush(envoyStat{name: "c", typ: pmetric.MetricTypeSum, delta: true, value: 4}),
			want: []string{"envoy_c{} 4"}},
		{name: "points beyond the limit are counted, the first kept",
			opts:  MetricsOptions{MaxPoints: 2},
			push:  envoyPush(counter("a", 1), counter("a", 1), counter("b", 1), counter("c", 1)),
			want:  []string{"envoy_a{} 2", "envoy_b{} 1"},
			count: map[PointOutcome]int{PointOverLimit: 1}},
		{name: "a summary is not Envoy's",
			push: func() pmetric.ResourceMetrics {
				rm := envoyPush()
				m := rm.ScopeMetrics().At(0).Metrics().AppendEmpty()
				m.SetName("s")
				m.SetEmptySummary().DataPoints().AppendEmpty()
				return rm
			}(),
			count: map[PointOutcome]int{PointInvalid: 1},
			err:   `metric "s": a summary: Envoy's sink sends sums, gauges and histograms`},
		{name: "a map attribute is no label",
			push: func() pmetric.ResourceMetrics {
				rm := envoyPush(counter("a", 1))
				rm.ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0).Attributes().PutEmptyMap("m")
				return rm
			}(),
			count: map[PointOutcome]int{PointTooManyLabels: 1},
			err:   `metric "a": attribute m is a Map`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := pmetric.NewMetrics()
			var st MetricsStats
			MapEnvoyMetrics(out, tc.push, &tc.opts, &st)
			got := seriesOf(out)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("series\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			for o := range pointOutcomes {
				if o == PointMapped {
					continue
				}
				if st.Points[o] != tc.count[PointOutcome(o)] {
					t.Errorf("%s: %d points, want %d", PointOutcome(o), st.Points[o], tc.count[PointOutcome(o)])
				}
			}
			if mapped := tc.push.ScopeMetrics().At(0).Metrics().Len() - st.Dropped(); tc.push.ScopeMetrics().At(0).Metrics().Len() > 0 && st.Points[PointMapped] != mapped {
				t.Errorf("mapped %d, want %d", st.Points[PointMapped], mapped)
			}
			switch {
			case tc.err == "" && st.Err != nil:
				t.Errorf("err %v", st.Err)
			case tc.err != "" && (st.Err == nil || st.Err.Error() != tc.err):
				t.Errorf("err %v, want %s", st.Err, tc.err)
			}
			if len(tc.want) == 0 && out.ResourceMetrics().Len() != 0 {
				t.Errorf("an all-dropped push left %d resources", out.ResourceMetrics().Len())
			}
		})
	}
}

// TestEnvoyResourceIdentity: two Envoys without resource detectors send
// the same stat with an empty resource; the transport's peer address keeps
// them two series (Prometheus's instance label), and service.name "envoy"
// gives them a job.
func TestEnvoyResourceIdentity(t *testing.T) {
	out := pmetric.NewMetrics()
	var st MetricsStats
	MapEnvoyMetrics(out, envoyPush(counter("server.live", 1)), &MetricsOptions{Origin: "10.0.0.1:4000"}, &st)
	MapEnvoyMetrics(out, envoyPush(counter("server.live", 1)), &MetricsOptions{Origin: "10.0.0.2:4000"}, &st)
	p := newPromPipeline(t, "envoy")
	p.push(t, out)
	got := p.scrape(t)
	for _, want := range []string{`envoy_server_live{job="envoy",instance="10.0.0.1:4000"} 1`, `envoy_server_live{job="envoy",instance="10.0.0.2:4000"} 1`} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("no line %s in\n%s", want, got)
		}
	}
	// A resource that names its instance keeps it.
	rm := envoyPush(counter("server.live", 1))
	rm.Resource().Attributes().PutStr("service.instance.id", "pod-a")
	out = pmetric.NewMetrics()
	MapEnvoyMetrics(out, rm, &MetricsOptions{Origin: "10.0.0.1:4000"}, &st)
	if v, _ := out.ResourceMetrics().At(0).Resource().Attributes().Get("service.instance.id"); v.Str() != "pod-a" {
		t.Errorf("service.instance.id %q, want the resource's pod-a", v.Str())
	}
}

func TestDetectEnvoyMetrics(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rm    pmetric.ResourceMetrics
		kind  Kind
		envoy bool
	}{
		{"envoy stat names, empty scope", envoyPush(counter("cluster.upstream_rq_total", 1)), KindEnvoy, true},
		{"behind the sink's prefix, by its tags", envoyPush(counter("edge.http.downstream_rq_total", 1, "envoy.http_conn_manager_prefix", "ingress")), KindEnvoy, true},
		{"behind the sink's prefix, untagged", envoyPush(counter("edge.server.live", 1)), KindAuto, false},
		{"not Envoy's names", envoyPush(counter("http.server.request.duration", 1)), KindAuto, false},
		{"a named scope", func() pmetric.ResourceMetrics {
			rm := envoyPush(counter("cluster.upstream_rq_total", 1))
			rm.ScopeMetrics().At(0).Scope().SetName("my-sdk")
			return rm
		}(), KindAuto, false},
		{"Kong's scope", func() pmetric.ResourceMetrics {
			rm := envoyPush(counter("http.server.request.count", 1))
			rm.ScopeMetrics().At(0).Scope().SetName("kong-internal")
			return rm
		}(), KindKong, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := detectEnvoyMetrics(tc.rm); got != tc.envoy {
				t.Errorf("detectEnvoyMetrics %v, want %v", got, tc.envoy)
			}
			if got := DetectMetrics(tc.rm); got != tc.kind {
				t.Errorf("DetectMetrics %v, want %v", got, tc.kind)
			}
		})
	}
}
