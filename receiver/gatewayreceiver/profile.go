package gatewayreceiver

import (
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
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
	provider, model     string // GenAI
	overflow            bool   // the otel.metric.overflow tuple
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
	measureLLMCount
	measureLLMLatencyMS
	measureInputTokens
	measureOutputTokens
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
	}
	return 0, false
}

// family is one metric stream family a profile emits. Families that share a
// name (Kong's bandwidth directions, APISIX's latency types) become the
// points of one metric, told apart by their constant attribute.
type family struct {
	name, unit, desc string
	hist             bool
	bounds           []float64 // histogram bucket upper bounds, in emitted units
	scale            float64   // emitted value = recorded value × scale (ms → s)
	measure          measure
	// project keeps the fields of the tuple this family's labels use.
	project func(k tupleKey) tupleKey
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

// profile is a naming profile: how an event becomes a tuple, and the
// families it feeds.
type profile struct {
	name     string
	families []family
	// key maps an event to its tuple; false when the profile does not count
	// the event (Kong's plugin skips requests without a matched route).
	key func(e *gateway.Event, dims dimensions) (tupleKey, bool)
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
}

// ---------------------------------------------------------------------------
// otel: HTTP semantic-convention names plus gateway.* attributes.

// Semantic-convention default buckets of http.server.request.duration (s).
var semconvDurationBounds = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// GenAI token-usage buckets from the GenAI semantic conventions.
var genAITokenBounds = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}

func otelKey(e *gateway.Event, d dimensions) (tupleKey, bool) {
	k := tupleKey{namespace: e.Namespace, gateway: e.Gateway, route: e.Route, method: e.Method, status: e.StatusCode,
		provider: e.GenAI.Provider, model: llmModel(e)}
	if d.service {
		k.service = serviceOf(e)
	}
	if d.upstream {
		k.upstream = e.Upstream
	}
	if d.target {
		k.target, k.targetPort = e.Target, e.TargetPort
	}
	if d.consumer {
		k.consumer = e.Consumer
	}
	if d.source {
		k.source = e.Source
	}
	return k, true
}

func llmModel(e *gateway.Event) string {
	if e.GenAI.ResponseModel != "" {
		return e.GenAI.ResponseModel
	}
	return e.GenAI.RequestModel
}

func otelProxy(k tupleKey) tupleKey {
	k.provider, k.model = "", ""
	return k
}

func otelLLM(k tupleKey) tupleKey {
	return tupleKey{namespace: k.namespace, gateway: k.gateway, route: k.route, provider: k.provider, model: k.model, overflow: k.overflow}
}

func otelLabels(k *tupleKey, m pcommon.Map) {
	if k.route != "" {
		m.PutStr("http.route", k.route)
	}
	if k.method != "" {
		m.PutStr("http.request.method", k.method)
	}
	if k.status != 0 {
		m.PutInt("http.response.status_code", k.status)
	}
	putNonEmpty(m, "gateway.service", k.service)
	putNonEmpty(m, "gateway.upstream", k.upstream)
	if k.target != "" {
		m.PutStr("gateway.target", targetString(k))
	}
	putNonEmpty(m, "gateway.consumer", k.consumer)
	if k.source != gateway.SourceUnknown {
		m.PutStr("gateway.response.source", sourceName(k.source, "upstream", "gateway"))
	}
}

func otelLLMLabels(k *tupleKey, m pcommon.Map) {
	putNonEmpty(m, "http.route", k.route)
	putNonEmpty(m, "gen_ai.provider.name", k.provider)
	putNonEmpty(m, "gen_ai.response.model", k.model)
}

