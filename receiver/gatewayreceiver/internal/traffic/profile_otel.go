package traffic

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// otel: HTTP semantic-convention names plus gateway.* attributes.

// Semantic-convention default buckets of http.server.request.duration (s).
var semconvDurationBounds = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// GenAI token-usage buckets from the GenAI semantic conventions.
var genAITokenBounds = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}

func otelKey(e *gateway.Event, d *Dimensions) (tuple, bool) {
	k := tuple{namespace: e.Namespace, gateway: e.Gateway, route: e.Route, method: e.Method, status: e.StatusCode,
		provider: e.GenAI.Provider, model: llmModel(e)}
	if d.Service {
		k.service = serviceOf(e)
	}
	if d.Upstream {
		k.upstream = e.Upstream
	}
	if d.Target {
		k.target, k.targetPort = e.Target, e.TargetPort
	}
	if d.Consumer {
		k.consumer = e.Consumer
	}
	if d.Source {
		k.source = e.Source
	}
	for i, sd := range d.Span {
		if v := e.Dims[i]; v != "" {
			k.dims[i] = v
		} else if sd.Default != nil {
			k.dims[i] = *sd.Default
		}
	}
	return k, true
}

func llmModel(e *gateway.Event) string {
	if e.GenAI.ResponseModel != "" {
		return e.GenAI.ResponseModel
	}
	return e.GenAI.RequestModel
}

var otelProxy = &view{keep: func(k tuple) tuple {
	k.provider, k.model = "", ""
	return k
}}

var otelLLM = &view{keep: func(k tuple) tuple {
	return tuple{namespace: k.namespace, gateway: k.gateway, route: k.route, provider: k.provider, model: k.model, overflow: k.overflow}
}}

func otelLabels(k *tuple, m pcommon.Map) {
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
		m.PutStr("gateway.response.source", sourceName(k.source, "upstream", "gateway", "gateway"))
	}
}

func otelLLMLabels(k *tuple, m pcommon.Map) {
	putNonEmpty(m, "http.route", k.route)
	putNonEmpty(m, "gen_ai.provider.name", k.provider)
	putNonEmpty(m, "gen_ai.response.model", k.model)
}

var otelProfile = profile{
	name: ProfileOTel,
	key:  otelKey,
	families: []family{
		{name: "gateway.requests", unit: "{request}", desc: "Requests proxied by the gateway.",
			measure: measureCount, view: otelProxy, labels: otelLabels, spanDims: true},
		{name: "http.server.request.duration", unit: "s", desc: "Duration of requests as the gateway saw them.",
			hist: true, bounds: semconvDurationBounds, scale: 1e-3, measure: measureTotalMS, view: otelProxy, labels: otelLabels, spanDims: true},
		{name: "gateway.upstream.duration", unit: "s", desc: "Time spent waiting for the upstream.",
			hist: true, bounds: semconvDurationBounds, scale: 1e-3, measure: measureUpstreamMS, view: otelProxy, labels: otelLabels, spanDims: true},
		{name: "gateway.added.duration", unit: "s", desc: "Latency the gateway added (total minus upstream).",
			hist: true, bounds: semconvDurationBounds, scale: 1e-3, measure: measureGatewayMS, view: otelProxy, labels: otelLabels, spanDims: true},
		{name: "gateway.bandwidth", unit: "By", desc: "Bytes received from and sent to clients.",
			measure: measureRequestBytes, view: otelProxy, labels: otelLabels, spanDims: true, constKey: "network.io.direction", constVal: "receive", constAt: -1},
		{name: "gateway.bandwidth", unit: "By", desc: "Bytes received from and sent to clients.",
			measure: measureResponseBytes, view: otelProxy, labels: otelLabels, spanDims: true, constKey: "network.io.direction", constVal: "transmit", constAt: -1},
		{name: "gateway.llm.requests", unit: "{request}", desc: "Requests carrying GenAI attributes, by provider and model.",
			measure: measureLLMCount, view: otelLLM, labels: otelLLMLabels},
		{name: "gateway.llm.duration", unit: "s", desc: "Upstream (provider) latency of GenAI requests.",
			hist: true, bounds: semconvDurationBounds, scale: 1e-3, measure: measureLLMLatencyMS, view: otelLLM, labels: otelLLMLabels},
		{name: "gen_ai.client.token.usage", unit: "{token}", desc: "Tokens used by GenAI requests.",
			hist: true, bounds: genAITokenBounds, scale: 1, measure: measureInputTokens, view: otelLLM, labels: otelLLMLabels,
			constKey: "gen_ai.token.type", constVal: "input", constAt: -1},
		{name: "gen_ai.client.token.usage", unit: "{token}", desc: "Tokens used by GenAI requests.",
			hist: true, bounds: genAITokenBounds, scale: 1, measure: measureOutputTokens, view: otelLLM, labels: otelLLMLabels,
			constKey: "gen_ai.token.type", constVal: "output", constAt: -1},
	},
}
