package traffic

import (
	"slices"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// Profile names (config `profile`).
const (
	ProfileOTel   = "otel"
	ProfileKong   = "kong"
	ProfileAPISIX = "apisix"
)

// profile is a naming profile: how an event becomes a tuple and the
// families it feeds. Each profile has its own file (profile_otel.go,
// profile_kong.go, profile_apisix.go) and one line in profiles.
type profile struct {
	name     string
	families []family
	// key maps an event to its tuple; false when the profile does not count
	// the event (Kong's plugin skips requests without a matched route).
	key func(e *gateway.Event, d *Dimensions) (tuple, bool)
}

// profiles lists the naming profiles, the default first.
var profiles = []*profile{&otelProfile, &kongProfile, &apisixProfile}

// ProfileNames lists the profile names, the default first.
func ProfileNames() []string {
	names := make([]string, len(profiles))
	for i, p := range profiles {
		names[i] = p.name
	}
	return names
}

// MetricNames lists the names of the named profile's metrics, each once,
// in the profile's order.
func MetricNames(profile string) []string { return profileByName(profile).metricNames() }

// Families is the number of families of the named profile without the
// metrics named in disabled: the streams one tuple can make downstream.
func Families(profile string, disabled []string) int {
	return len(profileByName(profile).withoutMetrics(disabled).families)
}

// profileByName returns the named profile (the default for an unknown name,
// which validation refuses first).
func profileByName(name string) *profile {
	for _, p := range profiles {
		if p.name == name {
			return p
		}
	}
	return profiles[0]
}

// family is one metric stream family a profile emits. Families that share a
// name (Kong's bandwidth directions, APISIX's latency types) become the
// points of one metric, told apart by their constant attribute.
type family struct {
	name, unit, desc string
	hist             bool
	double           bool      // a sum of fractional values (cost); else whole numbers
	spanDims         bool      // its labels include the span dimensions (otel)
	bounds           []float64 // histogram bucket upper bounds, in emitted units
	// expoSize > 0 makes the histogram exponential with at most that many
	// buckets (bounds unused).
	expoSize int
	scale    float64 // emitted value = recorded value × scale (ms → s)
	measure  measure
	// view keeps the fields of the tuple this family's labels use.
	view *view
	// labels writes the family's attributes for a projected tuple, in the
	// gateway's label order (the exporter may reorder them; see README).
	labels func(k *tuple, m pcommon.Map)
	// constKey/constVal is an attribute every point of the family carries
	// (direction="ingress", type="upstream"); empty for none. It is written
	// at constAt among the family's labels (the gateway's label order:
	// APISIX's type comes first, Kong's direction third); -1 appends it.
	constKey, constVal string
	constAt            int

	// The family's place in an aggregator (New sets it): its view's table
	// (Aggregator.tables), its series' slot in the table's rows, and
	// where its explicit buckets start in a row's words.
	table, slot, at int
	// claim is the family of Kong's plugin it is, under the kong profile
	// (one bit; 0 elsewhere): an event whose Superseded set has it is not
	// counted here (Kong's pushed metrics carry the family, claims.go).
	claim gateway.KongFamilySet
}

// withDurationHistograms returns a copy of p whose duration histograms
// (those recorded in ms and emitted in seconds) use bounds (seconds), or are
// exponential with at most expoSize buckets when expoSize > 0; p itself when
// neither is set.
func (p *profile) withDurationHistograms(bounds []float64, expoSize int) *profile {
	if len(bounds) == 0 && expoSize == 0 {
		return p
	}
	c := *p
	c.families = append([]family(nil), p.families...)
	for i := range c.families {
		if f := &c.families[i]; f.hist && f.scale == 1e-3 {
			if len(bounds) > 0 {
				f.bounds = bounds
			}
			f.expoSize = expoSize
		}
	}
	return &c
}

// withoutMetrics returns a copy of p without the families named in off (all
// the families of a name: both bandwidth directions), p itself when off is
// empty. The checkpoint fingerprint lists the families, so a checkpoint
// written with another set is not restored into this one.
func (p *profile) withoutMetrics(off []string) *profile {
	if len(off) == 0 {
		return p
	}
	c := *p
	c.families = slices.DeleteFunc(slices.Clone(p.families), func(f family) bool { return slices.Contains(off, f.name) })
	return &c
}

// metricNames lists the names of p's families, each once, in their order.
func (p *profile) metricNames() []string {
	var names []string
	for _, f := range p.families {
		if !slices.Contains(names, f.name) {
			names = append(names, f.name)
		}
	}
	return names
}

// Dimensions are the optional labels of the profiles.
type Dimensions struct {
	// The otel profile's optional gateway.* attributes.
	Service, Upstream, Target, Consumer, Source bool
	// PreferName: the apisix profile's route and service labels are names
	// (APISIX's prefer_name).
	PreferName bool
	// PerConsumer: the kong profile's consumer label is the consumer
	// (Kong's per_consumer).
	PerConsumer bool
	// Node: the kong and apisix profiles keep the reporting node
	// (node_label).
	Node bool
	// Span are the span-attribute dimensions of the otel profile, in
	// config order (their values are Event.Dims).
	Span []SpanDimension
}

// SpanKeys are the attribute keys of the span dimensions, for the span
// counters.
func (d *Dimensions) SpanKeys() []gateway.AttrKey {
	var keys []gateway.AttrKey
	for _, sd := range d.Span {
		keys = append(keys, sd.Key)
	}
	return keys
}

// SpanDimension is one span attribute kept as a dimension.
type SpanDimension struct {
	Name string
	Key  gateway.AttrKey
	// Default is written when the span has no value; nil: no label.
	Default *string
}

// helpers

// nodeOf is the reporting node kept with node_label: the span resource's
// service.instance.id (else APISIX's hostname), APISIX's logged
// server.hostname; "" where the input names no node (Kong's http-log).
func nodeOf(e *gateway.Event, d *Dimensions) string {
	if !d.Node {
		return ""
	}
	return e.Instance
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// serviceOf is Kong's rule: service.name, falling back to service.host; for
// spans, peer.service (Enterprise) or the balancer's net.peer.name.
func serviceOf(e *gateway.Event) string {
	return firstOf(e.ServiceName, e.ServiceHost, e.ServiceID, e.Upstream)
}

func putNonEmpty(m pcommon.Map, k, v string) {
	if v != "" {
		m.PutStr(k, v)
	}
}

func statusString(s int64) string {
	if s == 0 {
		return ""
	}
	return strconv.FormatInt(s, 10)
}

// sourceName is a profile's word for who answered: upstream, gw (the gateway
// itself), proxy (it proxied and no upstream answer came: APISIX's "nginx";
// a gateway without that word passes gw), "" when the input does not say.
func sourceName(s gateway.Source, upstream, gw, proxy string) string {
	switch s {
	case gateway.SourceUpstream:
		return upstream
	case gateway.SourceGateway:
		return gw
	case gateway.SourceProxy:
		return proxy
	}
	return ""
}

func targetString(k *tuple) string {
	if k.targetPort == 0 {
		return k.target
	}
	return k.target + ":" + strconv.FormatInt(k.targetPort, 10)
}

// hostOf strips the port of "ip:port" or "[v6]:port" (no allocation).
func hostOf(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		switch addr[i] {
		case ':':
			if i > 0 && addr[i-1] == ']' || countColons(addr) == 1 {
				h := addr[:i]
				if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
					return h[1 : len(h)-1]
				}
				return h
			}
			return addr
		case ']':
			return addr
		}
	}
	return addr
}

func countColons(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			n++
		}
	}
	return n
}
