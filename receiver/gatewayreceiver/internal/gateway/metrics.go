package gateway

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Pushed metrics: the OTLP metrics a gateway exports itself (Kong's
// opentelemetry plugin, §1e; Envoy's OpenTelemetry stats sink, §3c), mapped
// to the gateway's Prometheus names so its dashboards and alerts keep
// working. The mapping is pure: pmetric in, pmetric out, no transport. Each
// gateway's rules live in its home (kong_metrics.go, envoy_metrics.go); this
// file holds what they share: the bounds, the per-point outcomes, attribute
// reading and histogram checks.
//
// Temporality is kept as sent: a delta sum or histogram leaves as a delta
// (the cumulative processor accumulates it), a cumulative one as cumulative.

// MetricsSpec is a gateway's pushed-metrics path.
type MetricsSpec struct {
	// Detect reports whether a pushed ResourceMetrics is this gateway's
	// when the receiver is told to detect (`auto`).
	Detect func(rm pmetric.ResourceMetrics) bool
	// Map appends rm, mapped to the gateway's Prometheus names, to dst and
	// counts every point of rm in st. It never fails as a whole: a bad
	// point is counted and skipped, the rest mapped.
	Map func(dst pmetric.Metrics, rm pmetric.ResourceMetrics, o *MetricsOptions, st *MetricsStats)
}

// DetectMetrics tells the gateway of a pushed ResourceMetrics: the first
// registered gateway whose MetricsSpec claims it; KindAuto when none does.
func DetectMetrics(rm pmetric.ResourceMetrics) Kind {
	return find(func(g *Gateway) bool { return g.Metrics != nil && g.Metrics.Detect != nil && g.Metrics.Detect(rm) })
}

// MetricsOf returns the pushed-metrics path of kind k; nil when the gateway
// has none.
func MetricsOf(k Kind) *MetricsSpec {
	if g := gatewayOf(k); g != nil {
		return g.Metrics
	}
	return nil
}

// Defaults of MetricsOptions.
const (
	// DefaultMaxPushPoints bounds the points one ResourceMetrics maps to:
	// a 100k-stat Envoy with room to spare (per-endpoint stats included).
	DefaultMaxPushPoints = 200_000
	// DefaultMaxPushLabelBytes bounds one label value: Envoy Gateway's
	// cluster names (`httproute/<ns>/<name>/rule/<n>`) are far below it.
	DefaultMaxPushLabelBytes = 1024
	// MaxPushLabels bounds the labels of one point: Envoy stats carry a few
	// tags, Kong's families at most 8 labels.
	MaxPushLabels = 32
	// maxPushNameBytes bounds a metric name.
	maxPushNameBytes = 1024
)

// MetricsOptions configures one mapping call. The zero value maps with the
// defaults.
type MetricsOptions struct {
	// MaxPoints bounds the points written for one ResourceMetrics (merged
	// series count once); the points beyond are dropped (over_limit). 0 is
	// DefaultMaxPushPoints.
	MaxPoints int
	// MaxLabelBytes bounds each label value; a point with a longer one is
	// dropped whole (label_too_long): cutting it could merge two series. 0
	// is DefaultMaxPushLabelBytes.
	MaxLabelBytes int
	// Origin names the sender when its resource has no service.instance.id
	// (Envoy's sink without resource detectors): the transport's peer
	// address. It becomes the resource's service.instance.id, so two nodes'
	// series never merge. "" leaves the resource as sent.
	Origin string
	// EnvoyPrefix is the stats sink's `prefix` setting: "<prefix>." is
	// stripped from every name, as /stats/prometheus never has it.
	EnvoyPrefix string
	// EnvoyNamespaces are the custom stat namespaces registered in Envoy
	// (Wasm's): their stats are exposed without the envoy_ prefix.
	EnvoyNamespaces []string
}

func (o *MetricsOptions) maxPoints() int {
	if o == nil || o.MaxPoints <= 0 {
		return DefaultMaxPushPoints
	}
	return o.MaxPoints
}

func (o *MetricsOptions) maxLabelBytes() int {
	if o == nil || o.MaxLabelBytes <= 0 {
		return DefaultMaxPushLabelBytes
	}
	return o.MaxLabelBytes
}

// PointOutcome is what became of one pushed data point; the receiver counts
// points by it (a bounded `outcome` attribute).
type PointOutcome uint8

// The outcomes of a pushed point.
const (
	// PointMapped: written under the gateway's name (a point merged into
	// another of the same series counts here too).
	PointMapped PointOutcome = iota
	// PointUnmapped: the gateway's Prometheus plugin has no family for it
	// (Kong's WebSocket, A2A, license metrics…); the otel profile keeps it.
	PointUnmapped
	// PointNoRoute: a Kong request point without a route, which Kong's
	// Prometheus plugin never counts (its log() returns early).
	PointNoRoute
	// PointZero: a zero that Kong's plugin never writes (a bandwidth, cost
	// or token count of 0 creates no series there).
	PointZero
	// PointInvalid: malformed (histogram buckets that do not add up, NaN or
	// negative counts, an unsupported data type, an invalid name).
	PointInvalid
	// PointLabelTooLong: a label value beyond MaxLabelBytes.
	PointLabelTooLong
	// PointTooManyLabels: more than MaxPushLabels attributes, or an
	// attribute that is a map, a list or bytes.
	PointTooManyLabels
	// PointConflict: the series was already written in this push with
	// another type, temporality or bucket layout.
	PointConflict
	// PointOverLimit: beyond MaxPoints.
	PointOverLimit
	pointOutcomes
)

// NumPointOutcomes is how many outcomes there are (the receiver's
// telemetry adds its own after them).
const NumPointOutcomes = int(pointOutcomes)

var pointOutcomeNames = [pointOutcomes]string{
	PointMapped:        "mapped",
	PointUnmapped:      "unmapped",
	PointNoRoute:       "no_route",
	PointZero:          "zero",
	PointInvalid:       "invalid",
	PointLabelTooLong:  "label_too_long",
	PointTooManyLabels: "bad_labels",
	PointConflict:      "conflict",
	PointOverLimit:     "over_limit",
}

// String is the outcome's telemetry value.
func (p PointOutcome) String() string {
	if p < pointOutcomes {
		return pointOutcomeNames[p]
	}
	return "unknown"
}

// PointOutcomes lists every outcome (for metadata.yaml's enum).
func PointOutcomes() []PointOutcome {
	out := make([]PointOutcome, pointOutcomes)
	for i := range out {
		out[i] = PointOutcome(i)
	}
	return out
}

// MetricsStats counts what one or more mapping calls did. Not safe for
// concurrent use: one per request.
type MetricsStats struct {
	// Points counts the input data points by outcome.
	Points [pointOutcomes]int
	// Written is the number of points written (merged series once).
	Written int
	// Coarse counts histogram points written with fewer buckets than the
	// gateway's own families have: their pushed bounds do not include all of
	// the gateway's (Kong's OTel histograms carry none, §1e).
	Coarse int
	// Err describes the first dropped point (invalid, too long, conflict),
	// naming the metric and what was wrong; nil when none was.
	Err error
}

// Dropped is the number of points not written.
func (s *MetricsStats) Dropped() int {
	n := 0
	for o, c := range s.Points {
		if PointOutcome(o) != PointMapped {
			n += c
		}
	}
	return n
}

// drop counts one dropped point that is the sender's error; the first one
// keeps its description: the metric and why, joined from parts only then,
// so a flood of bad points costs no message each.
func (s *MetricsStats) drop(o PointOutcome, metric string, why ...string) {
	s.Points[o]++
	if s.Err == nil {
		s.Err = errors.New(CutLabel("metric "+strconv.Quote(CutLabel(metric, 128))+": "+strings.Join(why, ""), 512))
	}
}

// attrString reads an attribute value as a label value without allocating
// for strings and small integers. ok is false for maps, lists and bytes,
// which never make a label.
func attrString(v pcommon.Value) (s string, ok bool) {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return v.Str(), true
	case pcommon.ValueTypeInt:
		return intString(v.Int()), true
	case pcommon.ValueTypeDouble:
		f := v.Double()
		if f == math.Trunc(f) && f >= 0 && f < float64(len(smallInts)) {
			return smallInts[int(f)], true
		}
		return strconv.FormatFloat(f, 'g', -1, 64), true
	case pcommon.ValueTypeBool:
		if v.Bool() {
			return "true", true
		}
		return "false", true
	case pcommon.ValueTypeEmpty:
		return "", true
	}
	return "", false
}