var otelProfile = profile{
	name: profileOTel,
	key:  otelKey,
	families: []family{
		{name: "gateway.requests", unit: "{request}", desc: "Requests proxied by the gateway.",
			measure: measureCount, project: otelProxy, labels: otelLabels},
		{name: "http.server.request.duration", unit: "s", desc: "Duration of requests as the gateway saw them.",
			hist: true, bounds: semconvDurationBounds, scale: 1e-3, measure: measureTotalMS, project: otelProxy, labels: otelLabels},
		{name: "gateway.upstream.duration", unit: "s", desc: "Time spent waiting for the upstream.",
			hist: true, bounds: semconvDurationBounds, scale: 1e-3, measure: measureUpstreamMS, project: otelProxy, labels: otelLabels},
		{name: "gateway.added.duration", unit: "s", desc: "Latency the gateway added (total minus upstream).",
			hist: true, bounds: semconvDurationBounds, scale: 1e-3, measure: measureGatewayMS, project: otelProxy, labels: otelLabels},
		{name: "gateway.bandwidth", unit: "By", desc: "Bytes received from and sent to clients.",
			measure: measureRequestBytes, project: otelProxy, labels: otelLabels, constKey: "network.io.direction", constVal: "receive", constAt: -1},
		{name: "gateway.bandwidth", unit: "By", desc: "Bytes received from and sent to clients.",
			measure: measureResponseBytes, project: otelProxy, labels: otelLabels, constKey: "network.io.direction", constVal: "transmit", constAt: -1},
		{name: "gateway.llm.requests", unit: "{request}", desc: "Requests carrying GenAI attributes, by provider and model.",
			measure: measureLLMCount, project: otelLLM, labels: otelLLMLabels},
		{name: "gateway.llm.duration", unit: "s", desc: "Upstream (provider) latency of GenAI requests.",
			hist: true, bounds: semconvDurationBounds, scale: 1e-3, measure: measureLLMLatencyMS, project: otelLLM, labels: otelLLMLabels},
		{name: "gen_ai.client.token.usage", unit: "{token}", desc: "Tokens used by GenAI requests.",
			hist: true, bounds: genAITokenBounds, scale: 1, measure: measureInputTokens, project: otelLLM, labels: otelLLMLabels,
			constKey: "gen_ai.token.type", constVal: "input", constAt: -1},
		{name: "gen_ai.client.token.usage", unit: "{token}", desc: "Tokens used by GenAI requests.",
			hist: true, bounds: genAITokenBounds, scale: 1, measure: measureOutputTokens, project: otelLLM, labels: otelLLMLabels,
			constKey: "gen_ai.token.type", constVal: "output", constAt: -1},
	},
}

// ---------------------------------------------------------------------------
// kong: the Prometheus plugin's names and labels (gateway-formats.md §1c).

var (
	kongLatencyBounds  = []float64{1, 2, 5, 7, 10, 15, 20, 30, 50, 75, 100, 200, 500, 750, 1000, 3000, 6000}
	kongUpstreamBounds = []float64{25, 50, 80, 100, 250, 400, 700, 1000, 2000, 5000, 10000, 30000, 60000}
)

func kongKey(e *gateway.Event, _ dimensions) (tupleKey, bool) {
	// route = route.name, falling back to route.id; spans carry only
	// http.route (a path), which stands in for both.
	route := firstOf(e.RouteName, e.RouteID, e.Route)
	if route == "" {
		return tupleKey{}, false // Kong's log() returns early without a route
	}
	ws := e.Workspace
	if ws == "" {
		ws = "default" // the only workspace of Kong OSS; spans do not say
	}
	return tupleKey{route: route, service: serviceOf(e), status: e.StatusCode, source: e.Source,
		workspace: ws, consumer: e.Consumer, provider: e.GenAI.Provider, model: llmModel(e)}, true
}

func kongRequests(k tupleKey) tupleKey {
	return tupleKey{service: k.service, route: k.route, status: k.status, source: k.source, workspace: k.workspace, consumer: k.consumer, overflow: k.overflow}
}

func kongLatency(k tupleKey) tupleKey {
	return tupleKey{service: k.service, route: k.route, workspace: k.workspace, overflow: k.overflow}
}

func kongBandwidth(k tupleKey) tupleKey {
	return tupleKey{service: k.service, route: k.route, workspace: k.workspace, consumer: k.consumer, overflow: k.overflow}
}

func kongAI(k tupleKey) tupleKey {
	return tupleKey{provider: k.provider, model: k.model, workspace: k.workspace, overflow: k.overflow}
}

