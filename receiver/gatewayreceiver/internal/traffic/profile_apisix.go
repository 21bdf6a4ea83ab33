package traffic

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// apisix: the Prometheus plugin's names and labels (docs/gateways.md §2c,
// the 3.18 label set).

var apisixBounds = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000}

// DEFAULT_TOKEN_BUCKETS of the token distributions (3.18, §2c).
var apisixTokenBounds = []float64{1, 10, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000, 1000000}

func apisixKey(e *gateway.Event, d *Dimensions) (tuple, bool) {
	// route and service: ids (the plugin's default), or with prefer_name
	// the names, falling back to the ids as APISIX does; node: the
	// balancer ip, without the port. llm_model is the model asked of the
	// provider, request_llm_model the client's (§2c).
	route, service := e.RouteID, e.ServiceID
	if d.PreferName {
		route, service = firstOf(e.RouteName, e.RouteID), firstOf(e.ServiceName, e.ServiceID)
	}
	// request_llm_model is "" when the client named no model (APISIX sets
	// it only from the body's model); an input that does not log it apart
	// (spans) has only the model the request was made to.
	client := e.GenAI.ClientModel
	if client == "" && !e.GenAI.ClientModelLogged {
		client = llmModel(e)
	}
	return tuple{status: e.StatusCode, route: route, uri: e.Route, host: e.Host, service: service,
		consumer: e.Consumer, target: hostOf(e.Target), source: e.Source,
		model: modelLabel(llmModel(e)), clientModel: modelLabel(client), stream: e.GenAI.Stream, node: nodeOf(e, d)}, true
}

// maxModelLabel is the most bytes of a model name APISIX 3.18 writes as a
// label (exporter.lua MAX_MODEL_LABEL_LEN: the names are client input).
const maxModelLabel = 128

// modelLabel is a model name as APISIX labels it: its first 128 bytes
// (model_to_label's str_sub), cut back to a whole UTF-8 character so the
// value stays valid for Prometheus, which APISIX's byte cut may not.
func modelLabel(s string) string { return gateway.CutLabel(s, maxModelLabel) }

var apisixStatus = &view{keep: func(k tuple) tuple { return k }}

var apisixOthers = &view{keep: func(k tuple) tuple {
	return tuple{route: k.route, service: k.service, consumer: k.consumer, target: k.target,
		model: k.model, clientModel: k.clientModel, stream: k.stream, node: k.node, overflow: k.overflow}
}}

// apisixLLM keeps the labels of the LLM families (no matched uri, host or
// status): apisixOthers' labels, a projection of its own so that the LLM
// families' series exist only for tuples with LLM requests.
var apisixLLM = &view{keep: apisixOthers.keep}

// apisixLLMFamilyLabels: route_id, service_id, consumer, node, then the LLM
// labels (the 3.18 llm families; apisix_llm_latency's type comes first).
func apisixLLMFamilyLabels(k *tuple, m pcommon.Map) {
	m.PutStr("route_id", k.route)
	m.PutStr("service_id", k.service)
	m.PutStr("consumer", k.consumer)
	m.PutStr("node", k.target)
	apisixLLMLabels(k, m)
}

func apisixStatusLabels(k *tuple, m pcommon.Map) {
	m.PutStr("code", statusString(k.status))
	m.PutStr("route", k.route)
	m.PutStr("matched_uri", k.uri)
	m.PutStr("matched_host", k.host)
	m.PutStr("service", k.service)
	m.PutStr("consumer", k.consumer)
	m.PutStr("node", k.target)
	apisixLLMLabels(k, m)
	// "nginx": proxied, no upstream response (core/response.lua).
	m.PutStr("response_source", sourceName(k.source, "upstream", "apisix", "nginx"))
}

func apisixOtherLabels(k *tuple, m pcommon.Map) {
	m.PutStr("route", k.route)
	m.PutStr("service", k.service)
	m.PutStr("consumer", k.consumer)
	m.PutStr("node", k.target)
	apisixLLMLabels(k, m)
}

func apisixLLMLabels(k *tuple, m pcommon.Map) {
	switch {
	case k.model == "" && k.clientModel == "":
		m.PutStr("request_type", "traditional_http")
	case k.stream:
		m.PutStr("request_type", "ai_stream")
	default:
		m.PutStr("request_type", "ai_chat")
	}
	m.PutStr("request_llm_model", k.clientModel)
	m.PutStr("llm_model", k.model)
}

var apisixProfile = profile{
	name: ProfileAPISIX,
	key:  apisixKey,
	families: []family{
		{name: "apisix_http_status", desc: "HTTP status codes per service in APISIX",
			measure: measureCount, view: apisixStatus, labels: apisixStatusLabels},
		{name: "apisix_http_latency", desc: "HTTP request latency in milliseconds per service in APISIX",
			hist: true, bounds: apisixBounds, scale: 1, measure: measureTotalMS, view: apisixOthers, labels: apisixOtherLabels,
			constKey: "type", constVal: "request"},
		{name: "apisix_http_latency", desc: "HTTP request latency in milliseconds per service in APISIX",
			hist: true, bounds: apisixBounds, scale: 1, measure: measureUpstreamMS, view: apisixOthers, labels: apisixOtherLabels,
			constKey: "type", constVal: "upstream"},
		{name: "apisix_http_latency", desc: "HTTP request latency in milliseconds per service in APISIX",
			hist: true, bounds: apisixBounds, scale: 1, measure: measureGatewayMS, view: apisixOthers, labels: apisixOtherLabels,
			constKey: "type", constVal: "apisix"},
		{name: "apisix_bandwidth", desc: "Total bandwidth in bytes consumed per service in APISIX",
			measure: measureRequestBytes, view: apisixOthers, labels: apisixOtherLabels, constKey: "type", constVal: "ingress"},
		{name: "apisix_bandwidth", desc: "Total bandwidth in bytes consumed per service in APISIX",
			measure: measureResponseBytes, view: apisixOthers, labels: apisixOtherLabels, constKey: "type", constVal: "egress"},
		{name: "apisix_llm_latency", desc: "LLM request latency in milliseconds",
			hist: true, bounds: apisixBounds, scale: 1, measure: measureAPISIXLLMLatency, view: apisixLLM, labels: apisixLLMFamilyLabels,
			constKey: "type", constVal: "total", constAt: 0},
		{name: "apisix_llm_latency", desc: "LLM request latency in milliseconds",
			hist: true, bounds: apisixBounds, scale: 1, measure: measureAPISIXFirstTokenMS, view: apisixLLM, labels: apisixLLMFamilyLabels,
			constKey: "type", constVal: "ttft", constAt: 0},
		{name: "apisix_llm_prompt_tokens", desc: "LLM service consumed prompt tokens",
			measure: measureAPISIXPromptTokens, view: apisixLLM, labels: apisixLLMFamilyLabels},
		{name: "apisix_llm_completion_tokens", desc: "LLM service consumed completion tokens",
			measure: measureAPISIXCompletionTokens, view: apisixLLM, labels: apisixLLMFamilyLabels},
		{name: "apisix_llm_prompt_tokens_dist", desc: "LLM prompt tokens distribution per request",
			hist: true, bounds: apisixTokenBounds, scale: 1, measure: measureAPISIXPromptTokens, view: apisixLLM, labels: apisixLLMFamilyLabels},
		{name: "apisix_llm_completion_tokens_dist", desc: "LLM completion tokens distribution per request",
			hist: true, bounds: apisixTokenBounds, scale: 1, measure: measureAPISIXCompletionTokens, view: apisixLLM, labels: apisixLLMFamilyLabels},
	},
}