// smallInts are the decimal texts of 0..999: status codes and the like
// become labels without a conversion each.
var smallInts = func() (t [1000]string) {
	for i := range t {
		t[i] = strconv.Itoa(i)
	}
	return t
}()

func intString(i int64) string {
	if i >= 0 && i < int64(len(smallInts)) {
		return smallInts[i]
	}
	return strconv.FormatInt(i, 10)
}

// checkHistogram reports what is wrong with an explicit-bucket point, ""
// when nothing is: bounds strictly increasing and finite, one bucket count
// more than bounds (or none at all: count and sum only, as Kong sends), and
// counts that add up to the point's count.
func checkHistogram(p pmetric.HistogramDataPoint) string {
	bounds, counts := p.ExplicitBounds(), p.BucketCounts()
	if counts.Len() == 0 {
		if bounds.Len() != 0 {
			return "explicit_bounds without bucket_counts"
		}
		return ""
	}
	if counts.Len() != bounds.Len()+1 {
		return "bucket_counts has " + strconv.Itoa(counts.Len()) + " entries for " + strconv.Itoa(bounds.Len()) + " bounds"
	}
	prev := math.Inf(-1)
	for i := 0; i < bounds.Len(); i++ {
		b := bounds.At(i)
		if math.IsNaN(b) || math.IsInf(b, 0) || b <= prev {
			return "explicit_bounds not strictly increasing finite numbers at index " + strconv.Itoa(i)
		}
		prev = b
	}
	var total uint64
	for i := 0; i < counts.Len(); i++ {
		c := counts.At(i)
		if total+c < total {
			return "bucket_counts overflow"
		}
		total += c
	}
	if total != p.Count() {
		return "bucket_counts add up to " + strconv.FormatUint(total, 10) + ", count is " + strconv.FormatUint(p.Count(), 10)
	}
	if p.HasSum() && math.IsNaN(p.Sum()) {
		return "sum is NaN"
	}
	return ""
}