// The label writers put Kong's labels in Kong's order; a family's constant
// label (direction) follows them.
func kongRequestLabels(k *tupleKey, m pcommon.Map) {
	m.PutStr("service", k.service)
	m.PutStr("route", k.route)
	m.PutStr("code", statusString(k.status))
	m.PutStr("source", sourceName(k.source, "service", "kong"))
	m.PutStr("workspace", k.workspace)
	m.PutStr("consumer", k.consumer)
}

func kongLatencyLabels(k *tupleKey, m pcommon.Map) {
	m.PutStr("service", k.service)
	m.PutStr("route", k.route)
	m.PutStr("workspace", k.workspace)
}

func kongBandwidthLabels(k *tupleKey, m pcommon.Map) {
	m.PutStr("service", k.service)
	m.PutStr("route", k.route)
	m.PutStr("workspace", k.workspace)
	m.PutStr("consumer", k.consumer)
}

func kongAILabels(k *tupleKey, m pcommon.Map) {
	m.PutStr("ai_provider", k.provider)
	m.PutStr("ai_model", k.model)
	m.PutStr("cache_status", "")
	m.PutStr("vector_db", "")
	m.PutStr("embeddings_provider", "")
	m.PutStr("embeddings_model", "")
	m.PutStr("workspace", k.workspace)
}

var kongProfile = profile{
	name: profileKong,
	key:  kongKey,
	families: []family{
		{name: "kong_http_requests_total", desc: "HTTP status codes per consumer/service/route in Kong",
			measure: measureCount, project: kongRequests, labels: kongRequestLabels},
		{name: "kong_kong_latency_ms", desc: "Latency added by Kong and enabled plugins for each service/route in Kong",
			hist: true, bounds: kongLatencyBounds, scale: 1, measure: measureGatewayMS, project: kongLatency, labels: kongLatencyLabels},
		{name: "kong_upstream_latency_ms", desc: "Latency added by upstream response for each service/route in Kong",
			hist: true, bounds: kongUpstreamBounds, scale: 1, measure: measureUpstreamMS, project: kongLatency, labels: kongLatencyLabels},
		{name: "kong_request_latency_ms", desc: "Total latency incurred during requests for each service/route in Kong",
			hist: true, bounds: kongUpstreamBounds, scale: 1, measure: measureTotalMS, project: kongLatency, labels: kongLatencyLabels},
		{name: "kong_bandwidth_bytes", desc: "Total bandwidth (ingress/egress) throughput in bytes",
			measure: measureRequestBytes, project: kongBandwidth, labels: kongBandwidthLabels, constKey: "direction", constVal: "ingress", constAt: 2},
		{name: "kong_bandwidth_bytes", desc: "Total bandwidth (ingress/egress) throughput in bytes",
			measure: measureResponseBytes, project: kongBandwidth, labels: kongBandwidthLabels, constKey: "direction", constVal: "egress", constAt: 2},
		{name: "kong_ai_llm_requests_total", desc: "AI requests total per ai_provider in Kong",
			measure: measureLLMCount, project: kongAI, labels: kongAILabels},
		{name: "kong_ai_llm_tokens_total", desc: "AI tokens total per ai_provider in Kong",
			measure: measureInputTokens, project: kongAI, labels: kongAILabels, constKey: "token_type", constVal: "prompt_tokens", constAt: -1},
		{name: "kong_ai_llm_tokens_total", desc: "AI tokens total per ai_provider in Kong",
			measure: measureOutputTokens, project: kongAI, labels: kongAILabels, constKey: "token_type", constVal: "completion_tokens", constAt: -1},
		{name: "kong_ai_llm_provider_latency_ms", desc: "LLM response Latency for each AI plugins per ai_provider in Kong",
			hist: true, bounds: kongUpstreamBounds, scale: 1, measure: measureLLMLatencyMS, project: kongAI, labels: kongAILabels},
	},
}

// ---------------------------------------------------------------------------
// apisix: the Prometheus plugin's names and labels (gateway-formats.md §2c,
// the 3.18 label set).

