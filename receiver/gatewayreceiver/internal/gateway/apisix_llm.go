package gateway

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
// What it does not carry: the provider (so GenAI.Provider stays empty) or
// the provider's response model. duration is $llm_time_to_first_token: the
// time to the first token of a streamed answer, the whole answer's time
// otherwise, "0" when no answer came (APISIX 3.18's exporter then observes
// no llm_latency); upstream_response_time is $apisix_upstream_response_time,
// in ms (ai-proxy sets it on success and on error alike), which 3.18
// observes as llm_latency{type="total"}.

// apisixLLMSummary is the part of llm_summary GenAI needs (the reference
// struct's fields, with its loose types: see looseText and looseBool).
type apisixLLMSummary struct {
	// requestModel is the client's `model` (request_llm_model).
	requestModel string
	// model is the model APISIX asked the provider for (llm_model): the
	// plugin's options.model, else the client's.
	model                    string
	promptTokens, completion Number
	// stream is true for a streamed request (request_type ai_stream).
	stream bool
	// duration is $llm_time_to_first_token (ms).
	duration Number
	// upstreamMS is $apisix_upstream_response_time (ms).
	upstreamMS Number
}

func (s *apisixLLMSummary) reset() {
	*s = apisixLLMSummary{promptTokens: Unknown, completion: Unknown, duration: Unknown, upstreamMS: Unknown}
}

// apisixLLM reads llm_summary. request_model and model are loose strings:
// APISIX copies the client's `model` whatever its JSON type, and its docs
// route on an object ("model": {"name": …}); rejecting such an entry would
// let a client keep its requests out of the metrics, so a non-string reads
// as "". stream is true only for true (or "true" from ctx.var).
func (d *scanner) apisixLLM(s *apisixLLMSummary) {
	if !d.object("llm_summary") {
		return
	}
	var key jsonString
	for first := true; d.member(&first, &key); {
		switch {
		case key.is("request_model"):
			d.looseText(&s.requestModel)
		case key.is("model"):
			d.looseText(&s.model)
		case key.is("prompt_tokens"):
			d.num(&s.promptTokens)
		case key.is("completion_tokens"):
			d.num(&s.completion)
		case key.is("stream"):
			d.looseBool(&s.stream)
		case key.is("duration"):
			d.num(&s.duration)
		case key.is("upstream_response_time"):
			d.num(&s.upstreamMS)
		default:
			d.skipValue()
		}
	}
}

// genAI fills g. gen_ai.request.model is the model the request was made to,
// which is llm_model; the client's model only stands in when APISIX logged
// none. APISIX does not log the response model, so ResponseModel stays empty.
func (s *apisixLLMSummary) genAI(g *GenAI, p *plausible) {
	g.RequestModel = s.model
	if g.RequestModel == "" {
		g.RequestModel = s.requestModel
	}
	// A summary with a model is an LLM request's, whose client model APISIX
	// logs ("" when the client named none).
	g.ClientModel, g.ClientModelLogged = s.requestModel, g.RequestModel != ""
	g.Stream = s.stream
	g.FirstTokenMS = p.ms("llm_summary.duration", s.duration)
	g.ProviderMS = p.ms("llm_summary.upstream_response_time", s.upstreamMS)
	g.InputTokens = p.count("llm_summary.prompt_tokens", s.promptTokens, maxTokens)
	g.OutputTokens = p.count("llm_summary.completion_tokens", s.completion, maxTokens)
}
