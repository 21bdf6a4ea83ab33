package gateway

import "encoding/json"

// APISIX's ai-proxy and ai-proxy-multi (logging.summaries: true) set
// ctx.llm_summary, and every logger's entry then carries it:
//
//	"llm_summary": {"request_model", "model", "duration", "prompt_tokens",
//	  "completion_tokens", "total_tokens", "upstream_response_time", …}
//
// Sources: apache/apisix apisix/plugins/ai-proxy/base.lua set_logging (the
// table, built from ctx.var.request_llm_model, llm_model,
// llm_time_to_first_token, llm_prompt_tokens, llm_completion_tokens, …) and
// apisix/utils/log-util.lua get_log_entry (entry.llm_summary =
// ctx.llm_summary, after the default or a custom log format);
// docs/en/latest/plugins/ai-proxy.md ("Send Request Log to Logger", and the
// variables' meanings under "Include LLM Information in Access Log").
//
// What it does not carry: the provider (so GenAI.Provider stays empty), the
// provider's response model, or the provider latency (duration is the time
// to the first token).

// apisixLLMSummary is the part of llm_summary GenAI needs.
type apisixLLMSummary struct {
	// RequestModel is the client's `model` (request_llm_model).
	RequestModel looseString `json:"request_model"`
	// Model is the model APISIX asked the provider for (llm_model): the
	// plugin's options.model, else the client's.
	Model            looseString `json:"model"`
	PromptTokens     Number      `json:"prompt_tokens"`
	CompletionTokens Number      `json:"completion_tokens"`
	// Stream is true for a streamed request (request_type ai_stream); a
	// non-boolean reads as false.
	Stream looseBool `json:"stream"`
	// Duration is $llm_time_to_first_token (ms).
	Duration Number `json:"duration"`
}

// looseBool is a JSON true; anything else (false, "true" as a string from
// ctx.var, null) reads as its plain meaning or false, never an error.
type looseBool bool

func (b *looseBool) UnmarshalJSON(v []byte) error {
	s := string(v)
	*b = looseBool(s == "true" || s == `"true"`)
	return nil
}

func (s *apisixLLMSummary) reset() {
	*s = apisixLLMSummary{PromptTokens: unknownNumber(), CompletionTokens: unknownNumber(), Duration: unknownNumber()}
}

// genAI fills g. gen_ai.request.model is the model the request was made to,
// which is llm_model; the client's model only stands in when APISIX logged
// none. APISIX does not log the response model, so ResponseModel stays empty.
func (s *apisixLLMSummary) genAI(g *GenAI, p *plausible) {
	g.RequestModel = string(s.Model)
	if g.RequestModel == "" {
		g.RequestModel = string(s.RequestModel)
	}
	g.ClientModel = string(s.RequestModel)
	g.Stream = bool(s.Stream)
	if g.Stream {
		// APISIX observes the time to first token for ai_stream only (§2c).
		g.FirstTokenMS = p.ms("llm_summary.duration", s.Duration)
	}
	g.InputTokens = p.count("llm_summary.prompt_tokens", s.PromptTokens, maxTokens)
	g.OutputTokens = p.count("llm_summary.completion_tokens", s.CompletionTokens, maxTokens)
}

// looseString is a JSON string; any other JSON value reads as "". APISIX
// copies the client's `model` into request_llm_model (and llm_model when the
// plugin sets none) whatever its JSON type, and its docs route on an object
// ("model": {"name": …}). Rejecting such an entry would let a client keep
// its requests out of the metrics, so the value is dropped instead.
type looseString string

func (s *looseString) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '"' {
		*s = ""
		return nil
	}
	return json.Unmarshal(b, (*string)(s))
}
