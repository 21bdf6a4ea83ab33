package gateway

import (
	"strings"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Envoy's pushed metrics: the OpenTelemetry stats sink
// (envoy.stat_sinks.open_telemetry, §3c) mapped to the series Envoy's own
// /stats/prometheus writes (§3d): the same family names (envoy_ + the
// tag-extracted name, sanitized), the same labels (the tags, names
// sanitized), the same buckets; counters stay without _total.
//
// The sink sends what /stats/prometheus?usedonly shows: only used counters,
// gauges and histograms (and every per-endpoint stat), never text readouts.
// Its defaults (emit_tags_as_attributes and use_tag_extracted_name true) are
// what makes the mapping exact; §3c says what each other setting costs.

var envoyMetrics = MetricsSpec{Detect: detectEnvoyMetrics, Map: MapEnvoyMetrics}

// envoyRoots are first name components only Envoy's own stats use (its
// statistics overview and the extensions' docs): enough to tell a sink's
// push, whose scope is empty, from another unscoped sender. `http.` is left
// out: OpenTelemetry's http.server.* / http.client.* start so too.
var envoyRoots = []string{
	"cluster", "cluster_manager", "http1", "http2", "http3", "listener", "listener_manager",
	"server", "runtime", "control_plane", "vhost", "sds", "filesystem", "main_thread",
	"workers", "dns_cache", "overload", "tls_inspector", "wasm",
}

// detectEnvoyMetrics: every scope empty (the sink sets none), and among the
// first metrics one named under an Envoy root or a point tagged with an
// envoy.* tag (Envoy's tag extractors name theirs so: envoy.cluster_name,
// envoy.http_conn_manager_prefix…). Behind the sink's `prefix` only the tags
// tell; `detect: envoy` needs neither.
func detectEnvoyMetrics(rm pmetric.ResourceMetrics) bool {
	sms := rm.ScopeMetrics()
	if sms.Len() == 0 {
		return false
	}
	for i := 0; i < sms.Len(); i++ {
		if sms.At(i).Scope().Name() != "" {
			return false
		}
	}
	ms := sms.At(0).Metrics()
	for i := 0; i < ms.Len() && i < 8; i++ {
		m := ms.At(i)
		name := m.Name()
		if envoyRooted(name) || envoyTagged(m) {
			return true
		}
	}
	return false
}

// envoyTagged reports whether the metric's first point has an envoy.* tag.
func envoyTagged(m pmetric.Metric) bool {
	var attrs pcommon.Map
	switch m.Type() {
	case pmetric.MetricTypeSum:
		if m.Sum().DataPoints().Len() == 0 {
			return false
		}
		attrs = m.Sum().DataPoints().At(0).Attributes()
	case pmetric.MetricTypeGauge:
		if m.Gauge().DataPoints().Len() == 0 {
			return false
		}
		attrs = m.Gauge().DataPoints().At(0).Attributes()
	case pmetric.MetricTypeHistogram:
		if m.Histogram().DataPoints().Len() == 0 {
			return false
		}
		attrs = m.Histogram().DataPoints().At(0).Attributes()
	default:
		return false
	}
	for k := range attrs.All() {
		if strings.HasPrefix(k, "envoy.") {
			return true
		}
	}
	return false
}

func envoyRooted(name string) bool {
	for _, r := range envoyRoots {
		if hasPrefixDot(name, r) {
			return true
		}
	}
	return false
}

// envoyScratch is one mapping call's memory, pooled; its name caches warm
// up across the calls that reuse it.
type envoyScratch struct {
	index seriesIndex
	// entries[i] is the output point of series entry i; labels holds the
	// label pairs of every entry, entries[i].labels indexing into it.
	entries []envoyEntry
	labels  []string
	// metrics maps an output name to its output metric (index into out).
	metrics map[string]int32
	kinds   []envoyKind
	// names and keys cache sanitized names: Envoy repeats a few thousand
	// names and a dozen tag names in every push.
	names map[string]string
	keys  map[string]string
}

type envoyEntry struct {
	metric     int32
	point      int32
	labelStart int32
	labelEnd   int32
}

// envoyKind is what an output metric holds, so a later stat of the same
// name but another type or temporality is a conflict, not a mix.
type envoyKind struct {
	typ   pmetric.MetricType
	delta bool
	mono  bool
}

var envoyScratchPool = sync.Pool{New: func() any {
	return &envoyScratch{metrics: map[string]int32{}, names: map[string]string{}, keys: map[string]string{}}
}}

// envoyCacheMax bounds each name cache (entries); a name longer than
// envoyCacheName is sanitized without being cached.
const (
	envoyCacheMax  = 8192
	envoyCacheName = 256
)

// MapEnvoyMetrics appends rm, one push of Envoy's stats sink, to dst as the
// series /stats/prometheus would write for the same stats. The resource is
// kept; without service.instance.id it gets o.Origin (two Envoys' series
// never merge), without service.name "envoy". Every point is counted in st.
func MapEnvoyMetrics(dst pmetric.Metrics, rm pmetric.ResourceMetrics, o *MetricsOptions, st *MetricsStats) {
	sc := envoyScratchPool.Get().(*envoyScratch)
	defer envoyScratchPool.Put(sc)
	sc.index.reset()
	sc.entries, sc.labels, sc.kinds = sc.entries[:0], sc.labels[:0], sc.kinds[:0]
	clear(sc.metrics)
	m := envoyMapper{sc: sc, o: o, st: st, maxPoints: o.maxPoints(), maxLabel: o.maxLabelBytes()}
	var out pmetric.MetricSlice
	made := false
	sms := rm.ScopeMetrics()
	for i := 0; i < sms.Len(); i++ {
		ms := sms.At(i).Metrics()
		for j := 0; j < ms.Len(); j++ {
			metric := ms.At(j)
			if !made {
				out = outResource(dst, rm, o.origin(), "envoy").Metrics()
				made = true
			}
			m.metric(out, metric)
		}
	}
	if made {
		// A family whose every point was dropped leaves no empty metric.
		out.RemoveIf(func(x pmetric.Metric) bool { return PointCount(x) == 0 })
		trimEmpty(dst)
	}
	// The pooled scratch keeps no label value of rm alive (the name caches
	// keep names, bounded).
	clear(sc.labels)
}

type envoyMapper struct {
	sc        *envoyScratch
	o         *MetricsOptions
	st        *MetricsStats
	maxPoints int
	maxLabel  int
}

// promName is the family name /stats/prometheus gives a stat name: the
// sink's prefix stripped, a registered custom namespace stripped (and no
// envoy_), else envoy_ + the name; every byte outside [a-zA-Z0-9_] becomes
// _ (PrometheusStatsFormatter::metricName). ok is false for a custom
// namespace's name Envoy refuses (empty, or starting with a digit).
func (m *envoyMapper) promName(name string) (string, bool) {
	if p := m.o.envoyPrefix(); p != "" && hasPrefixDot(name, p) {
		name = name[len(p)+1:]
	}
	for _, ns := range m.o.envoyNamespaces() {
		if hasPrefixDot(name, ns) {
			s := sanitize(name[len(ns)+1:], "")
			if s == "" || s[0] >= '0' && s[0] <= '9' {
				return "", false
			}
			return s, true
		}
	}
	if s, ok := m.sc.names[name]; ok {
		return s, true
	}
	s := sanitize(name, "envoy_")
	if len(name) <= envoyCacheName {
		if len(m.sc.names) >= envoyCacheMax {
			clear(m.sc.names)
		}
		m.sc.names[name] = s
	}
	return s, true
}

// labelName is a tag name as /stats/prometheus writes it.
func (m *envoyMapper) labelName(key string) string {
	if s, ok := m.sc.keys[key]; ok {
		return s
	}
	s := sanitize(key, "")
	if len(key) <= envoyCacheName {
		if len(m.sc.keys) >= envoyCacheMax {
			clear(m.sc.keys)
		}
		m.sc.keys[key] = s
	}
	return s
}

func (o *MetricsOptions) envoyPrefix() string {
	if o == nil {
		return ""
	}
	return o.EnvoyPrefix
}

func (o *MetricsOptions) envoyNamespaces() []string {
	if o == nil {
		return nil
	}
	return o.EnvoyNamespaces
}

// sanitize returns prefix + s with every byte outside [a-zA-Z0-9_]
// replaced by _; s itself (no copy) when it needs nothing.
func sanitize(s, prefix string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if !promNameByte(s[i]) {
			clean = false
			break
		}
	}
	if clean && prefix == "" {
		return s
	}
	b := make([]byte, len(prefix)+len(s))
	copy(b, prefix)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !promNameByte(c) {
			c = '_'
		}
		b[len(prefix)+i] = c
	}
	return string(b)
}

func promNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// metric maps every point of one stat metric into out.
func (m *envoyMapper) metric(out pmetric.MetricSlice, metric pmetric.Metric) {
	name := metric.Name()
	n := PointCount(metric)
	if len(name) == 0 || len(name) > maxPushNameBytes {
		for range n {
			m.st.drop(PointInvalid, name, "name empty or longer than ", intString(maxPushNameBytes), " bytes")
		}
		return
	}
	prom, ok := m.promName(name)
	if !ok {
		for range n {
			m.st.drop(PointInvalid, name, "a custom-namespace name Envoy does not expose (empty, or a digit first)")
		}
		return
	}
	var kind envoyKind
	switch metric.Type() {
	case pmetric.MetricTypeSum:
		s := metric.Sum()
		kind = envoyKind{typ: pmetric.MetricTypeSum, delta: s.AggregationTemporality() == pmetric.AggregationTemporalityDelta, mono: s.IsMonotonic()}
	case pmetric.MetricTypeGauge:
		kind = envoyKind{typ: pmetric.MetricTypeGauge}
	case pmetric.MetricTypeHistogram:
		kind = envoyKind{typ: pmetric.MetricTypeHistogram, delta: metric.Histogram().AggregationTemporality() == pmetric.AggregationTemporalityDelta}
	default:
		tn := typeName(metric)
		for range n {
			m.st.drop(PointInvalid, name, "a ", tn, ": Envoy's sink sends sums, gauges and histograms")
		}
		return
	}
	mi, ok := m.outMetric(out, prom, kind, metric)
	if !ok {
		for range n {
			m.st.drop(PointConflict, name, "family ", prom, " already has points of another type or temporality")
		}
		return
	}
	dst := out.At(int(mi))
	switch kind.typ {
	case pmetric.MetricTypeSum:
		dps := metric.Sum().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			m.number(dst, mi, name, dps.At(i), kind.mono)
		}
	case pmetric.MetricTypeGauge:
		dps := metric.Gauge().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			m.number(dst, mi, name, dps.At(i), false)
		}
	case pmetric.MetricTypeHistogram:
		dps := metric.Histogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			m.histogram(dst, mi, name, dps.At(i))
		}
	}
}

