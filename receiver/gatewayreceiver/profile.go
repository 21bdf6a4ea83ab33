package gatewayreceiver

import (
	"slices"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/health"
)

// tupleKey is the full label tuple of one event under a profile: the key of
// its handle bundle. Every family projects it onto its own labels. Strings
// are owned by the aggregator (cloned on insert), never borrowed from input.
type tupleKey struct {
	namespace, gateway  string // resource (otel profile only)
	route, method       string
	status              int64
	service, upstream   string
	target              string
	targetPort          int64
	consumer, workspace string
	host, uri           string // APISIX matched_host, matched_uri
	source              gateway.Source
	provider, model     string                            // GenAI
	clientModel         string                            // APISIX request_llm_model
	node                string                            // the reporting gateway node (node_label)
	dims                [gateway.MaxSpanDimensions]string // span dimensions (otel)
	stream              bool                              // APISIX request_type ai_stream
	overflow            bool                              // the otel.metric.overflow tuple
}

// measure is what a family records from an event.
type measure uint8

const (
	measureCount measure = iota
	measureTotalMS
	measureUpstreamMS
	measureGatewayMS
	measureRequestBytes
	measureResponseBytes
	// Kong's bandwidth counts a direction only when its size is > 0
	// (exporter.lua: `if ingress_size and ingress_size > 0`).
	measureKongRequestBytes
	measureKongResponseBytes
	measureLLMCount
	measureLLMLatencyMS
	measureInputTokens
	measureOutputTokens
	// Kong's AI families: recorded only when the log carries them, tokens
	// and cost only when > 0, as Kong's exporter does (docs/gateways.md §1c).
	measureKongProviderMS
	measureKongInputTokens
	measureKongOutputTokens
	measureKongTotalTokens
	measureKongCost
	// APISIX's LLM families, as 3.18's exporter records them (docs/
	// gateways.md §2c): latencies only for an answered (time to first token
	// not 0), successful (< 400) LLM request, type="total" its upstream
	// response time, type="ttft" (streamed answers) its time to the first
	// token; tokens for every LLM request, 0 included.
	measureAPISIXLLMLatency
	measureAPISIXPromptTokens
	measureAPISIXCompletionTokens
	measureAPISIXFirstTokenMS
)

// valueOf returns the event's value for m; false when the event does not
// carry it (then the family's series is not updated).
func valueOf(m measure, e *gateway.Event) (float64, bool) {
	switch m {
	case measureCount:
		return 1, true
	case measureTotalMS:
		return e.TotalMS, e.TotalMS >= 0
	case measureUpstreamMS:
		return e.UpstreamMS, e.UpstreamMS >= 0
	case measureGatewayMS:
		return e.GatewayMS()
	case measureRequestBytes:
		return float64(e.RequestSize), e.RequestSize >= 0
	case measureResponseBytes:
		return float64(e.ResponseSize), e.ResponseSize >= 0
	case measureKongRequestBytes:
		return float64(e.RequestSize), e.RequestSize > 0
	case measureKongResponseBytes:
		return float64(e.ResponseSize), e.ResponseSize > 0
	case measureLLMCount:
		return 1, e.GenAI.IsLLM()
	case measureLLMLatencyMS:
		if e.GenAI.ProviderMS >= 0 {
			return e.GenAI.ProviderMS, e.GenAI.IsLLM()
		}
		return e.UpstreamMS, e.GenAI.IsLLM() && e.UpstreamMS >= 0
	case measureInputTokens:
		return float64(e.GenAI.InputTokens), e.GenAI.IsLLM() && e.GenAI.InputTokens >= 0
	case measureOutputTokens:
		return float64(e.GenAI.OutputTokens), e.GenAI.IsLLM() && e.GenAI.OutputTokens >= 0
	case measureKongProviderMS:
		return e.GenAI.ProviderMS, e.GenAI.IsLLM() && e.GenAI.ProviderMS >= 0
	case measureKongInputTokens:
		return float64(e.GenAI.InputTokens), e.GenAI.IsLLM() && e.GenAI.InputTokens > 0
	case measureKongOutputTokens:
		return float64(e.GenAI.OutputTokens), e.GenAI.IsLLM() && e.GenAI.OutputTokens > 0
	case measureKongTotalTokens:
		return float64(e.GenAI.TotalTokens), e.GenAI.IsLLM() && e.GenAI.TotalTokens > 0
	case measureKongCost:
		return e.GenAI.Cost, e.GenAI.IsLLM() && e.GenAI.Cost > 0
	case measureAPISIXLLMLatency:
		v := e.GenAI.ProviderMS
		if v < 0 {
			v = e.UpstreamMS
		}
		return v, apisixLLMServed(e) && v >= 0
	case measureAPISIXPromptTokens:
		return float64(max(e.GenAI.InputTokens, 0)), e.GenAI.IsLLM()
	case measureAPISIXFirstTokenMS:
		return e.GenAI.FirstTokenMS, apisixLLMServed(e) && e.GenAI.Stream && e.GenAI.FirstTokenMS >= 0
	case measureAPISIXCompletionTokens:
		return float64(max(e.GenAI.OutputTokens, 0)), e.GenAI.IsLLM()
	}
	return 0, false
}

