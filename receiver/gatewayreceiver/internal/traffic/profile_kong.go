package traffic

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// kong: the Prometheus plugin's names and labels (docs/gateways.md §1c).

var (
	kongLatencyBounds  = []float64{1, 2, 5, 7, 10, 15, 20, 30, 50, 75, 100, 200, 500, 750, 1000, 3000, 6000}
	kongUpstreamBounds = []float64{25, 50, 80, 100, 250, 400, 700, 1000, 2000, 5000, 10000, 30000, 60000}
)

func kongKey(e *gateway.Event, d *Dimensions) (tuple, bool) {
	// ai_model is meta.request_model (§1c). route = route.name, falling
	// back to route.id; spans carry only
	// http.route (a path), which stands in for both.
	route := firstOf(e.RouteName, e.RouteID, e.Route)
	if route == "" {
		return tuple{}, false // Kong's log() returns early without a route
	}
	ws := e.Workspace
	if ws == "" {
		ws = "default" // the only workspace of Kong OSS; spans do not say
	}
	// consumer: the username with per_consumer, else "" (the plugin's
	// default: its handler fills it only `if conf.per_consumer`).
	var consumer string
	if d.PerConsumer {
		consumer = e.Consumer
	}
	return tuple{route: route, service: serviceOf(e), status: e.StatusCode, source: e.Source,
		workspace: ws, consumer: consumer, provider: e.GenAI.Provider, model: e.GenAI.RequestModel, node: nodeOf(e, d)}, true
}

var kongRequests = &view{keep: func(k tuple) tuple {
	return tuple{service: k.service, route: k.route, status: k.status, source: k.source, workspace: k.workspace, consumer: k.consumer, node: k.node, overflow: k.overflow}
}}

var kongLatency = &view{keep: func(k tuple) tuple {
	return tuple{service: k.service, route: k.route, workspace: k.workspace, node: k.node, overflow: k.overflow}
}}

var kongBandwidth = &view{keep: func(k tuple) tuple {
	return tuple{service: k.service, route: k.route, workspace: k.workspace, consumer: k.consumer, node: k.node, overflow: k.overflow}
}}

var kongAI = &view{keep: func(k tuple) tuple {
	return tuple{provider: k.provider, model: k.model, workspace: k.workspace, node: k.node, overflow: k.overflow}
}}

// The label writers put Kong's labels in Kong's order; a family's constant
// label (direction) follows them.
func kongRequestLabels(k *tuple, m pcommon.Map) {
	m.PutStr("service", k.service)
	m.PutStr("route", k.route)
	m.PutStr("code", statusString(k.status))
	m.PutStr("source", sourceName(k.source, "service", "kong", "kong"))
	m.PutStr("workspace", k.workspace)
	m.PutStr("consumer", k.consumer)
}

func kongLatencyLabels(k *tuple, m pcommon.Map) {
	m.PutStr("service", k.service)
	m.PutStr("route", k.route)
	m.PutStr("workspace", k.workspace)
}

func kongBandwidthLabels(k *tuple, m pcommon.Map) {
	m.PutStr("service", k.service)
	m.PutStr("route", k.route)
	m.PutStr("workspace", k.workspace)
	m.PutStr("consumer", k.consumer)
}

func kongAILabels(k *tuple, m pcommon.Map) {
	m.PutStr("ai_provider", k.provider)
	m.PutStr("ai_model", k.model)
	m.PutStr("cache_status", "")
	m.PutStr("vector_db", "")
	m.PutStr("embeddings_provider", "")
	m.PutStr("embeddings_model", "")
	m.PutStr("workspace", k.workspace)
}

// kongTokenTypeAt is where Kong writes token_type: after embeddings_model,
// before workspace (§1c).
const kongTokenTypeAt = 6

// kongAIProviderBounds are Kong's AI_LLM_PROVIDER_LATENCY_BUCKETS (3.8+, §1c).
var kongAIProviderBounds = []float64{250, 500, 1000, 1500, 2000, 2500, 3000, 3500, 4000, 4500, 5000, 10000, 30000, 60000}

var kongProfile = profile{
	name: ProfileKong,
	key:  kongKey,
	families: []family{
		{name: "kong_http_requests_total", desc: "HTTP status codes per consumer/service/route in Kong",
			measure: measureCount, view: kongRequests, labels: kongRequestLabels},
		{name: "kong_kong_latency_ms", desc: "Latency added by Kong and enabled plugins for each service/route in Kong",
			hist: true, bounds: kongLatencyBounds, scale: 1, measure: measureGatewayMS, view: kongLatency, labels: kongLatencyLabels},
		{name: "kong_upstream_latency_ms", desc: "Latency added by upstream response for each service/route in Kong",
			hist: true, bounds: kongUpstreamBounds, scale: 1, measure: measureUpstreamMS, view: kongLatency, labels: kongLatencyLabels},
		{name: "kong_request_latency_ms", desc: "Total latency incurred during requests for each service/route in Kong",
			hist: true, bounds: kongUpstreamBounds, scale: 1, measure: measureTotalMS, view: kongLatency, labels: kongLatencyLabels},
		{name: "kong_bandwidth_bytes", desc: "Total bandwidth (ingress/egress) throughput in bytes",
			measure: measureKongRequestBytes, view: kongBandwidth, labels: kongBandwidthLabels, constKey: "direction", constVal: "ingress", constAt: 2},
		{name: "kong_bandwidth_bytes", desc: "Total bandwidth (ingress/egress) throughput in bytes",
			measure: measureKongResponseBytes, view: kongBandwidth, labels: kongBandwidthLabels, constKey: "direction", constVal: "egress", constAt: 2},
		{name: "kong_ai_llm_requests_total", desc: "AI requests total per ai_provider in Kong",
			measure: measureLLMCount, view: kongAI, labels: kongAILabels},
		{name: "kong_ai_llm_cost_total", desc: "AI requests cost per ai_provider/cache in Kong",
			double: true, measure: measureKongCost, view: kongAI, labels: kongAILabels},
		{name: "kong_ai_llm_provider_latency_ms", desc: "LLM response Latency for each AI plugins per ai_provider in Kong",
			hist: true, bounds: kongAIProviderBounds, scale: 1, measure: measureKongProviderMS, view: kongAI, labels: kongAILabels},
		{name: "kong_ai_llm_tokens_total", desc: kongTokensHelp,
			measure: measureKongInputTokens, view: kongAI, labels: kongAILabels, constKey: "token_type", constVal: "prompt_tokens", constAt: kongTokenTypeAt},
		{name: "kong_ai_llm_tokens_total", desc: kongTokensHelp,
			measure: measureKongOutputTokens, view: kongAI, labels: kongAILabels, constKey: "token_type", constVal: "completion_tokens", constAt: kongTokenTypeAt},
		{name: "kong_ai_llm_tokens_total", desc: kongTokensHelp,
			measure: measureKongTotalTokens, view: kongAI, labels: kongAILabels, constKey: "token_type", constVal: "total_tokens", constAt: kongTokenTypeAt},
	},
}

// kongTokensHelp is the HELP Kong writes for kong_ai_llm_tokens_total: the
// cost family's text, as exporter.lua has it (3.8 to 3.9.3 and master), so
// an exposition diffs clean against Kong's.
const kongTokensHelp = "AI requests cost per ai_provider/cache in Kong"
