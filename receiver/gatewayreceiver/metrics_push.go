package gatewayreceiver

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/traffic"
)

// The gateways' own pushed metrics (/v1/metrics, MetricsService): each
// ResourceMetrics of an export goes to its gateway's home (detect, or
// gateway.DetectMetrics under `auto`), which maps it to the gateway's
// Prometheus names (gateway.MetricsOf(kind).Map); what it writes goes to the
// metrics pipeline as sent, deltas as deltas (the cumulative processor
// accumulates them), cumulative as cumulative. Nothing is aggregated here:
// the points are the gateway's own.
//
//   - Kong under the otel profile is forwarded as sent: its metrics already
//     carry OpenTelemetry names (outcome passed).
//   - A ResourceMetrics no home recognises is refused (unknown_gateway):
//     the receiver serves gateways' names, and an OTLP receiver is the place
//     for anything else. An export of nothing else is answered 400 /
//     InvalidArgument; otherwise the export is a partial success.
//   - Under the kong profile a Kong node's push claims the families it
//     carries (gateway.KongClaims): for as long as it pushes them, its spans
//     and log entries are not counted into them (pushed metrics win).

// pushed is the pushed-metrics part of ingest.
type pushed struct {
	next consumer.Metrics // nil when the receiver is in no metrics pipeline
	// detect is the configured gateway kind (KindAuto: per ResourceMetrics).
	detect gateway.Kind
	// passKong forwards Kong's metrics as sent (the otel profile).
	passKong bool
	opts     gateway.MetricsOptions
	// claims are the Kong families nodes push (kong profile; nil otherwise).
	claims    *gateway.KongClaims
	telemetry *metadata.TelemetryBuilder
	// sets are the telemetry attribute sets by kind and outcome, made once.
	sets [][]attribute.Set
	now  func() time.Time
}

// Outcomes of a pushed point beyond the mapping's own (gateway.PointOutcome).
const (
	outcomePassed = iota + gateway.NumPointOutcomes
	outcomeUnknown
	pushedOutcomes
)

// pointOutcomeNames are the gateway.PointOutcome values' telemetry names.
var pointOutcomeNames = func() []string {
	var names []string
	for _, o := range gateway.PointOutcomes() {
		names = append(names, o.String())
	}
	return names
}()

// pushedOutcomeName names outcome o of the pushed-points counter.
func pushedOutcomeName(o int) string {
	switch o {
	case outcomePassed:
		return "passed"
	case outcomeUnknown:
		return "unknown_gateway"
	}
	return pointOutcomeNames[o]
}

// kongClaimTTL is how long a Kong node's push keeps its claim: three of
// Kong's default push intervals (metrics.push_interval, 60 s), so a late
// push never lets spans back in between two.
const kongClaimTTL = 3 * time.Minute

// kongClaimNodes bounds the Kong nodes whose claims are kept one by one
// (about 450 bytes each); past it, further nodes' claims hold for every
// node's spans (gateway.KongClaims).
const kongClaimNodes = 10_000

func newPushed(cfg *Config, tb *metadata.TelemetryBuilder) *pushed {
	p := &pushed{
		detect: cfg.detect(), passKong: cfg.Profile != traffic.ProfileKong, telemetry: tb, now: time.Now,
		opts: gateway.MetricsOptions{MaxPoints: cfg.Limits.MaxPushedPoints, MaxLabelBytes: cfg.Limits.MaxPushedLabelBytes,
			EnvoyPrefix: cfg.EnvoyStatsPrefix, EnvoyNamespaces: cfg.EnvoyStatsNamespaces},
	}
	if cfg.Profile == traffic.ProfileKong {
		p.claims = gateway.NewKongClaims(kongClaimTTL, kongClaimNodes)
	}
	gws := gateway.Gateways()
	p.sets = make([][]attribute.Set, len(gws)+1)
	for k := range p.sets {
		name := "unknown"
		if k > 0 && gws[k-1].Metrics != nil {
			name = gateway.Kind(k).String()
		}
		p.sets[k] = make([]attribute.Set, pushedOutcomes)
		for o := range pushedOutcomes {
			p.sets[k][o] = attribute.NewSet(attribute.String("gateway", name), attribute.String("outcome", pushedOutcomeName(o)))
		}
	}
	return p
}

// pushResult is what became of one export's points.
type pushResult struct {
	// rejected counts the points refused as the sender's error
	// (partial_success.rejected_data_points); message names the first.
	rejected int64
	message  string
	// unknownOnly: the export had points, all of no known gateway.
	unknownOnly bool
}

// pushTally counts one export's points by kind and outcome.
type pushTally struct {
	counts  [][pushedOutcomes]int64
	total   int64
	message string
}

// metrics maps every ResourceMetrics of md to its gateway's names and hands
// the result to the metrics pipeline; origin (the client's address) names
// a sender whose resource has no service.instance.id. The error is the
// pipeline's.
func (p *pushed) metrics(ctx context.Context, md pmetric.Metrics, origin string) (pushResult, error) {
	out := pmetric.NewMetrics()
	t := pushTally{counts: make([][pushedOutcomes]int64, len(p.sets))}
	opts := p.opts
	opts.Origin = origin
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		p.resource(out, rms.At(i), &opts, &t)
	}
	res := p.record(ctx, &t)
	if out.ResourceMetrics().Len() == 0 {
		return res, nil
	}
	return res, p.next.ConsumeMetrics(ctx, out)
}