// outMetric finds or creates the output metric of a family; false when the
// family exists with another kind.
func (m *envoyMapper) outMetric(out pmetric.MetricSlice, prom string, kind envoyKind, src pmetric.Metric) (int32, bool) {
	if i, ok := m.sc.metrics[prom]; ok {
		return i, m.sc.kinds[i] == kind
	}
	i := int32(out.Len())
	dst := out.AppendEmpty()
	dst.SetName(prom)
	dst.SetDescription(src.Description())
	switch kind.typ {
	case pmetric.MetricTypeSum:
		s := dst.SetEmptySum()
		s.SetIsMonotonic(kind.mono)
		s.SetAggregationTemporality(temporality(kind.delta))
	case pmetric.MetricTypeGauge:
		dst.SetEmptyGauge()
	case pmetric.MetricTypeHistogram:
		dst.SetEmptyHistogram().SetAggregationTemporality(temporality(kind.delta))
	}
	m.sc.metrics[prom] = i
	m.sc.kinds = append(m.sc.kinds, kind)
	return i, true
}

// labelsOf appends the point's labels (sanitized name, value) to sc.labels
// and returns where they start; the outcome is PointMapped when the point
// is to be written.
func (m *envoyMapper) labelsOf(name string, attrs pcommon.Map) (int32, PointOutcome) {
	start := int32(len(m.sc.labels))
	if attrs.Len() > MaxPushLabels {
		m.st.drop(PointTooManyLabels, name, "more than ", intString(MaxPushLabels), " attributes")
		return start, PointTooManyLabels
	}
	outcome := PointMapped
	attrs.Range(func(k string, v pcommon.Value) bool {
		s, ok := attrString(v)
		if !ok {
			m.st.drop(PointTooManyLabels, name, "attribute ", k, " is a ", v.Type().String())
			outcome = PointTooManyLabels
			return false
		}
		if len(s) > m.maxLabel {
			m.st.drop(PointLabelTooLong, name, "attribute ", k, " longer than ", intString(int64(m.maxLabel)), " bytes")
			outcome = PointLabelTooLong
			return false
		}
		if len(k) == 0 || len(k) > envoyCacheName {
			m.st.drop(PointTooManyLabels, name, "an attribute name empty or longer than ", intString(envoyCacheName), " bytes")
			outcome = PointTooManyLabels
			return false
		}
		m.sc.labels = append(m.sc.labels, m.labelName(k), s)
		return true
	})
	if outcome != PointMapped {
		m.sc.labels = m.sc.labels[:start]
	}
	return start, outcome
}

