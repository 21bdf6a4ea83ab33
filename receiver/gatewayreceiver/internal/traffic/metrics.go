package traffic

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
)

// gatewayID is the resource a point is reported under (the otel profile's
// service.namespace and service.name; empty for the kong and apisix
// profiles, whose series carry only the gateway plugin's labels).
type gatewayID struct{ namespace, service string }

// metricKey is one metric of a Metrics call: a family name under a
// resource.
type metricKey struct {
	res  gatewayID
	name string
}

// Metrics renders points [from, to) of the window, which ran from start to
// end, as delta points: monotonic sums and histograms, one ResourceMetrics
// per gateway, one metric per family name.
func (w *Window) Metrics(from, to int, start, end pcommon.Timestamp) pmetric.Metrics {
	md := pmetric.NewMetrics()
	// Both maps stay on the stack (they are not handed on): a resource's
	// metrics, and each metric, made on its first point.
	scopes := make(map[gatewayID]pmetric.MetricSlice)
	metrics := make(map[metricKey]pmetric.Metric)
	k := new(tuple) // one per call: the label writers, called through func values, keep it on the heap
	// attrsLen is, per family, how many attributes its last point got: the
	// next one's map is made that size at once, instead of growing from
	// one entry (four allocations and twice the bytes for five labels).
	attrsLen := make([]int, len(w.a.fams))
	for i := range w.points[from:to] {
		p := &w.points[from+i]
		f := &w.a.fams[p.fam]
		*k = p.tuple()
		id := gatewayID{k.namespace, k.gateway}
		mk := metricKey{id, f.name}
		m, ok := metrics[mk]
		if !ok {
			ms, ok := scopes[id]
			if !ok {
				ms = w.newResource(md, id)
				scopes[id] = ms
			}
			m = newMetric(ms, f)
			metrics[mk] = m
		}
		attrs := w.newPoint(m, f, p, start, end)
		attrs.EnsureCapacity(attrsLen[p.fam])
		w.a.labels.write(f, k, attrs)
		attrsLen[p.fam] = attrs.Len()
	}
	return md
}

// newResource appends the resource of gateway id, with its scope, to md
// and returns the scope's metrics.
func (w *Window) newResource(md pmetric.Metrics, id gatewayID) pmetric.MetricSlice {
	rm := md.ResourceMetrics().AppendEmpty()
	if id.service != "" {
		rm.Resource().Attributes().PutStr("service.name", id.service)
	}
	if id.namespace != "" {
		rm.Resource().Attributes().PutStr("service.namespace", id.namespace)
	}
	if c := w.a.labels.collector; c.Key != "" && id.service != "" {
		// target_info of a gateway resource names the collector too.
		rm.Resource().Attributes().PutStr(c.Key, c.Value)
	}
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(metadata.ScopeName)
	return sm.Metrics()
}

// newMetric appends family f's metric, without points, to ms.
func newMetric(ms pmetric.MetricSlice, f *family) pmetric.Metric {
	m := ms.AppendEmpty()
	m.SetName(f.name)
	m.SetUnit(f.unit)
	m.SetDescription(f.desc)
	switch {
	case f.expoSize > 0:
		m.SetEmptyExponentialHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	case f.hist:
		m.SetEmptyHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	default:
		sum := m.SetEmptySum()
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		sum.SetIsMonotonic(true)
	}
	return m
}

// newPoint appends point p of family f to m, from start to end, and returns
// its attributes, to be written.
func (w *Window) newPoint(m pmetric.Metric, f *family, p *point, start, end pcommon.Timestamp) pcommon.Map {
	switch {
	case f.expoSize > 0:
		dp := m.ExponentialHistogram().DataPoints().AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(end)
		dp.SetCount(p.count)
		dp.SetSum(p.sum)
		e, counts := p.expo(w.buckets)
		dp.SetScale(e.scale)
		dp.SetZeroCount(e.zero)
		dp.Positive().SetOffset(e.offset)
		dp.Positive().BucketCounts().FromRaw(counts)
		w.writeExemplars(dp.Exemplars(), p, end)
		return dp.Attributes()
	case f.hist:
		dp := m.Histogram().DataPoints().AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(end)
		dp.SetCount(p.count)
		dp.SetSum(p.sum)
		dp.ExplicitBounds().FromRaw(f.bounds)
		dp.BucketCounts().FromRaw(p.counts(w.buckets, len(f.bounds)+1))
		w.writeExemplars(dp.Exemplars(), p, end)
		return dp.Attributes()
	default:
		dp := m.Sum().DataPoints().AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(end)
		if f.double {
			dp.SetDoubleValue(p.total)
		} else {
			// Requests, bytes and tokens: whole numbers.
			dp.SetIntValue(int64(p.total))
		}
		return dp.Attributes()
	}
}

// write writes a point's attributes: its family's labels of tuple k (only
// otel.metric.overflow and the family's constant for an overflow tuple),
// then the span dimensions, the reporting node and the collector.
func (out *pointLabels) write(f *family, k *tuple, attrs pcommon.Map) {
	if k.overflow {
		attrs.PutBool("otel.metric.overflow", true)
		if f.constKey != "" {
			attrs.PutStr(f.constKey, f.constVal)
		}
	} else {
		writeLabels(f, k, attrs)
	}
	if f.spanDims && !k.overflow {
		for i, sd := range out.span {
			if v := k.dims[i]; v != "" || sd.Default != nil {
				attrs.PutStr(sd.Name, v)
			}
		}
	}
	if out.node != "" && !k.overflow {
		attrs.PutStr(out.node, k.node)
	}
	if out.collector.Key != "" {
		attrs.PutStr(out.collector.Key, out.collector.Value)
	}
}

// writeExemplars writes a histogram point's exemplars.
func (w *Window) writeExemplars(dst pmetric.ExemplarSlice, p *point, now pcommon.Timestamp) {
	for _, x := range w.exemplars[p.exStart:p.exEnd] {
		ex := dst.AppendEmpty()
		ex.SetTimestamp(now)
		ex.SetDoubleValue(x.value)
		ex.SetTraceID(x.trace)
		ex.SetSpanID(x.span)
	}
}

// writeLabels writes a point's attributes in the gateway's label order, the
// family's constant attribute at its place among them (pcommon.Map keeps
// insertion order, and the exporter can keep it: label_order as_received).
func writeLabels(f *family, k *tuple, attrs pcommon.Map) {
	if f.constKey == "" || f.constAt < 0 {
		f.labels(k, attrs)
		if f.constKey != "" {
			attrs.PutStr(f.constKey, f.constVal)
		}
		return
	}
	labels := pcommon.NewMap() // once per flushed point, not per event
	f.labels(k, labels)
	i := 0
	for key, v := range labels.All() {
		if i == f.constAt {
			attrs.PutStr(f.constKey, f.constVal)
		}
		v.CopyTo(attrs.PutEmpty(key))
		i++
	}
	if i <= f.constAt {
		attrs.PutStr(f.constKey, f.constVal)
	}
}