// numberValue reads a number point; ok is false for NaN, ±Inf or a point
// without a value.
func numberValue(p pmetric.NumberDataPoint) (i int64, f float64, isDouble, ok bool) {
	switch p.ValueType() {
	case pmetric.NumberDataPointValueTypeInt:
		return p.IntValue(), 0, false, true
	case pmetric.NumberDataPointValueTypeDouble:
		f = p.DoubleValue()
		return 0, f, true, !math.IsNaN(f) && !math.IsInf(f, 0)
	}
	return 0, 0, false, false
}

// outResource starts dst's ResourceMetrics for rm: rm's resource attributes,
// service.instance.id = origin when rm has none (two senders' series must
// never merge), service.name = defaultService when rm has none.
func outResource(dst pmetric.Metrics, rm pmetric.ResourceMetrics, origin, defaultService string) pmetric.ScopeMetrics {
	out := dst.ResourceMetrics().AppendEmpty()
	rm.Resource().CopyTo(out.Resource())
	a := out.Resource().Attributes()
	if _, ok := a.Get("service.instance.id"); !ok && origin != "" {
		a.PutStr("service.instance.id", origin)
	}
	if _, ok := a.Get("service.name"); !ok && defaultService != "" {
		a.PutStr("service.name", defaultService)
	}
	out.SetSchemaUrl(rm.SchemaUrl())
	sm := out.ScopeMetrics().AppendEmpty()
	if rm.ScopeMetrics().Len() > 0 {
		s := rm.ScopeMetrics().At(0).Scope()
		sm.Scope().SetName(s.Name())
		sm.Scope().SetVersion(s.Version())
	}
	return sm
}

// trimEmpty removes dst's last ResourceMetrics when mapping wrote no metric
// into it, so an all-dropped push forwards nothing.
func trimEmpty(dst pmetric.Metrics) {
	rms := dst.ResourceMetrics()
	n := rms.Len()
	if n == 0 {
		return
	}
	last := rms.At(n - 1)
	if last.ScopeMetrics().Len() == 1 && last.ScopeMetrics().At(0).Metrics().Len() == 0 {
		i := 0
		rms.RemoveIf(func(pmetric.ResourceMetrics) bool { i++; return i == n })
	}
}

// resourceStr reads a string resource attribute ("" when absent).
func resourceStr(rm pmetric.ResourceMetrics, key string) string {
	if v, ok := rm.Resource().Attributes().Get(key); ok {
		s, _ := attrString(v)
		return s
	}
	return ""
}

// hasPrefixDot reports whether name starts with prefix followed by a dot.
func hasPrefixDot(name, prefix string) bool {
	return len(name) > len(prefix) && name[len(prefix)] == '.' && strings.HasPrefix(name, prefix)
}

// PointCount is the number of data points of a metric of any type.
func PointCount(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints().Len()
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().DataPoints().Len()
	case pmetric.MetricTypeSummary:
		return m.Summary().DataPoints().Len()
	}
	return 0
}
