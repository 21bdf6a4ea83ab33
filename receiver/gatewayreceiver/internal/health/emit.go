package health

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
)

// Naming is how one naming profile writes the health state (naming.go
// defines one per profile).
type Naming struct {
	// Target is the metric of the rows: WriteTarget appends one row's
	// points (a one-hot set, or one point) to it.
	Target      Metric
	WriteTarget func(dps pmetric.NumberDataPointSlice, r *Row, ts pcommon.Timestamp)
	// Upstream is the metric of per-upstream counts by state; nil when the
	// profile has none. WriteUpstream appends one upstream's points.
	Upstream      *Metric
	WriteUpstream func(dps pmetric.NumberDataPointSlice, u *UpstreamRow, ts pcommon.Timestamp)
}

// Identity is the label naming the collector that keeps the state (Key ""
// for none): it goes on every point and on the resource (target_info).
type Identity struct{ Key, Value string }

// Metric names a gauge.
type Metric struct{ Name, Unit, Desc string }

// Row is one drained table row, as a profile writes it. Its key fields
// never change after insert.
type Row struct {
	e       *entry
	State   gateway.HealthState
	Removed bool
}

func (r *Row) Upstream() string { return r.e.key.upstream }
func (r *Row) Target() string   { return r.e.key.target }

// Address is ip:port ("" for a target without an address).
func (r *Row) Address() string { return r.e.address }
func (r *Row) IP() string      { return r.e.key.ip }
func (r *Row) Port() string    { return r.e.key.port }

// States are the states of the row's gateway kind, in one-hot order.
func (r *Row) States() []gateway.HealthState { return r.e.up.gw.kind.HealthStates() }

// UpstreamRow is one drained upstream and its counts by state.
type UpstreamRow struct {
	u       *upstreamRows
	Counts  [gateway.NumHealthStates]int64
	Removed bool
}

func (u *UpstreamRow) Name() string                  { return u.u.name }
func (u *UpstreamRow) States() []gateway.HealthState { return u.u.gw.kind.HealthStates() }

// gatewayPoints is where one gateway instance's points go in a batch.
type gatewayPoints struct {
	health pmetric.NumberDataPointSlice
	counts pmetric.NumberDataPointSlice // otel profile only
}

// emitter turns drained table rows into gauges and hands them downstream.
// Only its goroutine touches its buffers and the gateways' out fields, so
// emissions are serialised: a batch never carries a state older than one
// sent before it.
type emitter struct {
	naming   *Naming
	identity Identity
	table    *table
	next     func(context.Context, pmetric.Metrics) error
	logger   *zap.Logger
	tel      *metadata.TelemetryBuilder

	rows    []Row
	ups     []UpstreamRow
	touched []*gatewayRows
	failing bool // the last emission failed: log the next outcome change only
}

// emit drains the table (all: a full snapshot) and sends one batch.
func (em *emitter) emit(ctx context.Context, all bool) {
	var counts [gateway.NumHealthStates]int64
	em.rows, em.ups, counts = em.table.drain(em.rows[:0], em.ups[:0], all)
	if n := em.table.takeTruncated(); n > 0 {
		em.tel.ReceiverGatewayLabelValuesTruncated.Add(ctx, n)
	}
	for s, n := range counts {
		em.tel.ReceiverGatewayHealthTargets.Record(ctx, n, metric.WithAttributeSet(stateAttrSets[s]))
	}
	defer func() {
		clear(em.rows) // drop references to removed rows
		clear(em.ups)
	}()
	if len(em.rows) == 0 && len(em.ups) == 0 {
		return
	}
	md := em.build(pcommon.NewTimestampFromTime(time.Now()))
	err := em.next(ctx, md)
	switch {
	case err != nil && !em.failing:
		em.failing = true
		em.logger.Warn("Downstream refused health metrics; the next snapshot sends the whole state again", zap.Error(err))
	case err == nil && em.failing:
		em.failing = false
		em.logger.Info("Downstream accepts health metrics again")
	}
}

var stateAttrSets = func() (sets [gateway.NumHealthStates]attribute.Set) {
	for s := range sets {
		sets[s] = attribute.NewSet(attribute.String("state", gateway.HealthState(s).String()))
	}
	return sets
}()

// build renders the drained rows and upstreams, one ResourceMetrics per
// gateway instance. It allocates nothing per row beyond the pdata points.
func (em *emitter) build(ts pcommon.Timestamp) pmetric.Metrics {
	md := pmetric.NewMetrics()
	for i := range em.rows {
		r := &em.rows[i]
		dps := em.pointsFor(md, r.e.up.gw).health
		n := dps.Len()
		em.naming.WriteTarget(dps, r, ts)
		em.identify(dps, n)
	}
	if em.naming.Upstream != nil {
		for i := range em.ups {
			u := &em.ups[i]
			dps := em.pointsFor(md, u.u.gw).counts
			n := dps.Len()
			em.naming.WriteUpstream(dps, u, ts)
			em.identify(dps, n)
		}
	}
	for _, g := range em.touched {
		g.out = nil
	}
	clear(em.touched)
	em.touched = em.touched[:0]
	return md
}

// identify labels the points from index from on with the collector's
// identity, so health series of several collectors never collide.
func (em *emitter) identify(dps pmetric.NumberDataPointSlice, from int) {
	if em.identity.Key == "" {
		return
	}
	for i := from; i < dps.Len(); i++ {
		dps.At(i).Attributes().PutStr(em.identity.Key, em.identity.Value)
	}
}

func (em *emitter) pointsFor(md pmetric.Metrics, g *gatewayRows) *gatewayPoints {
	if g.out != nil {
		return g.out
	}
	rm := md.ResourceMetrics().AppendEmpty()
	res := rm.Resource().Attributes()
	res.PutStr("service.name", g.kind.HealthName())
	res.PutStr("service.instance.id", g.instance)
	if em.identity.Key != "" {
		res.PutStr(em.identity.Key, em.identity.Value)
	}
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(metadata.ScopeName)
	out := &gatewayPoints{health: newGauge(sm, em.naming.Target)}
	if m := em.naming.Upstream; m != nil {
		out.counts = newGauge(sm, *m)
	}
	g.out = out
	em.touched = append(em.touched, g)
	return out
}

func newGauge(sm pmetric.ScopeMetrics, g Metric) pmetric.NumberDataPointSlice {
	m := sm.Metrics().AppendEmpty()
	m.SetName(g.Name)
	m.SetUnit(g.Unit)
	m.SetDescription(g.Desc)
	return m.SetEmptyGauge().DataPoints()
}

// Point appends one gauge point: value v, or no recorded value (the
// exporter then drops the series) for a removed row. It returns the point's
// attributes, with room for nattrs.
func Point(dps pmetric.NumberDataPointSlice, ts pcommon.Timestamp, removed bool, v int64, nattrs int) pcommon.Map {
	dp := dps.AppendEmpty()
	dp.SetTimestamp(ts)
	if removed {
		dp.SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
	} else {
		dp.SetIntValue(v)
	}
	attrs := dp.Attributes()
	attrs.EnsureCapacity(nattrs)
	return attrs
}

// OneHot is 1 when state is s, else 0.
func OneHot(state, s gateway.HealthState) int64 {
	if state == s {
		return 1
	}
	return 0
}
