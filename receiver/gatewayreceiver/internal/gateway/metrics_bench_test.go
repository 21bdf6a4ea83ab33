package gateway

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter"
	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/processor/cumulativeprocessor"
)

// envoyStatsPush builds one push of Envoy's stats sink at scale: clusters ×
// (48 counters, 24 gauges, 4 histograms on the 19 default buckets),
// each tagged envoy.cluster_name, the rq_xx counters also
// envoy.response_code_class. aggregated: one metric per name holding every
// cluster's point (the sink with custom conversions, and since PR #43716);
// otherwise one metric per stat (the sink's plain flush).
func envoyStatsPush(clusters int, aggregated bool, at pcommon.Timestamp, delta bool) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.instance.id", "envoy-0")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	byName := map[string]pmetric.Metric{}
	metric := func(name string, typ pmetric.MetricType) pmetric.Metric {
		if aggregated {
			if m, ok := byName[name]; ok {
				return m
			}
		}
		m := ms.AppendEmpty()
		m.SetName(name)
		switch typ {
		case pmetric.MetricTypeSum:
			m.SetEmptySum().SetIsMonotonic(true)
			m.Sum().SetAggregationTemporality(temporality(delta))
		case pmetric.MetricTypeGauge:
			m.SetEmptyGauge()
		case pmetric.MetricTypeHistogram:
			m.SetEmptyHistogram().SetAggregationTemporality(temporality(delta))
		}
		byName[name] = m
		return m
	}
	bounds := []float64{0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 600000, 1800000, 3600000}
	counters := make([]string, 48)
	for i := range counters {
		counters[i] = "cluster.upstream_stat_" + strconv.Itoa(i)
	}
	counters[0], counters[1] = "cluster.upstream_rq_total", "cluster.upstream_rq_xx"
	for c := range clusters {
		name := "httproute/default/backend-" + strconv.Itoa(c) + "/rule/0"
		for i, cn := range counters {
			p := metric(cn, pmetric.MetricTypeSum).Sum().DataPoints().AppendEmpty()
			if i == 1 {
				p.Attributes().PutStr("envoy.response_code_class", "2")
			}
			p.Attributes().PutStr("envoy.cluster_name", name)
			p.SetIntValue(int64(c*100 + i))
			p.SetStartTimestamp(1)
			p.SetTimestamp(at)
		}
		for i := range 24 {
			p := metric("cluster.gauge_"+strconv.Itoa(i), pmetric.MetricTypeGauge).Gauge().DataPoints().AppendEmpty()
			p.Attributes().PutStr("envoy.cluster_name", name)
			p.SetIntValue(int64(i))
			p.SetTimestamp(at)
		}
		for i := range 4 {
			p := metric("cluster.upstream_rq_time_"+strconv.Itoa(i), pmetric.MetricTypeHistogram).Histogram().DataPoints().AppendEmpty()
			p.Attributes().PutStr("envoy.cluster_name", name)
			p.ExplicitBounds().FromRaw(bounds)
			counts := make([]uint64, len(bounds)+1)
			counts[5], counts[6] = 10, 3
			p.BucketCounts().FromRaw(counts)
			p.SetCount(13)
			p.SetSum(700)
			p.SetStartTimestamp(1)
			p.SetTimestamp(at)
		}
	}
	return md
}

// BenchmarkMapEnvoyMetrics maps one 100k-point push of Envoy's stats sink
// (1,316 clusters × 76 stats). One op is one push; ns/point is per pushed
// data point.
//
//	go test -run '^$' -bench MapEnvoyMetrics -count 6 -cpu 1 ./receiver/gatewayreceiver/internal/gateway
func BenchmarkMapEnvoyMetrics(b *testing.B) {
	for _, agg := range []bool{false, true} {
		name := "per_stat"
		if agg {
			name = "aggregated"
		}
		b.Run(name, func(b *testing.B) {
			md := envoyStatsPush(1316, agg, 2, false)
			rm := md.ResourceMetrics().At(0)
			points := md.DataPointCount()
			o := &MetricsOptions{}
			b.ReportAllocs()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu0 := threadCPU()
			for b.Loop() {
				out := pmetric.NewMetrics()
				var st MetricsStats
				MapEnvoyMetrics(out, rm, o, &st)
				if st.Written != points {
					b.Fatalf("wrote %d of %d", st.Written, points)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*points), "ns/point")
			b.ReportMetric(float64(threadCPU()-cpu0)/float64(b.N*points), "cpu-ns/point")
		})
	}
}

