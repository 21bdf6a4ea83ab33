package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
)

// Kong's AI plugins add an `ai` object to the serialized log entry
// (kong.log.set_serialize_value), keyed by a log namespace; each value holds
// `meta` and `usage` (and `payload`, `cache`, guardrail objects we ignore):
//
//	"ai": {"proxy": {
//	  "meta":  {"plugin_id", "provider_name", "request_model", "response_model", "llm_latency"},
//	  "usage": {"prompt_tokens", "completion_tokens", "total_tokens", "time_per_token", "cost"}}}
//
// Sources:
//   - Kong ≥ 3.8: Kong/kong kong/llm/plugin/shared-filters/serialize-analytics.lua
//     writes "ai.<NAMESPACE>.meta" and ".usage", NAMESPACE = "proxy"
//     (kong/llm/plugin/observability.lua), for ai-proxy and
//     ai-proxy-advanced alike; the specs read log_message.ai.proxy
//     (spec/03-plugins/38-ai-proxy/02-openai_integration_spec.lua). Field
//     list: developer.konghq.com/ai-gateway/ai-audit-log-reference/
//     (Kong/developer.konghq.com app/ai-gateway/ai-audit-log-reference.md,
//     and PR #2433: the key is "a pre-defined log category", not the
//     plugin name).
//   - Kong 3.6–3.7, and the ai-request/response-transformer plugins after:
//     Kong/kong kong/llm/drivers/shared.lua post_request writes
//     "ai.<plugin_name>.meta", ".usage", ".cache" (log_entry_keys), e.g.
//     ai["ai-proxy"] or ai["ai-request-transformer"] (the 3.6/3.7 specs'
//     _EXPECTED_CHAT_STATS).
//
// Kong's docs spell the token keys prompt_token/completion_token; the code
// writes prompt_tokens/completion_tokens, which is what is read here.

// kongAIPreferred is the order in which `ai` keys are tried: the ≥ 3.8
// namespace, then the 3.6–3.7 plugin-name keys of the proxy plugins. Any
// other key (a transformer plugin's own LLM call) is tried after them in
// byte order, so the choice never depends on Go's map order.
var kongAIPreferred = [...]string{"proxy", "ai-proxy", "ai-proxy-advanced"}

// kongAIPlugin is the part of one `ai` value that GenAI needs.
type kongAIPlugin struct {
	Meta struct {
		ProviderName  string `json:"provider_name"`
		RequestModel  string `json:"request_model"`
		ResponseModel string `json:"response_model"`
		LLMLatency    Number `json:"llm_latency"` // ms
	} `json:"meta"`
	Usage struct {
		PromptTokens     Number `json:"prompt_tokens"`
		CompletionTokens Number `json:"completion_tokens"`
		TotalTokens      Number `json:"total_tokens"`
		Cost             Number `json:"cost"`
	} `json:"usage"`
}

// kongGenAI fills g from the first `ai` value (in kongAIPreferred order, then
// the other keys sorted) that carries a provider, a model or a token count.
// One event has one GenAI: other plugins' values are not merged in.
//
// Values that are not JSON objects are ignored (the `ai` object is open:
// plugins add their own keys), and values after the one read are never
// decoded; a wrong type in a field read here
// (meta.provider_name, meta.request_model, meta.response_model,
// usage.prompt_tokens, usage.completion_tokens) rejects the entry, as a
// wrong type in any other field read from the entry does.
func kongGenAI(g *GenAI, ai map[string]json.RawMessage) error {
	if len(ai) == 0 {
		return nil
	}
	for _, key := range kongAIPreferred {
		if ok, err := kongAIValue(g, key, ai[key]); ok || err != nil {
			return err
		}
	}
	// Rare: no proxy plugin logged statistics. Sorting costs one slice.
	keys := make([]string, 0, len(ai))
	for k := range ai {
		if !slices.Contains(kongAIPreferred[:], k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, key := range keys {
		if ok, err := kongAIValue(g, key, ai[key]); ok || err != nil {
			return err
		}
	}
	return nil
}

// kongAIValue reads ai[key] into g; ok is false when the value is absent, not
// an object, or carries none of the GenAI fields (g is then untouched).
func kongAIValue(g *GenAI, key string, raw json.RawMessage) (ok bool, err error) {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 || raw[0] != '{' {
		return false, nil
	}
	var p kongAIPlugin
	p.Usage.PromptTokens, p.Usage.CompletionTokens = unknownNumber(), unknownNumber()
	p.Usage.TotalTokens, p.Usage.Cost = unknownNumber(), unknownNumber()
	p.Meta.LLMLatency = unknownNumber()
	if err := json.Unmarshal(raw, &p); err != nil {
		return false, aiFieldError(key, err)
	}
	var pl plausible
	prefix := "ai." + key + "."
	in := pl.count(prefix+"usage.prompt_tokens", p.Usage.PromptTokens, maxTokens)
	out := pl.count(prefix+"usage.completion_tokens", p.Usage.CompletionTokens, maxTokens)
	total := pl.count(prefix+"usage.total_tokens", p.Usage.TotalTokens, maxTokens)
	cost := pl.amount(prefix+"usage.cost", p.Usage.Cost, maxCost)
	latency := pl.ms(prefix+"meta.llm_latency", p.Meta.LLMLatency)
	if pl.err != nil {
		return false, pl.err
	}
	m := &p.Meta
	if m.ProviderName == "" && m.RequestModel == "" && m.ResponseModel == "" && in < 0 && out < 0 {
		return false, nil
	}
	g.Provider, g.RequestModel, g.ResponseModel = m.ProviderName, m.RequestModel, m.ResponseModel
	g.InputTokens, g.OutputTokens, g.TotalTokens, g.Cost = in, out, total, cost
	g.ProviderMS = latency
	return true, nil
}

// aiFieldError names the offending field by its full path in the entry
// (ai.<key>.meta.request_model), as jsonError does for top-level fields.
func aiFieldError(key string, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return errors.New("ai." + key + "." + te.Field + ": wrong type, got JSON " + te.Value)
	}
	// Number's own errors ("want a number, got …") carry no field name.
	return errors.New("ai." + key + ": " + err.Error())
}
