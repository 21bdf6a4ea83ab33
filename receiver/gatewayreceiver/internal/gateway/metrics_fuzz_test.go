package gateway

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// fuzzMetricsSeeds are OTLP/protobuf pushes: the fixtures, and small
// hostile shapes (bucket counts that lie, duplicate series, map
// attributes, a delta and a cumulative of one series).
func fuzzMetricsSeeds(f *testing.F) {
	m := &pmetric.ProtoMarshaler{}
	for _, path := range []string{"testdata/kong/kong-3.14-push.json", "testdata/envoy/cluster-stats.push.json", "testdata/envoy/names.push.json"} {
		b, err := m.MarshalMetrics(readMetricsJSON(f, path))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(0))
	}
	for _, rm := range []pmetric.ResourceMetrics{
		envoyPush(envoyStat{name: "h", typ: pmetric.MetricTypeHistogram, bounds: []float64{1, 2}, counts: []uint64{1, 2, 3}, sum: 1},
			envoyStat{name: "h", typ: pmetric.MetricTypeHistogram, bounds: []float64{1, 2}, counts: []uint64{1, 2, 3}, sum: 1}),
		envoyPush(counter("cluster.upstream_rq_total", 1), gaugeStat("cluster_upstream_rq_total", 1)),
		kongPush("kong.latency.total", "s", pmetric.MetricTypeHistogram, false,
			kongPoint{attrs: kongRouteAttrs, count: 3, sum: 1, bounds: []float64{0.025, 0.05}, counts: []uint64{1, 1, 1}},
			kongPoint{attrs: kongRouteAttrs, count: 9, sum: 1, bounds: []float64{0.05}, counts: []uint64{1, 1}}),
		kongPush("http.server.request.count", "{request}", pmetric.MetricTypeSum, true, kongPoint{attrs: with(kongRouteAttrs, "http.response.status_code", "#200"), value: 2}),
	} {
		md := pmetric.NewMetrics()
		rm.CopyTo(md.ResourceMetrics().AppendEmpty())
		b, err := m.MarshalMetrics(md)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(1))
		f.Add(b, uint8(2))
	}
}

// fuzzMapper maps any push and checks what every mapping must hold: every
// input point counted once, no more points written than allowed, label
// values within bounds, and every histogram written consistent (one bucket
// more than bounds, counts adding up to the count).
func fuzzMapper(t *testing.T, b []byte, limit uint8, mapFn func(pmetric.Metrics, pmetric.ResourceMetrics, *MetricsOptions, *MetricsStats)) {
	md, err := (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(b)
	if err != nil {
		return
	}
	o := &MetricsOptions{MaxPoints: int(limit), MaxLabelBytes: 64, Origin: "10.0.0.1:1", EnvoyPrefix: "edge", EnvoyNamespaces: []string{"promtest"}}
	out, st := mapAll(md, mapFn, o)
	total := 0
	for _, n := range st.Points {
		total += n
	}
	if total != md.DataPointCount() {
		t.Fatalf("%d points counted of %d: %v", total, md.DataPointCount(), st.Points)
	}
	if limit > 0 && st.Written > int(limit)*md.ResourceMetrics().Len() {
		t.Fatalf("%d points written, limit %d per resource", st.Written, limit)
	}
	if st.Dropped() > 0 && st.Points[PointInvalid]+st.Points[PointConflict]+st.Points[PointLabelTooLong]+st.Points[PointTooManyLabels] > 0 && st.Err == nil {
		t.Fatal("points dropped for the sender's error without a description")
	}
	if out.DataPointCount() != st.Written {
		t.Fatalf("%d points in the output, %d counted written", out.DataPointCount(), st.Written)
	}
	rms := out.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		ms := rms.At(i).ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			m := ms.At(j)
			if m.Type() != pmetric.MetricTypeHistogram {
				continue
			}
			dps := m.Histogram().DataPoints()
			for k := 0; k < dps.Len(); k++ {
				p := dps.At(k)
				if p.BucketCounts().Len() != p.ExplicitBounds().Len()+1 {
					t.Fatalf("%s: %d counts for %d bounds", m.Name(), p.BucketCounts().Len(), p.ExplicitBounds().Len())
				}
				var n uint64
				for c := 0; c < p.BucketCounts().Len(); c++ {
					n += p.BucketCounts().At(c)
				}
				if n != p.Count() {
					t.Fatalf("%s: buckets add up to %d, count %d", m.Name(), n, p.Count())
				}
				for _, v := range p.Attributes().All() {
					if len(v.Str()) > 64 {
						t.Fatalf("%s: a label of %d bytes", m.Name(), len(v.Str()))
					}
				}
			}
		}
	}
}

func FuzzMapKongMetrics(f *testing.F) {
	fuzzMetricsSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte, limit uint8) { fuzzMapper(t, b, limit, MapKongMetrics) })
}

func FuzzMapEnvoyMetrics(f *testing.F) {
	fuzzMetricsSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte, limit uint8) { fuzzMapper(t, b, limit, MapEnvoyMetrics) })
}
