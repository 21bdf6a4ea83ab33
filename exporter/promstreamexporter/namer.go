package promstreamexporter

import (
	"slices"
	"strings"

	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/series"
	"github.com/otelgateway/otelgateway/internal/identity"
)

// maxCachedLabelNames bounds the attribute-key → label-name cache, so hostile
// attribute keys cannot grow it without limit (past it, names are translated
// each time a series is created, which is rare).
const maxCachedLabelNames = 1 << 16

var emptyAttrs = pcommon.NewMap()

// namer translates OTel names into Prometheus names and label contexts, and
// caches every translation: a steady stream of points translates nothing.
// Not safe for concurrent use: the exporter calls it under its mutex.
type namer struct {
	cfg            *Config
	metricNamer    otlptranslator.MetricNamer
	labelNamer     otlptranslator.LabelNamer
	families       map[familyKey]familyRef
	labelNames     map[string]string
	resources      map[uint64][]*resourceLabels
	contexts       map[uint64][]*labelContext
	constLabels    []exposition.Label
	targetInfoName string
	// resourceLabels selects the resource attributes copied onto series
	// (resource_constant_labels, or resource_to_telemetry_conversion).
	resourceLabels *resourceMatcher
}

// familyKey is what an OTel metric's Prometheus family depends on.
type familyKey struct {
	name, unit string
	typ        otlptranslator.MetricType
}

// familyRef caches the outcome of translating a familyKey: the family, or
// the reason its points are dropped.
type familyRef struct {
	name   string
	family *series.Family
	reason string
}

// resourceLabels is what one resource contributes to its series' labels.
type resourceLabels struct {
	attrs  pcommon.Map // owned copy, to confirm hash hits
	hash   uint64
	labels []exposition.Label // job, instance, copied attributes, const labels
	// copied are the keys of the resource attributes copied into labels:
	// a point attribute with one of these keys is left out, because the
	// contrib exporter copies resource attributes over the point's.
	copied         []string
	targetInfo     *series.Context // nil without both job and instance
	targetInfoHash uint64
	lastUsed       int64
}

// labelContext is one (resource, scope): the interned series.Context plus
// what is needed to confirm a hash hit.
type labelContext struct {
	ctx          *series.Context
	res          *resourceLabels
	scopeName    string
	scopeVersion string
	schemaURL    string
	scopeAttrs   pcommon.Map
	hash         uint64
	lastUsed     int64
}

