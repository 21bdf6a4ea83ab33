package traffic

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// kong: the Prometheus plugin's names and labels (docs/gateways.md §1c).

// The families' names, HELP texts and buckets are Kong's plugin's, from the
// table pushed metrics share (gateway.KongFamilies, internal/gateway/kong_prom.go).
var (
	kongLatencyBounds  = gateway.KongLatencyBounds
	kongUpstreamBounds = gateway.KongUpstreamBounds
)

// kongFam names a family of Kong's plugin.
func kongFam(f gateway.KongFam) *gateway.KongFamily { return &gateway.KongFamilies[f] }

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
var kongAIProviderBounds = gateway.KongAIProviderBounds

var kongProfile = profile{
	name: ProfileKong,
	key:  kongKey,
	families: []family{
		{name: kongFam(gateway.KongHTTPRequests).Name, desc: kongFam(gateway.KongHTTPRequests).Help,
			measure: measureCount, view: kongRequests, labels: kongRequestLabels},
		{name: kongFam(gateway.KongKongLatency).Name, desc: kongFam(gateway.KongKongLatency).Help,
			hist: true, bounds: kongLatencyBounds, scale: 1, measure: measureGatewayMS, view: kongLatency, labels: kongLatencyLabels},
		{name: kongFam(gateway.KongUpstreamLatency).Name, desc: kongFam(gateway.KongUpstreamLatency).Help,
			hist: true, bounds: kongUpstreamBounds, scale: 1, measure: measureUpstreamMS, view: kongLatency, labels: kongLatencyLabels},
		{name: kongFam(gateway.KongRequestLatency).Name, desc: kongFam(gateway.KongRequestLatency).Help,
			hist: true, bounds: kongUpstreamBounds, scale: 1, measure: measureTotalMS, view: kongLatency, labels: kongLatencyLabels},
		{name: kongFam(gateway.KongBandwidth).Name, desc: kongFam(gateway.KongBandwidth).Help,
			measure: measureKongRequestBytes, view: kongBandwidth, labels: kongBandwidthLabels, constKey: "direction", constVal: "ingress", constAt: 2},
		{name: kongFam(gateway.KongBandwidth).Name, desc: kongFam(gateway.KongBandwidth).Help,
			measure: measureKongResponseBytes, view: kongBandwidth, labels: kongBandwidthLabels, constKey: "direction", constVal: "egress", constAt: 2},
		{name: kongFam(gateway.KongAIRequests).Name, desc: kongFam(gateway.KongAIRequests).Help,
			measure: measureLLMCount, view: kongAI, labels: kongAILabels},
		{name: kongFam(gateway.KongAICost).Name, desc: kongFam(gateway.KongAICost).Help,
			double: true, measure: measureKongCost, view: kongAI, labels: kongAILabels},
		{name: kongFam(gateway.KongAIProviderLatency).Name, desc: kongFam(gateway.KongAIProviderLatency).Help,
			hist: true, bounds: kongAIProviderBounds, scale: 1, measure: measureKongProviderMS, view: kongAI, labels: kongAILabels},
		{name: kongFam(gateway.KongAITokens).Name, desc: kongTokensHelp,
			measure: measureKongInputTokens, view: kongAI, labels: kongAILabels, constKey: "token_type", constVal: "prompt_tokens", constAt: kongTokenTypeAt},
		{name: kongFam(gateway.KongAITokens).Name, desc: kongTokensHelp,
			measure: measureKongOutputTokens, view: kongAI, labels: kongAILabels, constKey: "token_type", constVal: "completion_tokens", constAt: kongTokenTypeAt},
		{name: kongFam(gateway.KongAITokens).Name, desc: kongTokensHelp,
			measure: measureKongTotalTokens, view: kongAI, labels: kongAILabels, constKey: "token_type", constVal: "total_tokens", constAt: kongTokenTypeAt},
	},
}

// kongTokensHelp is the HELP Kong writes for kong_ai_llm_tokens_total: the
// cost family's text, as exporter.lua has it (3.8 to 3.9.3 and master), so
// an exposition diffs clean against Kong's.
var kongTokensHelp = kongFam(gateway.KongAITokens).Help
