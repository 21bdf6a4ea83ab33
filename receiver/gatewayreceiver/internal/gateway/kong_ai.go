package gateway

import (
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

// kongAIObject records where an `ai` object is (read later by kongGenAI,
// only up to the value it uses). Like encoding/json filling a map, a second
// `ai` object adds to the first, and null drops both.
func (d *scanner) kongAIObject() {
	switch d.peek() {
	case '{':
		if d.aiN < len(d.aiInline) {
			d.aiInline[d.aiN] = d.pos
		} else {
			d.aiMore = append(d.aiMore, d.pos) // only a repeated key gets here
		}
		d.aiN++
		d.skipValue()
	case 'n':
		d.literal("null")
		d.aiN, d.aiMore = 0, d.aiMore[:0]
	default:
		d.typeError("ai")
	}
}

// aiObject returns the offset of the i-th recorded `ai` object.
func (d *scanner) aiObject(i int) int {
	if i < len(d.aiInline) {
		return d.aiInline[i]
	}
	return d.aiMore[i-len(d.aiInline)]
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
func (d *scanner) kongGenAI(g *GenAI) error {
	if d.aiN == 0 {
		return nil
	}
	// One pass finds the last value of each preferred key (a repeated key
	// overwrites, as in a map) and whether there are others.
	var at [len(kongAIPreferred)]int
	others := false
	d.forEachAIKey(func(key jsonString, pos int) {
		for i, name := range kongAIPreferred {
			if key.equals(name) {
				at[i] = pos
				return
			}
		}
		others = true
	})
	for i, key := range kongAIPreferred {
		if at[i] == 0 {
			continue
		}
		if ok, err := d.kongAIValue(g, key, at[i]); ok || err != nil {
			return err
		}
	}
	if !others {
		return nil
	}
	// Rare: no proxy plugin logged statistics. Sorting costs a map and a
	// slice.
	last := map[string]int{}
	d.forEachAIKey(func(key jsonString, pos int) {
		if k := d.unquote(key); !slices.Contains(kongAIPreferred[:], k) {
			last[k] = pos
		}
	})
	keys := make([]string, 0, len(last))
	for k := range last {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		if ok, err := d.kongAIValue(g, key, last[key]); ok || err != nil {
			return err
		}
	}
	return nil
}

// forEachAIKey calls fn with each key of the recorded `ai` objects, in
// order, and the offset of its value (never 0: the entry starts before).
func (d *scanner) forEachAIKey(fn func(key jsonString, pos int)) {
	var key jsonString
	for i := range d.aiN {
		d.pos = d.aiObject(i) + 1
		for first := true; d.member(&first, &key); {
			fn(key, d.pos)
			d.skipValue()
		}
	}
}

// kongAIPlugin is the part of one `ai` value that GenAI needs (the fields
// of the reference kongAIPlugin struct, type-checked alike).
type kongAIPlugin struct {
	provider, requestModel, responseModel string
	llmLatency                            Number
	prompt, completion, total, cost       Number
}

// kongAIValue reads the `ai` value at pos into g; ok is false when it is
// not an object, or carries none of the GenAI fields (g is then untouched).
func (d *scanner) kongAIValue(g *GenAI, key string, pos int) (ok bool, err error) {
	d.pos = pos
	if d.peek() != '{' {
		return false, nil
	}
	p := kongAIPlugin{llmLatency: Unknown, prompt: Unknown, completion: Unknown, total: Unknown, cost: Unknown}
	d.resetErrors()
	d.kongAIPlugin(&p)
	if err := d.entryError(); err != nil {
		if d.abort != nil {
			// Number's own errors ("want a number, got …") carry no field.
			return false, errors.New("ai." + key + ": " + err.Error())
		}
		return false, errors.New("ai." + key + "." + err.Error())
	}
	var pl plausible
	in := pl.count("usage.prompt_tokens", p.prompt, maxTokens)
	out := pl.count("usage.completion_tokens", p.completion, maxTokens)
	total := pl.count("usage.total_tokens", p.total, maxTokens)
	cost := pl.amount("usage.cost", p.cost, maxCost)
	latency := pl.ms("meta.llm_latency", p.llmLatency)
	if pl.err != nil {
		return false, errors.New("ai." + key + "." + pl.err.Error())
	}
	if p.provider == "" && p.requestModel == "" && p.responseModel == "" && in < 0 && out < 0 {
		return false, nil
	}
	g.Provider, g.RequestModel, g.ResponseModel = p.provider, p.requestModel, p.responseModel
	g.InputTokens, g.OutputTokens, g.TotalTokens, g.Cost = in, out, total, cost
	g.ProviderMS = latency
	return true, nil
}

func (d *scanner) kongAIPlugin(p *kongAIPlugin) {
	d.pos++ // '{', checked by the caller
	var key jsonString
	for first := true; d.member(&first, &key); {
		switch {
		case key.is("meta"):
			d.kongAIMeta(p)
		case key.is("usage"):
			d.kongAIUsage(p)
		default:
			d.skipValue()
		}
	}
}

func (d *scanner) kongAIMeta(p *kongAIPlugin) {
	if !d.object("meta") {
		return
	}
	var key jsonString
	for first := true; d.member(&first, &key); {
		switch {
		case key.is("provider_name"):
			d.text(&p.provider, "meta.provider_name")
		case key.is("request_model"):
			d.text(&p.requestModel, "meta.request_model")
		case key.is("response_model"):
			d.text(&p.responseModel, "meta.response_model")
		case key.is("llm_latency"):
			d.num(&p.llmLatency)
		default:
			d.skipValue()
		}
	}
}

func (d *scanner) kongAIUsage(p *kongAIPlugin) {
	if !d.object("usage") {
		return
	}
	var key jsonString
	for first := true; d.member(&first, &key); {
		switch {
		case key.is("prompt_tokens"):
			d.num(&p.prompt)
		case key.is("completion_tokens"):
			d.num(&p.completion)
		case key.is("total_tokens"):
			d.num(&p.total)
		case key.is("cost"):
			d.num(&p.cost)
		default:
			d.skipValue()
		}
	}
}