var apisixBounds = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000}

func apisixKey(e *gateway.Event, _ dimensions) (tupleKey, bool) {
	// route and service: ids (the plugin's default, prefer_name false);
	// node: the balancer ip, without the port.
	return tupleKey{status: e.StatusCode, route: e.RouteID, uri: e.Route, host: e.Host, service: e.ServiceID,
		consumer: e.Consumer, target: hostOf(e.Target), source: e.Source,
		provider: e.GenAI.Provider, model: llmModel(e)}, true
}

func apisixStatus(k tupleKey) tupleKey {
	k.provider = ""
	return k
}

func apisixOthers(k tupleKey) tupleKey {
	return tupleKey{route: k.route, service: k.service, consumer: k.consumer, target: k.target, model: k.model, overflow: k.overflow}
}

func apisixStatusLabels(k *tupleKey, m pcommon.Map) {
	m.PutStr("code", statusString(k.status))
	m.PutStr("route", k.route)
	m.PutStr("matched_uri", k.uri)
	m.PutStr("matched_host", k.host)
	m.PutStr("service", k.service)
	m.PutStr("consumer", k.consumer)
	m.PutStr("node", k.target)
	apisixLLMLabels(k, m)
	m.PutStr("response_source", sourceName(k.source, "upstream", "apisix"))
}

func apisixOtherLabels(k *tupleKey, m pcommon.Map) {
	m.PutStr("route", k.route)
	m.PutStr("service", k.service)
	m.PutStr("consumer", k.consumer)
	m.PutStr("node", k.target)
	apisixLLMLabels(k, m)
}

func apisixLLMLabels(k *tupleKey, m pcommon.Map) {
	if k.model != "" {
		m.PutStr("request_type", "ai_chat")
	} else {
		m.PutStr("request_type", "traditional_http")
	}
	m.PutStr("request_llm_model", k.model)
	m.PutStr("llm_model", k.model)
}

var apisixProfile = profile{
	name: profileAPISIX,
	key:  apisixKey,
	families: []family{
		{name: "apisix_http_status", desc: "HTTP status codes per service in APISIX",
			measure: measureCount, project: apisixStatus, labels: apisixStatusLabels},
		{name: "apisix_http_latency", desc: "HTTP request latency in milliseconds per service in APISIX",
			hist: true, bounds: apisixBounds, scale: 1, measure: measureTotalMS, project: apisixOthers, labels: apisixOtherLabels,
			constKey: "type", constVal: "request"},
		{name: "apisix_http_latency", desc: "HTTP request latency in milliseconds per service in APISIX",
			hist: true, bounds: apisixBounds, scale: 1, measure: measureUpstreamMS, project: apisixOthers, labels: apisixOtherLabels,
			constKey: "type", constVal: "upstream"},
		{name: "apisix_http_latency", desc: "HTTP request latency in milliseconds per service in APISIX",
			hist: true, bounds: apisixBounds, scale: 1, measure: measureGatewayMS, project: apisixOthers, labels: apisixOtherLabels,
			constKey: "type", constVal: "apisix"},
		{name: "apisix_bandwidth", desc: "Total bandwidth in bytes consumed per service in APISIX",
			measure: measureRequestBytes, project: apisixOthers, labels: apisixOtherLabels, constKey: "type", constVal: "ingress"},
		{name: "apisix_bandwidth", desc: "Total bandwidth in bytes consumed per service in APISIX",
			measure: measureResponseBytes, project: apisixOthers, labels: apisixOtherLabels, constKey: "type", constVal: "egress"},
	},
}

func profileByName(name string) *profile {
	switch name {
	case profileKong:
		return &kongProfile
	case profileAPISIX:
		return &apisixProfile
	default:
		return &otelProfile
	}
}

// ---------------------------------------------------------------------------
// helpers

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

func sourceName(s gateway.Source, upstream, gw string) string {
	switch s {
	case gateway.SourceUpstream:
		return upstream
	case gateway.SourceGateway:
		return gw
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
