package gatewayreceiver

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/health"
)

// apisix: the Prometheus plugin's names and labels (docs/gateways.md §2c,
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
	name:   profileAPISIX,
	health: &apisixHealth,
	key:    apisixKey,
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

// apisix health: apisix_upstream_status{name,ip,port}, 1 for healthy and
// mostly_healthy (docs/gateways.md §2c).
var apisixHealth = health.Naming{
	Target: health.Metric{Name: "apisix_upstream_status", Desc: "Upstream status from health check"},
	WriteTarget: func(dps pmetric.NumberDataPointSlice, r *health.Row, ts pcommon.Timestamp) {
		var v int64
		if r.State == gateway.HealthHealthy || r.State == gateway.HealthMostlyHealthy {
			v = 1
		}
		a := health.Point(dps, ts, r.Removed, v, 3)
		a.PutStr("name", r.Upstream())
		a.PutStr("ip", r.IP())
		a.PutStr("port", r.Port())
	},
}