// series finds the point of the series being built (merge) or reports that
// it is new; -1 (counted) past the point limit.
func (m *envoyMapper) series(mi int32, start int32) (entry int32, isNew bool, ok bool) {
	sc := m.sc
	x := &sc.index
	x.hash()
	x.num(uint32(mi))
	lbl := sc.labels[start:]
	for _, s := range lbl {
		x.str(s)
	}
	h := x.sum()
	i := x.find(h, func(i int32) bool {
		e := &sc.entries[i]
		if e.metric != mi || int(e.labelEnd-e.labelStart) != len(lbl) {
			return false
		}
		for j, s := range sc.labels[e.labelStart:e.labelEnd] {
			if s != lbl[j] {
				return false
			}
		}
		return true
	})
	if i >= 0 {
		sc.labels = sc.labels[:start]
		return i, false, true
	}
	if len(sc.entries) >= m.maxPoints {
		sc.labels = sc.labels[:start]
		m.st.Points[PointOverLimit]++
		return -1, false, false
	}
	i = x.add(h)
	sc.entries = append(sc.entries, envoyEntry{metric: mi, point: -1, labelStart: start, labelEnd: int32(len(sc.labels))})
	return i, true, true
}

func putLabels(attrs pcommon.Map, lbl []string) {
	attrs.EnsureCapacity(len(lbl) / 2)
	for i := 0; i+1 < len(lbl); i += 2 {
		attrs.PutStr(lbl[i], lbl[i+1])
	}
}

