package gateway

// Kong's Prometheus plugin as it prints its families: names, HELP texts,
// label order and histogram buckets (docs/gateways.md §1c, §6). One table
// serves every input that leaves under Kong's names: the kong naming
// profile (spans, http-log entries) and Kong's pushed OpenTelemetry metrics
// (kong_metrics.go, §1e).

// KongFamilyType is how Kong's plugin declares a family.
type KongFamilyType uint8

// The family types of Kong's plugin.
const (
	KongCounter KongFamilyType = iota
	KongGauge
	KongHistogram
)

// KongFamily is one family of Kong's Prometheus plugin.
type KongFamily struct {
	// Name is the family as exposed (with the plugin's kong_ prefix).
	Name string
	// Help is the plugin's HELP text, byte for byte.
	Help string
	Type KongFamilyType
	// Labels are the label names in the order the plugin writes them.
	Labels []string
	// Bounds are a histogram's buckets in ms, without +Inf.
	Bounds []float64
	// Double: the values are fractional (cost); counters are otherwise
	// whole numbers.
	Double bool
}

// Kong's histogram buckets (kong/plugins/prometheus/exporter.lua, §1c).
var (
	// KongLatencyBounds is KONG_LATENCY_BUCKETS (3.9+; ≤ 3.8 lack 3000, 6000).
	KongLatencyBounds = []float64{1, 2, 5, 7, 10, 15, 20, 30, 50, 75, 100, 200, 500, 750, 1000, 3000, 6000}
	// KongUpstreamBounds is UPSTREAM_LATENCY_BUCKETS (upstream, request and
	// session latency; unchanged 3.0 to master).
	KongUpstreamBounds = []float64{25, 50, 80, 100, 250, 400, 700, 1000, 2000, 5000, 10000, 30000, 60000}
	// KongAIProviderBounds is AI_LLM_PROVIDER_LATENCY_BUCKETS (3.8+).
	KongAIProviderBounds = []float64{250, 500, 1000, 1500, 2000, 2500, 3000, 3500, 4000, 4500, 5000, 10000, 30000, 60000}
)

// kongMaxBounds is the most buckets a Kong family has (KongLatencyBounds).
const kongMaxBounds = 17

// KongFam indexes KongFamilies.
type KongFam uint8

// Kong's families, in the order an exposition of ours lists them (the
// per-request families in the kong profile's order, then the node
// families, then the Enterprise MCP families).
const (
	KongHTTPRequests KongFam = iota
	KongKongLatency
	KongUpstreamLatency
	KongRequestLatency
	KongBandwidth
	KongAIRequests
	KongAICost
	KongAIProviderLatency
	KongAITokens
	KongUpstreamTargetHealth
	KongNginxConnections
	KongNginxTimers
	KongDatastoreReachable
	KongControlPlaneConnected
	KongMemoryWorkersLuaVMs
	KongMemorySharedDict
	KongMemorySharedDictTotal
	KongDataPlaneCertExpiry
	KongAIMCPResponseBodySize
	KongAIMCPLatency
	KongAIMCPErrors
	kongFamCount
)

// kongAILabels are the AI families' labels up to workspace (3.8 to master).
var kongAILabels = []string{"ai_provider", "ai_model", "cache_status", "vector_db", "embeddings_provider", "embeddings_model", "workspace"}

// kongMCPLabels are the Enterprise MCP families' labels as Kong's docs
// print them (§1e: from a documentation sample, not from source).
var kongMCPLabels = []string{"service", "route", "method", "workspace", "tool_name"}