// apisixLLMServed: an LLM request whose latencies APISIX 3.18 observes: the
// provider answered ($llm_time_to_first_token is not "0"; an input that
// does not carry it passes) and the status is below 400 (exporter.lua:
// `llm_time_to_first_token ~= "0" and (tonumber(vars.status) or 0) < 400`,
// so an error answer, which ai-proxy also times, stays out).
func apisixLLMServed(e *gateway.Event) bool {
	return e.GenAI.IsLLM() && e.GenAI.FirstTokenMS != 0 && e.StatusCode < 400
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
	// project keeps the fields of the tuple this family's labels use.
	project *projection
	// labels writes the family's attributes for a projected tuple, in the
	// gateway's label order (the exporter may reorder them; see README).
	labels func(k *tupleKey, m pcommon.Map)
	// constKey/constVal is an attribute every point of the family carries
	// (direction="ingress", type="upstream"); empty for none. It is written
	// at constAt among the family's labels (the gateway's label order:
	// APISIX's type comes first, Kong's direction third); -1 appends it.
	constKey, constVal string
	constAt            int
}

// explicitBuckets is the number of buckets of an explicit histogram family
// (its bounds' and +Inf), 0 for other families.
func (f *family) explicitBuckets() int {
	if !f.hist || f.expoSize > 0 {
		return 0
	}
	return len(f.bounds) + 1
}

// projection keeps the fields of a tuple that a family's labels use.
// Families that name the same *projection project every tuple alike: the
// aggregator keeps their series together, found with one lookup and
// allocated together (a pointer, not a function, because Go cannot compare
// functions). Declare one per distinct set of labels.
type projection struct {
	keep func(k tupleKey) tupleKey
}

// profile is a naming profile: how an event becomes a tuple, the families
// it feeds, and how it names upstream health. Each profile has its own file
// (profile_otel.go, profile_kong.go, profile_apisix.go) and one line in
// profiles.
type profile struct {
	name     string
	families []family
	health   *health.Naming
	// key maps an event to its tuple; false when the profile does not count
	// the event (Kong's plugin skips requests without a matched route).
	key func(e *gateway.Event, dims dimensions) (tupleKey, bool)
}

// profiles lists the naming profiles, the default first.
var profiles = []*profile{&otelProfile, &kongProfile, &apisixProfile}

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

// profileNames lists the profile names (config `profile`, `health.profile`).
func profileNames() []string {
	names := make([]string, len(profiles))
	for i, p := range profiles {
		names[i] = p.name
	}
	return names
}

// Profile names (config `profile`).
const (
	profileOTel   = "otel"
	profileKong   = "kong"
	profileAPISIX = "apisix"
)

// dimensions are the optional gateway.* attributes of the otel profile.
type dimensions struct {
	service, upstream, target, consumer, source bool
	// preferName: the apisix profile's route and service labels are names
	// (APISIX's prefer_name).
	preferName bool
	// perConsumer: the kong profile's consumer label is the consumer
	// (Kong's per_consumer).
	perConsumer bool
	// node: the kong and apisix profiles keep the reporting node (node_label).
	node bool
	// span are the span-attribute dimensions of the otel profile, in
	// config order (their values are Event.Dims).
	span []spanDimension
}

// spanKeys are the attribute keys of the span dimensions, for the span
// counters.
func (d *dimensions) spanKeys() []gateway.AttrKey {
	var keys []gateway.AttrKey
	for _, sd := range d.span {
		keys = append(keys, sd.key)
	}
	return keys
}

// spanDimension is one span attribute kept as a dimension.
type spanDimension struct {
	name string
	key  gateway.AttrKey
	def  *string // written when the span has no value; nil: no label
}

// helpers

// nodeOf is the reporting node kept with node_label: the span resource's
// service.instance.id (else APISIX's hostname), APISIX's logged
// server.hostname; "" where the input names no node (Kong's http-log).
func nodeOf(e *gateway.Event, d dimensions) string {
	if !d.node {
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

func targetString(k *tupleKey) string {
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