// kongMetricsPush builds one push of Kong's metrics: routes × (request
// counts for 2 methods × 3 status codes, 3 latency histograms, 2 size
// histograms), plus a node's gauges.
func kongMetricsPush(routes int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.instance.id", "node-1")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(kongScope)
	ms := sm.Metrics()
	reqs := ms.AppendEmpty()
	reqs.SetName("http.server.request.count")
	reqs.SetEmptySum().SetIsMonotonic(true)
	reqs.Sum().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	hist := func(name, unit string) pmetric.HistogramDataPointSlice {
		m := ms.AppendEmpty()
		m.SetName(name)
		m.SetUnit(unit)
		m.SetEmptyHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		return m.Histogram().DataPoints()
	}
	lat := []pmetric.HistogramDataPointSlice{hist("kong.latency.total", "s"), hist("kong.latency.internal", "s"), hist("kong.latency.upstream", "s")}
	sizes := []pmetric.HistogramDataPointSlice{hist("http.server.request.size", "By"), hist("http.server.response.size", "By")}
	route := func(a pcommon.Map, r string) {
		a.PutStr("kong.service.name", "svc-"+r)
		a.PutStr("kong.route.name", "route-"+r)
		a.PutStr("kong.workspace.name", "default")
	}
	for i := range routes {
		r := strconv.Itoa(i)
		for _, method := range []string{"GET", "POST"} {
			for _, code := range []int64{200, 404, 503} {
				p := reqs.Sum().DataPoints().AppendEmpty()
				route(p.Attributes(), r)
				p.Attributes().PutStr("kong.auth.consumer.name", "")
				p.Attributes().PutStr("kong.response.source", "upstream")
				p.Attributes().PutStr("http.request.method", method)
				p.Attributes().PutInt("http.response.status_code", code)
				p.SetIntValue(int64(i) + code)
				p.SetStartTimestamp(1)
				p.SetTimestamp(2)
			}
		}
		for _, dps := range append(lat, sizes...) {
			p := dps.AppendEmpty()
			route(p.Attributes(), r)
			p.SetCount(10)
			p.SetSum(1.5)
			p.SetStartTimestamp(1)
			p.SetTimestamp(2)
		}
	}
	return md
}

// BenchmarkMapKongMetrics maps one push of Kong's metrics from 2,000 routes
// (22,000 points). One op is one push.
//
//	go test -run '^$' -bench MapKongMetrics -count 6 -cpu 1 ./receiver/gatewayreceiver/internal/gateway
func BenchmarkMapKongMetrics(b *testing.B) {
	md := kongMetricsPush(2000)
	rm := md.ResourceMetrics().At(0)
	points := md.DataPointCount()
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	for b.Loop() {
		out := pmetric.NewMetrics()
		var st MetricsStats
		MapKongMetrics(out, rm, nil, &st)
		if st.Points[PointMapped] != points {
			b.Fatalf("mapped %d of %d", st.Points[PointMapped], points)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*points), "ns/point")
	b.ReportMetric(float64(threadCPU()-cpu0)/float64(b.N*points), "cpu-ns/point")
}

