package gatewayreceiver // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver"

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

// The health metrics of each naming profile.
const (
	// otel: a one-hot gauge per (upstream, target, address) over the states
	// of the gateway's kind, and per-upstream counts by state.
	metricTargetHealth     = "gateway.upstream.target.health"
	metricTargetHealthDesc = "1 for the state an upstream target's address is in, 0 for the other states of its gateway."
	metricUpstreamTargets  = "gateway.upstream.targets"
	metricUpstreamUnit     = "{target}"
	metricUpstreamDesc     = "Upstream target addresses by state."
	attrUpstreamName       = "gateway.upstream.name"
	attrTarget             = "gateway.target"
	attrTargetAddress      = "gateway.target.address"
	attrState              = "state"

	// kong: kong_upstream_target_health{upstream,target,address,state,subsystem}
	// as Kong's Prometheus plugin prints it (gateway-formats.md §1c).
	metricKongHealth     = "kong_upstream_target_health"
	metricKongHealthDesc = "Health status of targets of upstream. States = healthchecks_off|healthy|unhealthy|dns_error, value is 1 when state is populated."
	kongSubsystem        = "http"

	// apisix: apisix_upstream_status{name,ip,port}, 1 for healthy and
	// mostly_healthy (gateway-formats.md §2c).
	metricAPISIXStatus     = "apisix_upstream_status"
	metricAPISIXStatusDesc = "Upstream status from health check"
)

// kongPrintedStates are the four series Kong prints per target, in its order.
var kongPrintedStates = [...]gateway.HealthState{gateway.HealthChecksOff, gateway.HealthHealthy, gateway.HealthUnhealthy, gateway.HealthDNSError}

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
	profile HealthProfile
	table   *healthTable
	next    func(context.Context, pmetric.Metrics) error
	logger  *zap.Logger
	tel     *metadata.TelemetryBuilder

	rows    []rowState
	ups     []upstreamState
	touched []*healthGateway
	failing bool // the last emission failed: log the next outcome change only
}

// emit drains the table (all: a full snapshot) and sends one batch.
func (em *emitter) emit(ctx context.Context, all bool) {
	var counts [gateway.NumHealthStates]int64
	em.rows, em.ups, counts = em.table.drain(em.rows[:0], em.ups[:0], all)
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
		out := em.pointsFor(md, r.e.up.gw)
		switch em.profile {
		case ProfileKong:
			appendKong(out.health, r, ts)
		case ProfileAPISIX:
			appendAPISIX(out.health, r, ts)
		default:
			appendOTel(out.health, r, ts)
		}
	}
	if em.profile == ProfileOTel {
		for i := range em.ups {
			u := &em.ups[i]
			appendCounts(em.pointsFor(md, u.u.gw).counts, u, ts)
		}
	}
	for _, g := range em.touched {
		g.out = nil
	}
	clear(em.touched)
	em.touched = em.touched[:0]
	return md
}

func (em *emitter) pointsFor(md pmetric.Metrics, g *healthGateway) *gatewayPoints {
	if g.out != nil {
		return g.out
	}
	rm := md.ResourceMetrics().AppendEmpty()
	res := rm.Resource().Attributes()
	res.PutStr("service.name", g.kind.String())
	res.PutStr("service.instance.id", g.instance)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(metadata.ScopeName)
	out := &gatewayPoints{}
	switch em.profile {
	case ProfileKong:
		out.health = newGauge(sm, metricKongHealth, "", metricKongHealthDesc)
	case ProfileAPISIX:
		out.health = newGauge(sm, metricAPISIXStatus, "", metricAPISIXStatusDesc)
	default:
		out.health = newGauge(sm, metricTargetHealth, "", metricTargetHealthDesc)
		out.counts = newGauge(sm, metricUpstreamTargets, metricUpstreamUnit, metricUpstreamDesc)
	}
	g.out = out
	em.touched = append(em.touched, g)
	return out
}

func newGauge(sm pmetric.ScopeMetrics, name, unit, desc string) pmetric.NumberDataPointSlice {
	m := sm.Metrics().AppendEmpty()
	m.SetName(name)
	m.SetUnit(unit)
	m.SetDescription(desc)
	return m.SetEmptyGauge().DataPoints()
}

// healthPoint appends one gauge healthPoint: value v, or no recorded value (the
// exporter then drops the series) for a removed row.
func healthPoint(dps pmetric.NumberDataPointSlice, ts pcommon.Timestamp, removed bool, v int64, nattrs int) pcommon.Map {
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

func oneHot(state, s gateway.HealthState) int64 {
	if state == s {
		return 1
	}
	return 0
}

func appendOTel(dps pmetric.NumberDataPointSlice, r *rowState, ts pcommon.Timestamp) {
	e := r.e
	for _, s := range e.up.gw.kind.States() {
		a := healthPoint(dps, ts, r.removed, oneHot(r.state, s), 4)
		a.PutStr(attrUpstreamName, e.key.upstream)
		a.PutStr(attrTarget, e.key.target)
		a.PutStr(attrTargetAddress, e.address)
		a.PutStr(attrState, s.String())
	}
}

func appendKong(dps pmetric.NumberDataPointSlice, r *rowState, ts pcommon.Timestamp) {
	e := r.e
	for _, s := range kongPrintedStates {
		a := healthPoint(dps, ts, r.removed, oneHot(r.state, s), 5)
		a.PutStr("upstream", e.key.upstream)
		a.PutStr("target", e.key.target)
		a.PutStr("address", e.address)
		a.PutStr("state", s.String())
		a.PutStr("subsystem", kongSubsystem)
	}
}

func appendAPISIX(dps pmetric.NumberDataPointSlice, r *rowState, ts pcommon.Timestamp) {
	e := r.e
	var v int64
	if r.state == gateway.HealthHealthy || r.state == gateway.HealthMostlyHealthy {
		v = 1
	}
	a := healthPoint(dps, ts, r.removed, v, 3)
	a.PutStr("name", e.key.upstream)
	a.PutStr("ip", e.key.ip)
	a.PutStr("port", e.key.port)
}

func appendCounts(dps pmetric.NumberDataPointSlice, u *upstreamState, ts pcommon.Timestamp) {
	for _, s := range u.u.gw.kind.States() {
		a := healthPoint(dps, ts, u.removed, u.counts[s], 2)
		a.PutStr(attrUpstreamName, u.u.name)
		a.PutStr(attrState, s.String())
	}
}
