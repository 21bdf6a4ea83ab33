package gateway

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
)

// TestOTLPMetricsCost: a metrics export is costed by its data points (every
// type), their attributes and exemplars, in protobuf and in JSON alike, at
// least what pdata keeps for them.
func TestOTLPMetricsCost(t *testing.T) {
	md := pmetric.NewMetrics()
	sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
	g := sm.Metrics().AppendEmpty().SetEmptyGauge().DataPoints()
	for range 10 {
		p := g.AppendEmpty()
		p.Attributes().PutStr("a", "b")
		p.Exemplars().AppendEmpty()
	}
	h := sm.Metrics().AppendEmpty().SetEmptyHistogram().DataPoints()
	for range 5 {
		h.AppendEmpty().Attributes().PutStr("a", "b")
	}
	sm.Metrics().AppendEmpty().SetEmptySum().DataPoints().AppendEmpty()
	sm.Metrics().AppendEmpty().SetEmptyExponentialHistogram().DataPoints().AppendEmpty()
	sm.Metrics().AppendEmpty().SetEmptySummary().DataPoints().AppendEmpty().QuantileValues().AppendEmpty()
	req := pmetricotlp.NewExportRequestFromMetrics(md)
	pb, _ := req.MarshalProto()
	js, _ := req.MarshalJSON()
	pc := OTLPMetricsProtoCost(pb)
	jc, err := OTLPJSONCost(js, 64)
	if err != nil {
		t.Fatal(err)
	}
	// 1 resource, 1 scope, 5 metrics, 18 points, 15 attributes, 10
	// exemplars, 1 quantile.
	for name, c := range map[string]DecodeCost{"protobuf": pc, "JSON": jc} {
		if c.Points != 18 || c.Elements != 51 || c.Spans != 0 {
			t.Errorf("%s: %d points, %d elements, %d spans; want 18, 51, 0", name, c.Points, c.Elements, c.Spans)
		}
	}
	min := int64(144 + 128 + 5*144 + 12*112 + 5*176 + 208 + 15*48 + 10*88 + 32)
	if pc.Bytes < min+2*int64(len(pb)) {
		t.Errorf("protobuf cost %d bytes, want at least %d", pc.Bytes, min+2*int64(len(pb)))
	}
	if jc.Bytes < min {
		t.Errorf("JSON cost %d bytes, want at least %d", jc.Bytes, min)
	}
}