// number maps a counter or gauge point. Points of one series in one push
// (a sink without tags as attributes sends one per stat) add up, as the
// sink's own aggregation adds them.
func (m *envoyMapper) number(dst pmetric.Metric, mi int32, name string, p pmetric.NumberDataPoint, mono bool) {
	iv, fv, isDouble, ok := numberValue(p)
	if !ok {
		m.st.drop(PointInvalid, name, "a point without a finite value")
		return
	}
	if mono && (iv < 0 || fv < 0) {
		m.st.drop(PointInvalid, name, "a negative counter")
		return
	}
	start, outcome := m.labelsOf(name, p.Attributes())
	if outcome != PointMapped {
		return
	}
	e, isNew, ok := m.series(mi, start)
	if !ok {
		return
	}
	m.st.Points[PointMapped]++
	var dps pmetric.NumberDataPointSlice
	if dst.Type() == pmetric.MetricTypeSum {
		dps = dst.Sum().DataPoints()
	} else {
		dps = dst.Gauge().DataPoints()
	}
	if isNew {
		ent := &m.sc.entries[e]
		ent.point = int32(dps.Len())
		q := dps.AppendEmpty()
		q.SetStartTimestamp(p.StartTimestamp())
		q.SetTimestamp(p.Timestamp())
		if isDouble {
			q.SetDoubleValue(fv)
		} else {
			q.SetIntValue(iv)
		}
		putLabels(q.Attributes(), m.sc.labels[ent.labelStart:ent.labelEnd])
		m.st.Written++
		return
	}
	q := dps.At(int(m.sc.entries[e].point))
	q.SetStartTimestamp(minTime(q.StartTimestamp(), p.StartTimestamp()))
	q.SetTimestamp(max(q.Timestamp(), p.Timestamp()))
	switch {
	case q.ValueType() == pmetric.NumberDataPointValueTypeInt && !isDouble:
		q.SetIntValue(q.IntValue() + iv)
	case q.ValueType() == pmetric.NumberDataPointValueTypeInt:
		q.SetDoubleValue(float64(q.IntValue()) + fv)
	default:
		q.SetDoubleValue(q.DoubleValue() + fv + float64(iv))
	}
}

// histogram copies a histogram point: Envoy's bounds are its buckets
// (supportedBuckets), the counts per bucket plus the overflow, so the
// exporter's cumulative buckets are /stats/prometheus's computedBuckets.
func (m *envoyMapper) histogram(dst pmetric.Metric, mi int32, name string, p pmetric.HistogramDataPoint) {
	if why := checkHistogram(p); why != "" {
		m.st.drop(PointInvalid, name, why)
		return
	}
	start, outcome := m.labelsOf(name, p.Attributes())
	if outcome != PointMapped {
		return
	}
	e, isNew, ok := m.series(mi, start)
	if !ok {
		return
	}
	dps := dst.Histogram().DataPoints()
	if isNew {
		m.st.Points[PointMapped]++
		ent := &m.sc.entries[e]
		ent.point = int32(dps.Len())
		q := dps.AppendEmpty()
		q.SetStartTimestamp(p.StartTimestamp())
		q.SetTimestamp(p.Timestamp())
		q.SetCount(p.Count())
		if p.HasSum() {
			q.SetSum(p.Sum())
		}
		p.ExplicitBounds().CopyTo(q.ExplicitBounds())
		if p.BucketCounts().Len() == 0 {
			// Count and sum only: one bucket, +Inf, holds them all.
			q.BucketCounts().Append(p.Count())
		} else {
			p.BucketCounts().CopyTo(q.BucketCounts())
		}
		putLabels(q.Attributes(), m.sc.labels[ent.labelStart:ent.labelEnd])
		m.st.Written++
		return
	}
	q := dps.At(int(m.sc.entries[e].point))
	if !q.ExplicitBounds().Equal(p.ExplicitBounds()) {
		m.st.drop(PointConflict, name, "points of one series with different buckets")
		return
	}
	m.st.Points[PointMapped]++
	q.SetStartTimestamp(minTime(q.StartTimestamp(), p.StartTimestamp()))
	q.SetTimestamp(max(q.Timestamp(), p.Timestamp()))
	q.SetCount(q.Count() + p.Count())
	if q.HasSum() && p.HasSum() {
		q.SetSum(q.Sum() + p.Sum())
	} else {
		q.RemoveSum()
	}
	qc, pc := q.BucketCounts(), p.BucketCounts()
	if pc.Len() == 0 {
		qc.SetAt(0, qc.At(0)+p.Count()) // no bounds either: the +Inf bucket
		return
	}
	for i := 0; i < pc.Len(); i++ {
		qc.SetAt(i, qc.At(i)+pc.At(i))
	}
}
