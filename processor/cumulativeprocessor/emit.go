package cumulativeprocessor

import (
	"context"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/internal/identity"
)

// emit sends one cumulative point for every stream touched since the last
// emission (emit: interval), grouped by resource, scope and metric.
//
// Each shard is locked only while its touched streams are copied into the
// outgoing batch, so ingestion waits for at most one shard's copy; the batch
// is sent with no lock held. emitMu keeps two emissions (a tick and the
// final one at shutdown) from interleaving.
func (p *cumulativeProcessor) emit(ctx context.Context) error {
	p.emitMu.Lock()
	defer p.emitMu.Unlock()
	b := newBatchBuilder()
	for i := range p.shards {
		sh := &p.shards[i]
		sh.mu.Lock()
		for _, s := range sh.dirty {
			s.dirty = false
			b.add(s)
		}
		clear(sh.dirty) // drop the pointers, keep the capacity
		sh.dirty = sh.dirty[:0]
		sh.mu.Unlock()
	}
	if b.md.DataPointCount() == 0 {
		return nil
	}
	return p.next.ConsumeMetrics(ctx, b.md)
}

// batchBuilder groups emitted points under one ResourceMetrics per resource,
// one ScopeMetrics per scope and one Metric per metricDesc.
type batchBuilder struct {
	md        pmetric.Metrics
	resources map[resourceKey]pmetric.ResourceMetrics
	scopes    map[scopeKey]pmetric.ScopeMetrics
	metrics   map[*metricDesc]pmetric.Metric
}

type resourceKey struct {
	attrs  identity.Set
	schema string
}

type scopeKey struct {
	resource      resourceKey
	name, version string
	attrs         identity.Set
	schema        string
}

func newBatchBuilder() *batchBuilder {
	return &batchBuilder{
		md:        pmetric.NewMetrics(),
		resources: map[resourceKey]pmetric.ResourceMetrics{},
		scopes:    map[scopeKey]pmetric.ScopeMetrics{},
		metrics:   map[*metricDesc]pmetric.Metric{},
	}
}

// add appends s's cumulative point; the caller holds s's shard lock.
func (b *batchBuilder) add(s *stream) {
	m := b.metric(s.desc)
	var dp interface {
		Attributes() pcommon.Map
		SetStartTimestamp(pcommon.Timestamp)
		SetTimestamp(pcommon.Timestamp)
		Exemplars() pmetric.ExemplarSlice
	}
	switch s.desc.typ {
	case pmetric.MetricTypeSum:
		p := m.Sum().DataPoints().AppendEmpty()
		writeSum(s, p)
		dp = p
	case pmetric.MetricTypeHistogram:
		p := m.Histogram().DataPoints().AppendEmpty()
		writeHist(s, p)
		dp = p
	case pmetric.MetricTypeExponentialHistogram:
		p := m.ExponentialHistogram().DataPoints().AppendEmpty()
		writeExp(s, p)
		dp = p
	default:
		return
	}
	s.attrs.CopyTo(dp.Attributes())
	dp.SetStartTimestamp(s.start)
	dp.SetTimestamp(s.last)
	s.takeExemplars(dp.Exemplars())
}

func (b *batchBuilder) metric(d *metricDesc) pmetric.Metric {
	if m, ok := b.metrics[d]; ok {
		return m
	}
	rk := resourceKey{attrs: d.resource, schema: d.resSchema}
	rm, ok := b.resources[rk]
	if !ok {
		rm = b.md.ResourceMetrics().AppendEmpty()
		rm.SetSchemaUrl(d.resSchema)
		d.resource.CopyTo(rm.Resource().Attributes())
		b.resources[rk] = rm
	}
	sk := scopeKey{resource: rk, name: d.scopeName, version: d.scopeVersion, attrs: d.scopeAttrs, schema: d.scopeSchema}
	sm, ok := b.scopes[sk]
	if !ok {
		sm = rm.ScopeMetrics().AppendEmpty()
		sm.SetSchemaUrl(d.scopeSchema)
		sm.Scope().SetName(d.scopeName)
		sm.Scope().SetVersion(d.scopeVersion)
		d.scopeAttrs.CopyTo(sm.Scope().Attributes())
		b.scopes[sk] = sm
	}
	m := sm.Metrics().AppendEmpty()
	m.SetName(d.name)
	m.SetDescription(d.description)
	m.SetUnit(d.unit)
	switch d.typ {
	case pmetric.MetricTypeSum:
		m.SetEmptySum().SetIsMonotonic(d.monotonic)
		m.Sum().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	case pmetric.MetricTypeHistogram:
		m.SetEmptyHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	case pmetric.MetricTypeExponentialHistogram:
		m.SetEmptyExponentialHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	}
	b.metrics[d] = m
	return m
}