// KongFamilies is Kong's Prometheus plugin, family by family (exporter.lua
// at master 22246ef2 for the OSS families, §1c and §6; Kong's docs for the
// Enterprise MCP ones, §1e).
var KongFamilies = [kongFamCount]KongFamily{
	KongHTTPRequests: {Name: "kong_http_requests_total", Help: "HTTP status codes per consumer/service/route in Kong",
		Labels: []string{"service", "route", "code", "source", "workspace", "consumer"}},
	KongKongLatency: {Name: "kong_kong_latency_ms", Help: "Latency added by Kong and enabled plugins for each service/route in Kong",
		Type: KongHistogram, Labels: []string{"service", "route", "workspace"}, Bounds: KongLatencyBounds},
	KongUpstreamLatency: {Name: "kong_upstream_latency_ms", Help: "Latency added by upstream response for each service/route in Kong",
		Type: KongHistogram, Labels: []string{"service", "route", "workspace"}, Bounds: KongUpstreamBounds},
	KongRequestLatency: {Name: "kong_request_latency_ms", Help: "Total latency incurred during requests for each service/route in Kong",
		Type: KongHistogram, Labels: []string{"service", "route", "workspace"}, Bounds: KongUpstreamBounds},
	KongBandwidth: {Name: "kong_bandwidth_bytes", Help: "Total bandwidth (ingress/egress) throughput in bytes",
		Labels: []string{"service", "route", "direction", "workspace", "consumer"}},
	KongAIRequests: {Name: "kong_ai_llm_requests_total", Help: "AI requests total per ai_provider in Kong",
		Labels: kongAILabels},
	KongAICost: {Name: "kong_ai_llm_cost_total", Help: "AI requests cost per ai_provider/cache in Kong",
		Labels: kongAILabels, Double: true},
	KongAIProviderLatency: {Name: "kong_ai_llm_provider_latency_ms", Help: "LLM response Latency for each AI plugins per ai_provider in Kong",
		Type: KongHistogram, Labels: kongAILabels, Bounds: KongAIProviderBounds},
	// The tokens family's HELP is the cost family's text: a copy in Kong's
	// exporter (3.8 to master), repeated so an exposition diffs clean.
	KongAITokens: {Name: "kong_ai_llm_tokens_total", Help: "AI requests cost per ai_provider/cache in Kong",
		Labels: []string{"ai_provider", "ai_model", "cache_status", "vector_db", "embeddings_provider", "embeddings_model", "token_type", "workspace"}},
	KongUpstreamTargetHealth: {Name: "kong_upstream_target_health",
		Help: "Health status of targets of upstream. States = healthchecks_off|healthy|unhealthy|dns_error, value is 1 when state is populated.",
		Type: KongGauge, Labels: []string{"upstream", "target", "address", "state", "subsystem"}},
	KongNginxConnections: {Name: "kong_nginx_connections_total", Help: "Number of connections by subsystem",
		Type: KongGauge, Labels: []string{"node_id", "subsystem", "state"}},
	KongNginxTimers: {Name: "kong_nginx_timers", Help: "Number of nginx timers",
		Type: KongGauge, Labels: []string{"state"}},
	KongDatastoreReachable: {Name: "kong_datastore_reachable", Help: "Datastore reachable from Kong, 0 is unreachable",
		Type: KongGauge},
	KongControlPlaneConnected: {Name: "kong_control_plane_connected", Help: "Kong connected to control plane, 0 is unconnected",
		Type: KongGauge},
	KongMemoryWorkersLuaVMs: {Name: "kong_memory_workers_lua_vms_bytes", Help: "Allocated bytes in worker Lua VM",
		Type: KongGauge, Labels: []string{"node_id", "pid", "kong_subsystem"}},
	KongMemorySharedDict: {Name: "kong_memory_lua_shared_dict_bytes", Help: "Allocated slabs in bytes in a shared_dict",
		Type: KongGauge, Labels: []string{"node_id", "shared_dict", "kong_subsystem"}},
	KongMemorySharedDictTotal: {Name: "kong_memory_lua_shared_dict_total_bytes", Help: "Total capacity in bytes of a shared_dict",
		Type: KongGauge, Labels: []string{"node_id", "shared_dict", "kong_subsystem"}},
	KongDataPlaneCertExpiry: {Name: "kong_data_plane_cluster_cert_expiry_timestamp", Help: "Unix timestamp of Data Plane's cluster_cert expiry time",
		Type: KongGauge},
	KongAIMCPResponseBodySize: {Name: "kong_ai_mcp_response_body_size_bytes", Help: "MCP server response body sizes in bytes",
		Type: KongHistogram, Labels: kongMCPLabels},
	KongAIMCPLatency: {Name: "kong_ai_mcp_latency_ms", Help: "MCP server latencies in milliseconds",
		Type: KongHistogram, Labels: kongMCPLabels},
	KongAIMCPErrors: {Name: "kong_ai_mcp_error_total", Help: "Total MCP server errors by type",
		Labels: []string{"service", "route", "type", "method", "workspace", "tool_name"}},
}

// kongMaxLabels is the most labels a Kong family has (the tokens family).
const kongMaxLabels = 8