// BenchmarkEnvoyPushToExporter is a pushed Envoy stat's way after the
// receiver's decoding: the mapping, the cumulative processor and the
// promstream exporter's store (no scrape), for one push of 100k points
// into a collector that already holds the series (the steady state: each
// push updates them). Cumulative as the sink sends by default, and delta
// (report_counters_as_deltas, report_histograms_as_deltas). One op is one
// push; 5 s / (ns/op) is the share of one core a 5 s flush interval takes.
//
//	go test -run '^$' -bench EnvoyPushToExporter -count 6 -cpu 1 ./receiver/gatewayreceiver/internal/gateway
func BenchmarkEnvoyPushToExporter(b *testing.B) {
	for _, delta := range []bool{false, true} {
		name := "cumulative"
		if delta {
			name = "delta"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			ef := promstreamexporter.NewFactory()
			ecfg := ef.CreateDefaultConfig().(*promstreamexporter.Config)
			ecfg.ServerConfig.NetAddr.Endpoint = testutil.FreeAddr(b)
			ecfg.TranslationStrategy = "UnderscoreEscapingWithoutSuffixes"
			ecfg.WithoutScopeInfo = true
			ecfg.LabelOrder = "as_received"
			ecfg.KeepEmptyLabels = true
			exp, err := ef.CreateMetrics(ctx, exportertest.NewNopSettings(component.MustNewType("promstream")), ecfg)
			if err != nil {
				b.Fatal(err)
			}
			if err := exp.Start(ctx, componenttest.NewNopHost()); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = exp.Shutdown(context.Background()) }()
			pf := cumulativeprocessor.NewFactory()
			pcfg := pf.CreateDefaultConfig().(*cumulativeprocessor.Config)
			pcfg.Limits.MaxStreams = 200_000
			proc, err := pf.CreateMetrics(ctx, processortest.NewNopSettings(component.MustNewType("cumulative")), pcfg, exp)
			if err != nil {
				b.Fatal(err)
			}
			if err := proc.Start(ctx, componenttest.NewNopHost()); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = proc.Shutdown(context.Background()) }()
			// Pushes one flush interval apart (their timestamps advance, as
			// the processor requires of a stream's points).
			const clusters = 1316
			at := pcommon.Timestamp(2)
			push := func() {
				md := envoyStatsPush(clusters, true, at, delta)
				if delta {
					shiftStarts(md, at-1)
				}
				at++
				out := pmetric.NewMetrics()
				var st MetricsStats
				MapEnvoyMetrics(out, md.ResourceMetrics().At(0), nil, &st)
				if err := proc.ConsumeMetrics(ctx, out); err != nil {
					b.Fatal(err)
				}
			}
			push() // the series exist
			pushes := make([]pmetric.Metrics, 8)
			points := 0
			for i := range pushes {
				pushes[i] = envoyStatsPush(clusters, true, 0, delta)
				points = pushes[i].DataPointCount()
			}
			b.ReportAllocs()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu0 := threadCPU()
			i := 0
			for b.Loop() {
				md := pushes[i%len(pushes)]
				setTimes(md, at, delta)
				at++
				i++
				out := pmetric.NewMetrics()
				var st MetricsStats
				MapEnvoyMetrics(out, md.ResourceMetrics().At(0), nil, &st)
				if err := proc.ConsumeMetrics(ctx, out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*points), "ns/point")
			b.ReportMetric(float64(threadCPU()-cpu0)/float64(b.N*points), "cpu-ns/point")
		})
	}
}

// setTimes stamps every point of md with timestamp at (delta: the window
// [at-1, at]); cumulative points keep start 1.
func setTimes(md pmetric.Metrics, at pcommon.Timestamp, delta bool) {
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := 0; i < ms.Len(); i++ {
		m := ms.At(i)
		switch m.Type() {
		case pmetric.MetricTypeSum:
			for j := 0; j < m.Sum().DataPoints().Len(); j++ {
				p := m.Sum().DataPoints().At(j)
				p.SetTimestamp(at)
				if delta {
					p.SetStartTimestamp(at - 1)
				}
			}
		case pmetric.MetricTypeGauge:
			for j := 0; j < m.Gauge().DataPoints().Len(); j++ {
				m.Gauge().DataPoints().At(j).SetTimestamp(at)
			}
		case pmetric.MetricTypeHistogram:
			for j := 0; j < m.Histogram().DataPoints().Len(); j++ {
				p := m.Histogram().DataPoints().At(j)
				p.SetTimestamp(at)
				if delta {
					p.SetStartTimestamp(at - 1)
				}
			}
		}
	}
}

func shiftStarts(md pmetric.Metrics, start pcommon.Timestamp) {
	setTimes(md, start+1, true)
}
