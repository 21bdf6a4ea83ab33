package gatewayreceiver

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/health"
)

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
	for i, sd := range d.span {
		if v := e.Dims[i]; v != "" {
			k.dims[i] = v
		} else if sd.def != nil {
			k.dims[i] = *sd.def
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

var otelProxy = &projection{keep: func(k tupleKey) tupleKey {
	k.provider, k.model = "", ""
	return k
}}

var otelLLM = &projection{keep: func(k tupleKey) tupleKey {
	return tupleKey{namespace: k.namespace, gateway: k.gateway, route: k.route, provider: k.provider, model: k.model, overflow: k.overflow}
}}

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
		m.PutStr("gateway.response.source", sourceName(k.source, "upstream", "gateway", "gateway"))
	}
}

func otelLLMLabels(k *tupleKey, m pcommon.Map) {
	putNonEmpty(m, "http.route", k.route)
	putNonEmpty(m, "gen_ai.provider.name", k.provider)
	putNonEmpty(m, "gen_ai.response.model", k.model)
}

var otelProfile = profile{
	name:   profileOTel,
	health: &otelHealth,
	key:    otelKey,
	families: []family{
		{name: "gateway.requests", unit: "{request}", desc: "Requests proxied by the gateway.",
			measure: measureCount, project: otelProxy, labels: otelLabels, spanDims: true},
		{name: "http.server.request.duration", unit: "s", desc: "Duration of requests as the gateway saw them.",
			hist: true, bounds: semconvDurationBounds, scale: 1e-3, measure: measureTotalMS, project: otelProxy, labels: otelLabels, spanDims: true},
		{name: "gateway.upstream.duration", unit: "s", desc: "Time spent waiting for the upstream.",
			hist: true, bounds: semconvDurationBounds, scale: 1e-3, measure: measureUpstreamMS, project: otelProxy, labels: otelLabels, spanDims: true},
		{name: "gateway.added.duration", unit: "s", desc: "Latency the gateway added (total minus upstream).",
			hist: true, bounds: semconvDurationBounds, scale: 1e-3, measure: measureGatewayMS, project: otelProxy, labels: otelLabels, spanDims: true},
		{name: "gateway.bandwidth", unit: "By", desc: "Bytes received from and sent to clients.",
			measure: measureRequestBytes, project: otelProxy, labels: otelLabels, spanDims: true, constKey: "network.io.direction", constVal: "receive", constAt: -1},
		{name: "gateway.bandwidth", unit: "By", desc: "Bytes received from and sent to clients.",
			measure: measureResponseBytes, project: otelProxy, labels: otelLabels, spanDims: true, constKey: "network.io.direction", constVal: "transmit", constAt: -1},
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

// otel health: a one-hot gauge per (upstream, target, address) over the
// states of the gateway's kind, and per-upstream counts by state.
var otelHealth = health.Naming{
	Target: health.Metric{Name: "gateway.upstream.target.health",
		Desc: "1 for the state an upstream target's address is in, 0 for the other states of its gateway."},
	WriteTarget: func(dps pmetric.NumberDataPointSlice, r *health.Row, ts pcommon.Timestamp) {
		for _, s := range r.States() {
			a := health.Point(dps, ts, r.Removed, health.OneHot(r.State, s), 4)
			a.PutStr("gateway.upstream.name", r.Upstream())
			a.PutStr("gateway.target", r.Target())
			a.PutStr("gateway.target.address", r.Address())
			a.PutStr("state", s.String())
		}
	},
	Upstream: &health.Metric{Name: "gateway.upstream.targets", Unit: "{target}", Desc: "Upstream target addresses by state."},
	WriteUpstream: func(dps pmetric.NumberDataPointSlice, u *health.UpstreamRow, ts pcommon.Timestamp) {
		for _, s := range u.States() {
			a := health.Point(dps, ts, u.Removed, u.Counts[s], 2)
			a.PutStr("gateway.upstream.name", u.Name())
			a.PutStr("state", s.String())
		}
	},
}
