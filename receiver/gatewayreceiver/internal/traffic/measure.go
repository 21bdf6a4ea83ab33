package traffic

import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"

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