func newNamer(cfg *Config) *namer {
	sel, _ := cfg.resourceLabels()
	n := &namer{
		cfg:            cfg,
		resourceLabels: newResourceMatcher(sel),
		metricNamer: otlptranslator.MetricNamer{
			Namespace:          cfg.namespace(),
			WithMetricSuffixes: cfg.withSuffixes(),
			UTF8Allowed:        cfg.utf8Allowed(),
		},
		// PreserveMultipleUnderscores: as the contrib exporter with its
		// default feature gates.
		labelNamer:     otlptranslator.LabelNamer{UTF8Allowed: cfg.utf8Allowed(), PreserveMultipleUnderscores: true},
		families:       make(map[familyKey]familyRef),
		labelNames:     make(map[string]string),
		resources:      make(map[uint64][]*resourceLabels),
		contexts:       make(map[uint64][]*labelContext),
		targetInfoName: otlptranslator.TargetInfoMetricName,
	}
	if ns := cfg.namespace(); ns != "" {
		n.targetInfoName = ns + "_" + n.targetInfoName
	}
	keys := make([]string, 0, len(cfg.ConstLabels))
	for k := range cfg.ConstLabels {
		keys = append(keys, k)
	}
	// Sorted by name, then by key (two keys may escape alike), so that
	// label_order: as_received writes them in one order and the values of
	// two that escape alike are joined in one order (exposition.Resolve).
	slices.SortFunc(keys, func(a, b string) int {
		if c := strings.Compare(cfg.constLabelName(a), cfg.constLabelName(b)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	for _, k := range keys {
		n.constLabels = append(n.constLabels, exposition.Label{Name: cfg.constLabelName(k), Value: cfg.ConstLabels[k]})
	}
	return n
}

// family returns the cached translation of m, or a fresh one (fresh = true)
// that the caller completes with setFamily.
func (n *namer) family(m pmetric.Metric, typ otlptranslator.MetricType) (familyRef, bool) {
	if ref, ok := n.families[familyKey{name: m.Name(), unit: m.Unit(), typ: typ}]; ok {
		return ref, false
	}
	name, err := n.metricNamer.Build(otlptranslator.Metric{Name: m.Name(), Unit: m.Unit(), Type: typ})
	name = exposition.ValidName(name) // UTF-8 names are kept as they come
	if err != nil || name == "" {
		ref := familyRef{reason: reasonInvalidName}
		n.setFamily(m, typ, ref)
		return ref, true
	}
	return familyRef{name: name}, true
}

func (n *namer) setFamily(m pmetric.Metric, typ otlptranslator.MetricType, ref familyRef) {
	n.families[familyKey{name: strings.Clone(m.Name()), unit: strings.Clone(m.Unit()), typ: typ}] = ref
}

// labelName translates an attribute key; "" when it has no valid label name
// (empty, or only underscores).
func (n *namer) labelName(k string) string {
	if ln, ok := n.labelNames[k]; ok {
		return ln
	}
	ln, err := n.labelNamer.Build(k)
	if err != nil {
		ln = ""
	}
	ln = exposition.ValidName(ln) // UTF-8 names are kept as they come
	if len(n.labelNames) < maxCachedLabelNames {
		n.labelNames[strings.Clone(k)] = ln
	}
	return ln
}

// resource returns the labels a resource contributes, translated once per
// distinct resource.
func (n *namer) resource(attrs pcommon.Map, now int64) *resourceLabels {
	h := identity.OfMap(attrs)
	for _, r := range n.resources[h] {
		if r.attrs.Equal(attrs) {
			r.lastUsed = now
			return r
		}
	}
	r := &resourceLabels{attrs: pcommon.NewMap(), hash: h, lastUsed: now}
	attrs.CopyTo(r.attrs)
	job, instance := jobInstance(attrs)
	// Generated labels are left out when empty (only the point's own
	// attributes may be kept empty, with keep_empty_labels).
	if job != "" {
		r.labels = append(r.labels, exposition.Label{Name: "job", Value: job})
	}
	if instance != "" {
		r.labels = append(r.labels, exposition.Label{Name: "instance", Value: instance})
	}
	for k, v := range attrs.All() {
		if !n.resourceLabels.matches(k) {
			continue
		}
		k = strings.Clone(k)
		r.copied = append(r.copied, k)
		r.labels = n.appendAttr(r.labels, k, v)
	}
	r.labels = append(r.labels, n.constLabels...)
	if job != "" && instance != "" {
		ti := []exposition.Label{{Name: "job", Value: job}, {Name: "instance", Value: instance}}
		for k, v := range attrs.All() {
			switch k {
			case "service.name", "service.namespace", "service.instance.id":
				continue // they are job and instance already
			}
			ti = n.appendAttr(ti, strings.Clone(k), v)
		}
		// Sorted by name as it is written with either label_order; the
		// table joins and renames what collides (exposition.Resolve).
		slices.SortStableFunc(ti, func(a, b exposition.Label) int { return strings.Compare(a.Name, b.Name) })
		r.targetInfo = &series.Context{Labels: ti}
		r.targetInfoHash = identity.Combine(h, identity.OfString(n.targetInfoName))
	}
	n.resources[h] = append(n.resources[h], r)
	return r
}

// context returns the interned label context of one resource and scope.
func (n *namer) context(r *resourceLabels, scope pcommon.InstrumentationScope, schemaURL string, now int64) *labelContext {
	h := identity.Combine(r.hash, identity.OfString(scope.Name()))
	h = identity.Combine(h, identity.OfString(scope.Version()))
	h = identity.Combine(h, identity.OfString(schemaURL))
	h = identity.Combine(h, identity.OfMap(scope.Attributes()))
	for _, c := range n.contexts[h] {
		if c.res == r && c.scopeName == scope.Name() && c.scopeVersion == scope.Version() &&
			c.schemaURL == schemaURL && c.scopeAttrs.Equal(scope.Attributes()) {
			c.lastUsed = now
			return c
		}
	}
	c := &labelContext{
		res: r, hash: h, lastUsed: now, scopeAttrs: pcommon.NewMap(),
		scopeName: scope.Name(), scopeVersion: scope.Version(), schemaURL: schemaURL,
	}
	scope.Attributes().CopyTo(c.scopeAttrs)
	labels := slices.Clone(r.labels)
	if !n.cfg.WithoutScopeInfo {
		for k, v := range scope.Attributes().All() {
			switch k {
			case "name", "version", "schema_url":
				continue // reserved: the scope's own fields below
			}
			labels = n.appendAttr(labels, "otel_scope_"+k, v)
		}
		for _, l := range [...]exposition.Label{
			{Name: "otel_scope_name", Value: scope.Name()},
			{Name: "otel_scope_version", Value: scope.Version()},
			{Name: "otel_scope_schema_url", Value: schemaURL},
		} {
			if l.Value != "" {
				labels = append(labels, l)
			}
		}
	}
	c.ctx = &series.Context{Labels: labels}
	n.contexts[h] = append(n.contexts[h], c)
	return c
}

// forgetContexts drops resources and contexts unused since cutoff. A series
// that still refers to a forgotten context keeps working: if its resource
// comes back, the new context renders the same labels and the table maps it
// to the same series.
func (n *namer) forgetContexts(cutoff int64) {
	for h, list := range n.contexts {
		list = slices.DeleteFunc(list, func(c *labelContext) bool { return c.lastUsed < cutoff })
		if len(list) == 0 {
			delete(n.contexts, h)
		} else {
			n.contexts[h] = list
		}
	}
	for h, list := range n.resources {
		list = slices.DeleteFunc(list, func(r *resourceLabels) bool { return r.lastUsed < cutoff })
		if len(list) == 0 {
			delete(n.resources, h)
		} else {
			n.resources[h] = list
		}
	}
}

// appendAttr appends the label of attribute k (left out when k has no
// valid label name: empty, or only underscores). k must not point into a
// request's buffer when the label is kept beyond the call.
func (n *namer) appendAttr(dst []exposition.Label, k string, v pcommon.Value) []exposition.Label {
	if ln := n.labelName(k); ln != "" {
		dst = append(dst, exposition.Label{Name: ln, Value: v.AsString(), Attr: true, Key: k})
	}
	return dst
}

// seriesLabels assembles a new series' labels: its context's, then its
// point's attributes in the order they came, translated. The series table
// makes them what a series writes (exposition.Resolve: sorted or not, one
// label per name, none reserved). A point attribute with the key of a
// resource attribute copied by resource_constant_labels is left out: the
// resource's value wins, as in the contrib exporter, which copies resource
// attributes over the point's.
func (n *namer) seriesLabels(dst []exposition.Label, c *labelContext, attrs pcommon.Map) []exposition.Label {
	dst = append(dst[:0], c.ctx.Labels...)
	copied := c.res.copied
	for k, v := range attrs.All() {
		if len(copied) > 0 && slices.Contains(copied, k) {
			continue
		}
		dst = n.appendAttr(dst, k, v)
	}
	return dst
}

// jobInstance derives the job and instance labels as the Prometheus
// compatibility spec does: job = service.namespace/service.name (or just
// service.name), instance = service.instance.id.
func jobInstance(res pcommon.Map) (job, instance string) {
	if v, ok := res.Get("service.name"); ok {
		job = v.AsString()
		if ns, ok := res.Get("service.namespace"); ok && ns.AsString() != "" {
			job = ns.AsString() + "/" + job
		}
	}
	if v, ok := res.Get("service.instance.id"); ok {
		instance = v.AsString()
	}
	return job, instance
}
