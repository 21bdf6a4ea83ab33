package gatewayreceiver

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter"
	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/processor/cumulativeprocessor"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
)

// envoySinkPush is one flush of Envoy's stats sink at scale, as protobuf:
// clusters × (48 counters, 24 gauges, 4 histograms on the 19 default
// buckets), one metric per stat name, every point tagged
// envoy.cluster_name; at is the flush's time (delta: the window ends there).
func envoySinkPush(clusters int, at pcommon.Timestamp, delta bool) []byte {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.instance.id", "envoy-0")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	temp := pmetric.AggregationTemporalityCumulative
	start := pcommon.Timestamp(1)
	if delta {
		temp, start = pmetric.AggregationTemporalityDelta, at-1
	}
	bounds := []float64{0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 600000, 1800000, 3600000}
	for i := range 76 {
		m := ms.AppendEmpty()
		switch {
		case i < 48:
			m.SetName("cluster.upstream_stat_" + strconv.Itoa(i))
			m.SetEmptySum().SetIsMonotonic(true)
			m.Sum().SetAggregationTemporality(temp)
		case i < 72:
			m.SetName("cluster.gauge_" + strconv.Itoa(i))
			m.SetEmptyGauge()
		default:
			m.SetName("cluster.upstream_rq_time_" + strconv.Itoa(i))
			m.SetEmptyHistogram().SetAggregationTemporality(temp)
		}
		for c := range clusters {
			name := "httproute/default/backend-" + strconv.Itoa(c) + "/rule/0"
			switch m.Type() {
			case pmetric.MetricTypeSum, pmetric.MetricTypeGauge:
				var p pmetric.NumberDataPoint
				if m.Type() == pmetric.MetricTypeSum {
					p = m.Sum().DataPoints().AppendEmpty()
					p.SetStartTimestamp(start)
				} else {
					p = m.Gauge().DataPoints().AppendEmpty()
				}
				p.Attributes().PutStr("envoy.cluster_name", name)
				p.SetIntValue(int64(c + i))
				p.SetTimestamp(at)
			default:
				p := m.Histogram().DataPoints().AppendEmpty()
				p.Attributes().PutStr("envoy.cluster_name", name)
				p.ExplicitBounds().FromRaw(bounds)
				counts := make([]uint64, len(bounds)+1)
				counts[5], counts[6] = 10, 3
				p.BucketCounts().FromRaw(counts)
				p.SetCount(13)
				p.SetSum(700)
				p.SetStartTimestamp(start)
				p.SetTimestamp(at)
			}
		}
	}
	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		panic(err)
	}
	return b
}

// promPipeline is the cumulative processor before the promstream
// exporter's store (no scrape), as the distribution runs pushed metrics.
func promPipeline(b *testing.B) consumer.Metrics {
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
	b.Cleanup(func() { _ = exp.Shutdown(context.Background()) })
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
	b.Cleanup(func() { _ = proc.Shutdown(context.Background()) })
	return proc
}

// BenchmarkPushedMetrics is one 100k-point Envoy push (1,316 clusters × 76
// stats) through what the receiver does once its body is read: the decode
// cost check, pdata's protobuf decoding, routing, the mapping, and the
// metrics pipeline: none (a nop consumer), or the cumulative processor and
// the promstream exporter's store, holding the series already (the steady
// state). One op is one push; ns/point is per pushed data point, and
// core-share-5s = the process's CPU per push / 5 s, the share of one core a
// push every 5 s (Envoy's default stats_flush_interval) takes: below 1 is
// sustained.
//
//	go test -run '^$' -bench PushedMetrics -count 6 -cpu 1 ./receiver/gatewayreceiver
func BenchmarkPushedMetrics(b *testing.B) {
	for _, pipeline := range []string{"receiver", "to_exporter"} {
		for _, delta := range []bool{false, true} {
			name := pipeline + "/cumulative"
			if delta {
				name = pipeline + "/delta"
			}
			b.Run(name, func(b *testing.B) { benchPushed(b, pipeline == "to_exporter", delta) })
		}
	}
}

func benchPushed(b *testing.B, toExporter, delta bool) {
	const clusters = 1316
	var next consumer.Metrics = consumertest.NewNop()
	if toExporter {
		next = promPipeline(b)
	}
	r, err := newReceiver(createDefaultConfig(), receivertest.NewNopSettings(metadata.Type), next)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	at := pcommon.Timestamp(2)
	body := envoySinkPush(clusters, at, delta)
	push := func(body []byte) int {
		if c := gateway.OTLPMetricsProtoCost(body); c.Points == 0 {
			b.Fatal("no points costed")
		}
		req := pmetricotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			b.Fatal(err)
		}
		res, err := r.ingest.pushed.metrics(ctx, req.Metrics(), "10.0.0.1")
		if err != nil || res.rejected != 0 {
			b.Fatalf("%v, %d rejected: %s", err, res.rejected, res.message)
		}
		return req.Metrics().DataPointCount()
	}
	points := push(body) // the series' first push: the only allocating one downstream
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu, procCPU int64
	for i := 0; i < b.N; i++ {
		if delta || toExporter {
			// A delta stream's points must advance (the processor drops
			// older ones): each push is one flush later, built off the clock.
			b.StopTimer()
			at++
			body = envoySinkPush(clusters, at, delta)
			b.StartTimer()
		}
		cpu0, proc0 := testutil.ThreadCPU(), processCPU()
		push(body)
		cpu += int64(testutil.ThreadCPU() - cpu0)
		procCPU += processCPU() - proc0
	}
	perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(perOp/float64(points), "ns/point")
	b.ReportMetric(float64(cpu)/float64(b.N*points), "cpu-ns/point")
	// The process's CPU includes the garbage collector's workers on other
	// threads: what the push costs the machine.
	b.ReportMetric(float64(procCPU)/float64(b.N*points), "proc-cpu-ns/point")
	b.ReportMetric(float64(procCPU)/float64(b.N)/5e9, "core-share-5s")
}