// resource routes one ResourceMetrics to its gateway's home.
func (p *pushed) resource(out pmetric.Metrics, rm pmetric.ResourceMetrics, o *gateway.MetricsOptions, t *pushTally) {
	kind := p.detect
	if kind == gateway.KindAuto {
		kind = gateway.DetectMetrics(rm)
	}
	spec := gateway.MetricsOf(kind)
	n := int64(resourcePoints(rm))
	t.total += n
	switch {
	case spec == nil:
		t.counts[0][outcomeUnknown] += n
		if t.message == "" && n > 0 {
			t.message = unknownMessage(rm, kind)
		}
	case kind == gateway.KindKong && p.passKong:
		rm.CopyTo(out.ResourceMetrics().AppendEmpty())
		t.counts[kind][outcomePassed] += n
	default:
		var st gateway.MetricsStats
		spec.Map(out, rm, o, &st)
		for oc, c := range st.Points {
			t.counts[kind][oc] += int64(c)
		}
		if st.Err != nil && t.message == "" {
			t.message = st.Err.Error()
		}
		if n := st.Points[gateway.PointOverLimit]; n > 0 && t.message == "" {
			t.message = overLimitMessage(n, o.MaxPoints)
		}
		if kind == gateway.KindKong && p.claims != nil {
			p.claims.Claim(kongNode(rm, o.Origin), gateway.KongPushedFamilies(rm), p.now())
		}
	}
}

// kongNode is the node a Kong push is from: its service.instance.id (Kong's
// node id, as on its spans), else the sender's address, as the mapping
// names it.
func kongNode(rm pmetric.ResourceMetrics, origin string) string {
	if v, ok := rm.Resource().Attributes().Get("service.instance.id"); ok && v.Str() != "" {
		return v.Str()
	}
	return origin
}

// unknownMessage says why a ResourceMetrics was refused.
func unknownMessage(rm pmetric.ResourceMetrics, kind gateway.Kind) string {
	svc := ""
	if v, ok := rm.Resource().Attributes().Get("service.name"); ok {
		svc = gateway.CutLabel(v.AsString(), 128)
	}
	if kind != gateway.KindAuto {
		return "the " + kind.String() + " gateway (detect: " + kind.String() + ") has no pushed-metrics home; pushed metrics are taken from kong and envoy"
	}
	return "no gateway home recognises these metrics (resource service.name " + strconv.Quote(svc) +
		"): Kong's are under scope kong-internal, Envoy's stats sink's unscoped and named under Envoy's stats; set detect: kong or envoy, or send other metrics to an OTLP receiver"
}

// overLimitMessage says why n points were dropped beyond limit.
func overLimitMessage(n, limit int) string {
	return strconv.Itoa(n) + " points dropped beyond limits.max_pushed_points (" + strconv.Itoa(limit) +
		" series written per resource and push); send smaller pushes (Envoy's sink: max_data_points_per_request) or raise the limit"
}

// rejectedOutcomes are the outcomes that are the sender's error, refused
// in the partial success; the others (unmapped, no_route, zero) are what
// the gateway's own plugin would do with the point.
var rejectedOutcomes = []int{
	int(gateway.PointInvalid), int(gateway.PointLabelTooLong), int(gateway.PointTooManyLabels),
	int(gateway.PointConflict), int(gateway.PointOverLimit), outcomeUnknown,
}

// record counts t's points in the receiver's telemetry and sums what was
// refused.
func (p *pushed) record(ctx context.Context, t *pushTally) pushResult {
	var res pushResult
	for k := range t.counts {
		for o, n := range t.counts[k] {
			if n > 0 {
				p.telemetry.ReceiverGatewayPushedPoints.Add(ctx, n, metric.WithAttributeSet(p.sets[k][o]))
			}
		}
		for _, o := range rejectedOutcomes {
			res.rejected += t.counts[k][o]
		}
	}
	if res.rejected > 0 {
		res.message = t.message
	}
	res.unknownOnly = t.total > 0 && t.counts[0][outcomeUnknown] == t.total
	return res
}

// resourcePoints counts the data points of rm.
func resourcePoints(rm pmetric.ResourceMetrics) int {
	n := 0
	sms := rm.ScopeMetrics()
	for i := 0; i < sms.Len(); i++ {
		ms := sms.At(i).Metrics()
		for j := 0; j < ms.Len(); j++ {
			n += gateway.PointCount(ms.At(j))
		}
	}
	return n
}

// supersede marks the Kong events of nodes whose pushed metrics carry their
// families (kong profile): traffic leaves those families alone. The claim
// table is read once per node run of the batch.
func (p *pushed) supersede(events []gateway.Event) {
	if p == nil || p.claims == nil {
		return
	}
	now := p.now()
	var (
		last string
		set  gateway.KongFamilySet
		seen bool
	)
	for i := range events {
		e := &events[i]
		if e.Kind != gateway.KindKong {
			continue
		}
		if !seen || e.Instance != last {
			last, set, seen = e.Instance, p.claims.Superseded(e.Instance, kongSpanFamilies, now), true
		}
		e.Superseded = set
	}
}

// kongSpanFamilies are every family of Kong's plugin (the span and log
// paths feed the per-request ones).
const kongSpanFamilies = ^gateway.KongFamilySet(0)
