package gateway

import (
	"math"
	"strconv"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Kong's pushed metrics: the opentelemetry plugin's `metrics` (Kong Gateway
// Enterprise 3.13+, §1e) mapped to the families of Kong's Prometheus plugin
// (kong_prom.go, §1c), so dashboard 7424 and alerts on kong_* read them.
//
// What is exact (§1e has the table):
//   - counters: kong_http_requests_total (Kong's points per method summed),
//     kong_bandwidth_bytes (a size histogram's sum), the AI counters;
//   - histograms: _count and _sum (seconds → ms); a bucket only where Kong
//     pushed a bound equal to one of the plugin's buckets. Kong 3.14 pushes
//     no bounds at all (count, sum, min, max), so only le="+Inf" can be
//     written: a bucket we cannot count exactly is left out, never guessed.
//   - gauges: as sent, relabelled.
//
// Kong's semantics are kept where they differ from a plain rename: a request
// point without a route is not counted (the plugin's log() returns early),
// nor is a bandwidth, cost or token total of 0 (the plugin adds only values
// > 0, so such a series never appears there).

// Kong's metric and attribute names (§1e).
const (
	kongAttrService     = "kong.service.name"
	kongAttrRoute       = "kong.route.name"
	kongAttrWorkspace   = "kong.workspace.name"
	kongAttrConsumer    = "kong.auth.consumer.name"
	kongAttrSource      = "kong.response.source"
	kongAttrStatus      = "http.response.status_code"
	kongAttrStatusOld   = "kong.response.status_code" // 3.13.0.0 (fixed in 3.13.0.1)
	kongAttrSubsystem   = "kong.subsystem"
	kongAttrGenProvider = "gen_ai.provider.name"
	kongAttrGenModel    = "gen_ai.request.model"
	kongAttrWorkspaceID = "kong.workspace.id"
)

// kongTake is how a rule reads a point.
type kongTake uint8

const (
	takeCounter   kongTake = iota // a monotonic sum → counter
	takeGauge                     // a gauge (or sum) → gauge
	takeHistogram                 // a histogram → histogram (ms when the unit is time)
	takeHistSum                   // a histogram's sum → counter (bandwidth); or a sum's value
	takeHistCount                 // a histogram's count → counter (AI requests)
)

// kongLabel is where one of a family's labels comes from.
type kongLabel struct {
	// keys are attribute keys, first present wins; none: the value is def.
	keys []string
	// def is the value when no key is present.
	def string
	// node: the value is the resource's service.instance.id (Kong's node id).
	node bool
	// conv maps the attribute's value to Kong's (response source, token
	// type); ok false drops the point as unmapped.
	conv func(string) (string, bool)
}

// kongRule maps one of Kong's OTel metrics to one Prometheus family.
type kongRule struct {
	fam    KongFam
	take   kongTake
	labels []kongLabel
	// route is the index of the route label: a point whose route is empty
	// is not counted (PointNoRoute); -1 for families without one.
	route int
	// skipZero: a value of 0 is not written (PointZero).
	skipZero bool
	// time: the histogram's unit is a duration, written in ms.
	time bool
}

func attr(keys ...string) kongLabel    { return kongLabel{keys: keys} }
func constLabel(v string) kongLabel    { return kongLabel{def: v} }
func attrOr(key, def string) kongLabel { return kongLabel{keys: []string{key}, def: def} }
func nodeLabel() kongLabel             { return kongLabel{node: true} }
func convLabel(key string, conv func(string) (string, bool)) kongLabel {
	return kongLabel{keys: []string{key}, conv: conv}
}

// kongSource: Kong's OTel `kong.response.source` is `upstream` or `kong`;
// its Prometheus plugin labels `service` when the response came from the
// service, `kong` otherwise (§1c, §1e).
func kongSource(v string) (string, bool) {
	if v == "upstream" || v == "service" {
		return "service", true
	}
	return "kong", true
}

// kongTokenType: gen_ai.token.type input/output/total are the plugin's
// prompt_tokens/completion_tokens/total_tokens; no other type is written.
func kongTokenType(v string) (string, bool) {
	switch v {
	case "input":
		return "prompt_tokens", true
	case "output":
		return "completion_tokens", true
	case "total":
		return "total_tokens", true
	}
	return "", false
}

var (
	kongServiceRouteWS  = []kongLabel{attr(kongAttrService), attr(kongAttrRoute), attr(kongAttrWorkspace)}
	kongAIRequestLabels = []kongLabel{attr(kongAttrGenProvider), attr(kongAttrGenModel),
		constLabel(""), constLabel(""), constLabel(""), constLabel(""), attr(kongAttrWorkspace)}
	kongBandwidthLabels = func(direction string) []kongLabel {
		return []kongLabel{attr(kongAttrService), attr(kongAttrRoute), constLabel(direction), attr(kongAttrWorkspace), attr(kongAttrConsumer)}
	}
	kongMCP = []kongLabel{attr(kongAttrService), attr(kongAttrRoute), attr("mcp.method.name"), attr(kongAttrWorkspace), attr("gen_ai.tool.name")}
)

// kongRules: Kong's OTel metric name → its Prometheus family (§1e's table).
// A name not here has no family in Kong's plugin (PointUnmapped).
var kongRules = map[string]*kongRule{
	"http.server.request.count": {fam: KongHTTPRequests, take: takeCounter, route: 1, labels: []kongLabel{
		attr(kongAttrService), attr(kongAttrRoute), attr(kongAttrStatus, kongAttrStatusOld),
		convLabel(kongAttrSource, kongSource), attr(kongAttrWorkspace), attr(kongAttrConsumer)}},
	"kong.latency.internal": {fam: KongKongLatency, take: takeHistogram, route: 1, time: true, labels: kongServiceRouteWS},
	"kong.latency.upstream": {fam: KongUpstreamLatency, take: takeHistogram, route: 1, time: true, labels: kongServiceRouteWS},
	"kong.latency.total":    {fam: KongRequestLatency, take: takeHistogram, route: 1, time: true, labels: kongServiceRouteWS},
	"http.server.request.size": {fam: KongBandwidth, take: takeHistSum, route: 1, skipZero: true,
		labels: kongBandwidthLabels("ingress")},
	"http.server.response.size": {fam: KongBandwidth, take: takeHistSum, route: 1, skipZero: true,
		labels: kongBandwidthLabels("egress")},
	"gen_ai.client.operation.duration": {fam: KongAIRequests, take: takeHistCount, route: -1, skipZero: true,
		labels: kongAIRequestLabels},
	"gen_ai.server.request.duration": {fam: KongAIProviderLatency, take: takeHistogram, route: -1, time: true,
		labels: kongAIRequestLabels},
	"kong.gen_ai.llm.cost": {fam: KongAICost, take: takeCounter, route: -1, skipZero: true, labels: []kongLabel{
		attr(kongAttrGenProvider), attr(kongAttrGenModel), attr("kong.gen_ai.cache.status"), attr("kong.gen_ai.vector_db"),
		attr("kong.gen_ai.embeddings.provider"), attr("kong.gen_ai.embeddings.model"), attr(kongAttrWorkspace)}},
	"gen_ai.client.token.usage": {fam: KongAITokens, take: takeHistSum, route: -1, skipZero: true, labels: []kongLabel{
		attr(kongAttrGenProvider), attr(kongAttrGenModel), constLabel(""), constLabel(""), constLabel(""), constLabel(""),
		convLabel("gen_ai.token.type", kongTokenType), attr(kongAttrWorkspace)}},
	"kong.upstream.target.status": {fam: KongUpstreamTargetHealth, take: takeGauge, route: -1, labels: []kongLabel{
		attr("kong.upstream.name"), attr("kong.target.address"), attr("server.address"), attr("kong.upstream.state"),
		attrOr(kongAttrSubsystem, "http")}},
	"kong.nginx.connection.count": {fam: KongNginxConnections, take: takeGauge, route: -1, labels: []kongLabel{
		nodeLabel(), attrOr(kongAttrSubsystem, "http"), attr("kong.connection.state")}},
	"kong.nginx.timer.count":      {fam: KongNginxTimers, take: takeGauge, route: -1, labels: []kongLabel{attr("kong.timer.state")}},
	"kong.db.connection.status":   {fam: KongDatastoreReachable, take: takeGauge, route: -1},
	"kong.cp.connection.status":   {fam: KongControlPlaneConnected, take: takeGauge, route: -1},
	"kong.dp.cluster_cert.expiry": {fam: KongDataPlaneCertExpiry, take: takeGauge, route: -1},
	"kong.memory.workers.lua_vm": {fam: KongMemoryWorkersLuaVMs, take: takeGauge, route: -1, labels: []kongLabel{
		nodeLabel(), attr("kong.pid"), attrOr(kongAttrSubsystem, "http")}},
	"kong.shared_dict.usage": {fam: KongMemorySharedDict, take: takeGauge, route: -1, labels: []kongLabel{
		nodeLabel(), attr("kong.shared_dict.name"), attrOr(kongAttrSubsystem, "http")}},
	"kong.shared_dict.size": {fam: KongMemorySharedDictTotal, take: takeGauge, route: -1, labels: []kongLabel{
		nodeLabel(), attr("kong.shared_dict.name"), attrOr(kongAttrSubsystem, "http")}},
	"kong.gen_ai.mcp.response.size": {fam: KongAIMCPResponseBodySize, take: takeHistogram, route: -1, labels: kongMCP},
	"mcp.server.operation.duration": {fam: KongAIMCPLatency, take: takeHistogram, route: -1, time: true, labels: kongMCP},
	"kong.gen_ai.mcp.request.error.count": {fam: KongAIMCPErrors, take: takeCounter, route: -1, labels: []kongLabel{
		attr(kongAttrService), attr(kongAttrRoute), attr("error.type"), attr("mcp.method.name"), attr(kongAttrWorkspace), attr("gen_ai.tool.name")}},
}

// KongMetricFamily reports the Prometheus family Kong's OTel metric name
// maps to (false for a metric with none).
func KongMetricFamily(otelName string) (KongFam, bool) {
	r, ok := kongRules[otelName]
	if !ok {
		return 0, false
	}
	return r.fam, true
}

// kongSeries is one output series of a mapping call, accumulated from its
// points before it is written.
type kongSeries struct {
	fam    KongFam
	delta  bool
	labels [kongMaxLabels]string
	start  pcommon.Timestamp
	ts     pcommon.Timestamp
	// number
	ival   int64
	fval   float64
	double bool
	// histogram
	count  uint64
	sum    float64
	hasSum bool
	// known has bit i set when cum[i] is the exact count ≤ Bounds[i] of the
	// family (for families with Kong's own buckets).
	known uint32
	cum   [kongMaxBounds]uint64
	// bounds/counts: the pushed buckets, in the family's unit, of a family
	// without Kong buckets of its own (MCP: written as sent).
	bounds []float64
	counts []uint64
	// next links the family's series in the order they were created.
	next int32
}

// kongScratch is one mapping call's memory, pooled.
type kongScratch struct {
	series []kongSeries
	index  seriesIndex
	head   [kongFamCount]int32
	tail   [kongFamCount]int32
	vals   [kongMaxLabels]string
}

var kongScratchPool = sync.Pool{New: func() any { return new(kongScratch) }}

var kongMetrics = MetricsSpec{Detect: detectKongMetrics, Map: MapKongMetrics}

// detectKongMetrics: Kong's plugin exports under its `kong-internal` scope
// (§1e, the same scope as its spans).
func detectKongMetrics(rm pmetric.ResourceMetrics) bool {
	sms := rm.ScopeMetrics()
	for i := 0; i < sms.Len(); i++ {
		if sms.At(i).Scope().Name() == kongScope {
			return true
		}
	}
	return false
}

// MapKongMetrics appends rm, Kong's pushed metrics, to dst under the names,
// labels, label order and buckets of Kong's Prometheus plugin. The resource
// is kept (service.instance.id is Kong's node id: one node's series never
// merge with another's); every point of rm is counted in st.
func MapKongMetrics(dst pmetric.Metrics, rm pmetric.ResourceMetrics, o *MetricsOptions, st *MetricsStats) {
	sc := kongScratchPool.Get().(*kongScratch)
	defer kongScratchPool.Put(sc)
	sc.series = sc.series[:0]
	sc.index.reset()
	for i := range sc.head {
		sc.head[i], sc.tail[i] = -1, -1
	}
	m := kongMapper{sc: sc, o: o, st: st, node: resourceStr(rm, "service.instance.id"),
		maxPoints: o.maxPoints(), maxLabel: o.maxLabelBytes()}
	if m.node == "" {
		m.node = o.origin()
	}
	sms := rm.ScopeMetrics()
	for i := 0; i < sms.Len(); i++ {
		ms := sms.At(i).Metrics()
		for j := 0; j < ms.Len(); j++ {
			m.metric(ms.At(j))
		}
	}
	if len(sc.series) > 0 {
		out := outResource(dst, rm, o.origin(), "kong")
		m.write(out.Metrics())
	}
	// The pooled scratch keeps no label value of rm alive.
	clear(sc.series)
	clear(sc.vals[:])
}

func (o *MetricsOptions) origin() string {
	if o == nil {
		return ""
	}
	return o.Origin
}

type kongMapper struct {
	sc        *kongScratch
	o         *MetricsOptions
	st        *MetricsStats
	node      string
	maxPoints int
	maxLabel  int
}

// metric maps every point of one of Kong's metrics.
func (m *kongMapper) metric(metric pmetric.Metric) {
	name := metric.Name()
	r, ok := kongRules[name]
	if !ok {
		m.st.Points[PointUnmapped] += PointCount(metric)
		return
	}
	scale := 1.0
	if r.time {
		var ok bool
		if scale, ok = msPerUnit(metric.Unit()); !ok {
			unit := strconv.Quote(CutLabel(metric.Unit(), 32))
			for range PointCount(metric) {
				m.st.drop(PointInvalid, name, "unit ", unit, " is not a duration")
			}
			return
		}
	}
	switch metric.Type() {
	case pmetric.MetricTypeSum:
		s := metric.Sum()
		if r.take == takeCounter && !s.IsMonotonic() || r.take == takeHistogram || r.take == takeHistCount {
			m.dropAll(name, s.DataPoints().Len(), metric, r)
			return
		}
		delta := s.AggregationTemporality() == pmetric.AggregationTemporalityDelta && r.take != takeGauge
		dps := s.DataPoints()
		for k := 0; k < dps.Len(); k++ {
			m.number(r, name, dps.At(k), delta)
		}
	case pmetric.MetricTypeGauge:
		if r.take != takeGauge {
			m.dropAll(name, metric.Gauge().DataPoints().Len(), metric, r)
			return
		}
		dps := metric.Gauge().DataPoints()
		for k := 0; k < dps.Len(); k++ {
			m.number(r, name, dps.At(k), false)
		}
	case pmetric.MetricTypeHistogram:
		h := metric.Histogram()
		if r.take == takeCounter || r.take == takeGauge {
			m.dropAll(name, h.DataPoints().Len(), metric, r)
			return
		}
		delta := h.AggregationTemporality() == pmetric.AggregationTemporalityDelta
		dps := h.DataPoints()
		for k := 0; k < dps.Len(); k++ {
			m.histogram(r, name, dps.At(k), delta, scale)
		}
	default:
		m.dropAll(name, PointCount(metric), metric, r)
	}
}

// dropAll drops the n points of a metric of the wrong type.
func (m *kongMapper) dropAll(name string, n int, metric pmetric.Metric, r *kongRule) {
	for range n {
		m.st.drop(PointInvalid, name, "a ", typeName(metric), " where Kong sends a ", wantName(r.take))
	}
}

// labels fills sc.vals from a point's attributes in the family's order; the
// outcome is PointMapped when the point is to be written.
func (m *kongMapper) labels(r *kongRule, name string, attrs pcommon.Map) PointOutcome {
	if attrs.Len() > MaxPushLabels {
		m.st.drop(PointTooManyLabels, name, "more than ", intString(MaxPushLabels), " attributes")
		return PointTooManyLabels
	}
	vals := &m.sc.vals
	for i := range r.labels {
		l := &r.labels[i]
		v := l.def
		if l.node {
			v = m.node
		}
		for _, k := range l.keys {
			a, ok := attrs.Get(k)
			if !ok {
				continue
			}
			s, ok := attrString(a)
			if !ok {
				m.st.drop(PointTooManyLabels, name, "attribute ", k, " is a ", a.Type().String())
				return PointTooManyLabels
			}
			v = s
			break
		}
		if l.conv != nil {
			var ok bool
			if v, ok = l.conv(v); !ok {
				m.st.Points[PointUnmapped]++
				return PointUnmapped
			}
		}
		if len(v) > m.maxLabel {
			m.st.drop(PointLabelTooLong, name, "label ", KongFamilies[r.fam].Labels[i], " longer than ", intString(int64(m.maxLabel)), " bytes")
			return PointLabelTooLong
		}
		vals[i] = v
	}
	if r.route >= 0 && vals[r.route] == "" {
		m.st.Points[PointNoRoute]++
		return PointNoRoute
	}
	return PointMapped
}

// series finds or creates the output series of the labels in sc.vals; -1
// when the point limit is reached (counted).
func (m *kongMapper) series(r *kongRule, name string, delta bool, start, ts pcommon.Timestamp) (*kongSeries, bool) {
	sc := m.sc
	n := len(r.labels)
	x := &sc.index
	x.hash()
	x.str(KongFamilies[r.fam].Name)
	for i := range n {
		x.str(sc.vals[i])
	}
	h := x.sum()
	i := x.find(h, func(i int32) bool {
		s := &sc.series[i]
		if s.fam != r.fam {
			return false
		}
		for j := range n {
			if s.labels[j] != sc.vals[j] {
				return false
			}
		}
		return true
	})
	if i >= 0 {
		s := &sc.series[i]
		if s.delta != delta {
			m.st.drop(PointConflict, name, "delta and cumulative points for one series")
			return nil, false
		}
		s.start = minTime(s.start, start)
		s.ts = max(s.ts, ts)
		return s, true
	}
	if len(sc.series) >= m.maxPoints {
		m.st.Points[PointOverLimit]++
		return nil, false
	}
	i = x.add(h)
	sc.series = append(sc.series, kongSeries{fam: r.fam, delta: delta, start: start, ts: ts, next: -1})
	s := &sc.series[i]
	copy(s.labels[:n], sc.vals[:n])
	if sc.tail[r.fam] >= 0 {
		sc.series[sc.tail[r.fam]].next = i
	} else {
		sc.head[r.fam] = i
	}
	sc.tail[r.fam] = i
	return s, false
}

// minTime is the earlier of two start times, 0 (unknown) losing to any.
func minTime(a, b pcommon.Timestamp) pcommon.Timestamp {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// number maps a sum or gauge point.
func (m *kongMapper) number(r *kongRule, name string, p pmetric.NumberDataPoint, delta bool) {
	i, f, isDouble, ok := numberValue(p)
	if !ok {
		m.st.drop(PointInvalid, name, "a point without a finite value")
		return
	}
	if r.take != takeGauge && (i < 0 || f < 0) {
		m.st.drop(PointInvalid, name, "a negative count")
		return
	}
	if r.skipZero && i == 0 && f == 0 {
		m.st.Points[PointZero]++
		return
	}
	if m.labels(r, name, p.Attributes()) != PointMapped {
		return
	}
	s, merged := m.series(r, name, delta, p.StartTimestamp(), p.Timestamp())
	if s == nil {
		return
	}
	m.st.Points[PointMapped]++
	if r.take == takeGauge {
		// One series, two points (attributes Kong's family does not label):
		// the latest wins, as a scrape would show it.
		if merged && p.Timestamp() < s.ts {
			return
		}
		s.ival, s.fval, s.double = i, f, isDouble
		return
	}
	s.double = s.double || isDouble || KongFamilies[r.fam].Double
	s.ival += i
	s.fval += f
}

// histogram maps a histogram point: to a histogram, or to a counter of its
// count or sum.
func (m *kongMapper) histogram(r *kongRule, name string, p pmetric.HistogramDataPoint, delta bool, scale float64) {
	if why := checkHistogram(p); why != "" {
		m.st.drop(PointInvalid, name, why)
		return
	}
	switch r.take {
	case takeHistSum:
		if !p.HasSum() || p.Sum() < 0 {
			m.st.drop(PointInvalid, name, "a size histogram without a sum, or a negative one")
			return
		}
		if r.skipZero && p.Sum() == 0 {
			m.st.Points[PointZero]++
			return
		}
	case takeHistCount:
		if r.skipZero && p.Count() == 0 {
			m.st.Points[PointZero]++
			return
		}
	}
	if m.labels(r, name, p.Attributes()) != PointMapped {
		return
	}
	s, merged := m.series(r, name, delta, p.StartTimestamp(), p.Timestamp())
	if s == nil {
		return
	}
	switch r.take {
	case takeHistSum:
		m.st.Points[PointMapped]++
		s.double = true
		s.fval += p.Sum()
		return
	case takeHistCount:
		m.st.Points[PointMapped]++
		s.ival += int64(min(p.Count(), math.MaxInt64))
		return
	}
	fam := &KongFamilies[r.fam]
	if len(fam.Bounds) == 0 {
		// No buckets of Kong's own known (MCP): the pushed ones, scaled.
		if !m.passBuckets(s, merged, name, p, scale) {
			return
		}
	} else {
		known, cum := projectBounds(p, scale, fam.Bounds)
		if merged {
			known &= s.known
			for b := range fam.Bounds {
				s.cum[b] += cum[b]
			}
		} else {
			s.cum = cum
		}
		s.known = known
	}
	m.st.Points[PointMapped]++
	s.count += p.Count()
	if p.HasSum() {
		s.sum += p.Sum() * scale
		s.hasSum = !merged || s.hasSum
	} else {
		s.hasSum = false
	}
}

// passBuckets merges p's own buckets into s (a family without Kong
// buckets); false (counted) when they differ from the series' bounds.
func (m *kongMapper) passBuckets(s *kongSeries, merged bool, name string, p pmetric.HistogramDataPoint, scale float64) bool {
	bounds, counts := p.ExplicitBounds(), p.BucketCounts()
	if !merged {
		s.bounds = s.bounds[:0]
		for i := 0; i < bounds.Len(); i++ {
			s.bounds = append(s.bounds, bounds.At(i)*scale)
		}
		s.counts = append(s.counts[:0], counts.AsRaw()...)
		return true
	}
	if len(s.bounds) != bounds.Len() || len(s.counts) != counts.Len() {
		m.st.drop(PointConflict, name, "points of one series with different buckets")
		return false
	}
	for i := 0; i < bounds.Len(); i++ {
		if !sameBound(s.bounds[i], bounds.At(i)*scale) {
			m.st.drop(PointConflict, name, "points of one series with different buckets")
			return false
		}
	}
	for i := 0; i < counts.Len(); i++ {
		s.counts[i] += counts.At(i)
	}
	return true
}

// projectBounds returns, for each of Kong's bounds, the exact cumulative
// count of p at it (bit b of known set), when p has a bound equal to it
// after scaling; a Kong bound that falls between p's bounds has no exact
// count and stays unknown.
func projectBounds(p pmetric.HistogramDataPoint, scale float64, kong []float64) (known uint32, cum [kongMaxBounds]uint64) {
	bounds, counts := p.ExplicitBounds(), p.BucketCounts()
	var acc uint64
	j := 0
	for i := 0; i < bounds.Len() && j < len(kong); i++ {
		acc += counts.At(i)
		b := bounds.At(i) * scale
		for j < len(kong) && kong[j] < b && !sameBound(kong[j], b) {
			j++
		}
		if j < len(kong) && sameBound(kong[j], b) {
			known |= 1 << j
			cum[j] = acc
			j++
		}
	}
	return known, cum
}

// sameBound compares bounds after a unit change (0.025 s × 1000 is not
// exactly 25): equal within a relative 1e-9.
func sameBound(a, b float64) bool {
	d := math.Abs(a - b)
	return d <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) || d == 0
}

// msPerUnit is the factor from a duration unit to ms. Kong documents its
// durations in s; a metric without a unit is taken as documented.
func msPerUnit(unit string) (float64, bool) {
	switch unit {
	case "s", "":
		return 1000, true
	case "ms":
		return 1, true
	case "us":
		return 1e-3, true
	case "ns":
		return 1e-6, true
	}
	return 0, false
}

// write renders the accumulated series into ms, family by family in
// KongFamilies order, each family's series in the order first seen.
func (m *kongMapper) write(ms pmetric.MetricSlice) {
	sc := m.sc
	for f := range KongFam(kongFamCount) {
		head := sc.head[f]
		if head < 0 {
			continue
		}
		fam := &KongFamilies[f]
		// One metric per temporality: a family is delta or cumulative as
		// Kong sends it (the conflict check keeps each series one or the
		// other).
		for _, delta := range [2]bool{false, true} {
			var metric pmetric.Metric
			made := false
			for i := head; i >= 0; i = sc.series[i].next {
				s := &sc.series[i]
				if s.delta != delta {
					continue
				}
				if !made {
					metric = ms.AppendEmpty()
					metric.SetName(fam.Name)
					metric.SetDescription(fam.Help)
					made = true
					switch fam.Type {
					case KongCounter:
						sum := metric.SetEmptySum()
						sum.SetIsMonotonic(true)
						sum.SetAggregationTemporality(temporality(delta))
					case KongGauge:
						metric.SetEmptyGauge()
					case KongHistogram:
						metric.SetEmptyHistogram().SetAggregationTemporality(temporality(delta))
					}
				}
				m.writeSeries(metric, fam, s)
			}
		}
	}
}

func temporality(delta bool) pmetric.AggregationTemporality {
	if delta {
		return pmetric.AggregationTemporalityDelta
	}
	return pmetric.AggregationTemporalityCumulative
}

func (m *kongMapper) writeSeries(metric pmetric.Metric, fam *KongFamily, s *kongSeries) {
	m.st.Written++
	var attrs pcommon.Map
	switch fam.Type {
	case KongCounter, KongGauge:
		var p pmetric.NumberDataPoint
		if fam.Type == KongCounter {
			p = metric.Sum().DataPoints().AppendEmpty()
		} else {
			p = metric.Gauge().DataPoints().AppendEmpty()
		}
		p.SetStartTimestamp(s.start)
		p.SetTimestamp(s.ts)
		if s.double {
			p.SetDoubleValue(s.fval + float64(s.ival))
		} else {
			p.SetIntValue(s.ival)
		}
		attrs = p.Attributes()
	case KongHistogram:
		p := metric.Histogram().DataPoints().AppendEmpty()
		p.SetStartTimestamp(s.start)
		p.SetTimestamp(s.ts)
		p.SetCount(s.count)
		if s.hasSum {
			p.SetSum(s.sum)
		}
		if len(fam.Bounds) > 0 {
			full := uint32(1)<<len(fam.Bounds) - 1
			if s.known != full {
				m.st.Coarse++
			}
			bounds, counts := p.ExplicitBounds(), p.BucketCounts()
			var prev uint64
			for b := range fam.Bounds {
				if s.known&(1<<b) == 0 {
					continue
				}
				bounds.Append(fam.Bounds[b])
				counts.Append(s.cum[b] - prev)
				prev = s.cum[b]
			}
			counts.Append(s.count - prev)
		} else {
			p.ExplicitBounds().FromRaw(s.bounds)
			if len(s.counts) == 0 {
				p.BucketCounts().Append(s.count)
			} else {
				p.BucketCounts().FromRaw(s.counts)
			}
		}
		attrs = p.Attributes()
	}
	n := len(fam.Labels)
	attrs.EnsureCapacity(n)
	for i := range n {
		attrs.PutStr(fam.Labels[i], s.labels[i])
	}
}

func typeName(m pmetric.Metric) string {
	switch m.Type() {
	case pmetric.MetricTypeSum:
		if m.Sum().IsMonotonic() {
			return "monotonic sum"
		}
		return "non-monotonic sum"
	case pmetric.MetricTypeGauge:
		return "gauge"
	case pmetric.MetricTypeHistogram:
		return "histogram"
	case pmetric.MetricTypeExponentialHistogram:
		return "exponential histogram"
	case pmetric.MetricTypeSummary:
		return "summary"
	}
	return "metric without data"
}

func wantName(t kongTake) string {
	switch t {
	case takeCounter:
		return "monotonic sum"
	case takeGauge:
		return "gauge"
	case takeHistSum:
		return "histogram (or sum)"
	}
	return "histogram"
}
