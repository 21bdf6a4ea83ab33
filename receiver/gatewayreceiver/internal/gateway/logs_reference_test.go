package gateway

// The encoding/json decoding of Kong and APISIX log entries that the
// scanner (jsonscan.go) replaced, kept verbatim as the reference that
// FuzzDecodeLogs and TestDecodeLogsFixtures compare it with, and that
// BenchmarkDecodeLogs measures it against.

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
)

// refDecodeKongHTTPLog is DecodeKongHTTPLog through encoding/json.
func refDecodeKongHTTPLog(body []byte, fn func(*Event)) (entries int, entryErrs []EntryError, err error) {
	return decodeLog[kongEntry](body, false, fn)
}

// refDecodeAPISIXHTTPLogger is DecodeAPISIXHTTPLogger through encoding/json.
func refDecodeAPISIXHTTPLogger(body []byte, fn func(*Event)) (entries int, entryErrs []EntryError, err error) {
	return decodeLog[apisixEntry](body, true, fn)
}

// kongEntry is the part of Kong's http-log payload (kong.log.serialize(),
// docs/gateways.md §1d) that metrics need. Headers, query strings and
// timestamps are skipped without being decoded into values.
type kongEntry struct {
	Request struct {
		Method string `json:"method"`
		Size   Number `json:"size"`
	} `json:"request"`
	Response struct {
		Status *Number `json:"status"`
		Size   Number  `json:"size"`
	} `json:"response"`
	Route *struct {
		ID    string   `json:"id"`
		Name  string   `json:"name"`
		Paths []string `json:"paths"`
	} `json:"route"`
	Service *struct {
		ID   string `json:"id"`
		Name string `json:"name"`
		Host string `json:"host"`
	} `json:"service"`
	Consumer *struct {
		ID       string `json:"id"`
		Username string `json:"username"`
		CustomID string `json:"custom_id"`
	} `json:"consumer"`
	Latencies struct {
		Kong    Number `json:"kong"`
		Proxy   Number `json:"proxy"`
		Request Number `json:"request"`
	} `json:"latencies"`
	Tries []struct {
		IP    string `json:"ip"`
		Port  Number `json:"port"`
		State string `json:"state"`
	} `json:"tries"`
	Source        string `json:"source"`
	WorkspaceName string `json:"workspace_name"`
	// AI is what Kong's AI plugins log, by namespace (kong_ai.go). Values
	// stay raw: only the one GenAI is read from is decoded.
	AI map[string]json.RawMessage `json:"ai"`
}

func (k *kongEntry) reset() {
	// The ai map is kept and emptied: json.Unmarshal fills a non-nil map in
	// place, so an AI gateway's entries do not allocate a map each.
	ai := k.AI
	clear(ai)
	*k = kongEntry{AI: ai}
	k.Request.Size, k.Response.Size = unknownNumber(), unknownNumber()
	k.Latencies.Kong, k.Latencies.Proxy, k.Latencies.Request = unknownNumber(), unknownNumber(), unknownNumber()
}

// event maps a decoded entry (§1d, and §1c for the label rules).
func (k *kongEntry) event(e *Event) error {
	if err := startEntry(e, KindKong, k.Response.Status, k.Request.Method); err != nil {
		return err
	}
	if r := k.Route; r != nil {
		e.RouteID, e.RouteName = r.ID, r.Name
		if len(r.Paths) > 0 {
			e.Route = r.Paths[0]
		}
	}
	if s := k.Service; s != nil {
		e.ServiceID, e.ServiceName, e.ServiceHost = s.ID, s.Name, s.Host
		e.Upstream = s.Host
	}
	if c := k.Consumer; c != nil {
		// consumer.username only, as Kong's plugin labels it (§1c): a
		// consumer without a username has consumer="".
		e.Consumer = c.Username
	}
	e.Workspace = k.WorkspaceName
	// source: "upstream" when the service answered; "kong" for errors and
	// plugin exits (kong/constants.lua RESPONSE_SOURCE).
	switch k.Source {
	case "upstream", "service":
		e.Source = SourceUpstream
	case "":
	default:
		e.Source = SourceGateway
	}
	var p plausible
	e.TotalMS = p.ms("latencies.request", k.Latencies.Request)
	e.UpstreamMS = p.ms("latencies.proxy", k.Latencies.Proxy) // -1 (no upstream) reads as Unknown
	e.AddedMS = p.ms("latencies.kong", k.Latencies.Kong)
	if k.Source == "" {
		e.Source = kongSourceOf(e.UpstreamMS)
	}
	e.RequestSize = p.count("request.size", k.Request.Size, maxBytes)
	e.ResponseSize = p.count("response.size", k.Response.Size, maxBytes)
	if p.err != nil {
		return p.err
	}
	if n := len(k.Tries); n > 0 {
		last := k.Tries[n-1]
		e.Target = last.IP
		if p := last.Port.size(); p > 0 && p < 65536 {
			e.TargetPort = p
		}
	}
	return kongGenAI(&e.GenAI, k.AI)
}

// refKongAIPlugin is the part of one `ai` value that GenAI needs.
type refKongAIPlugin struct {
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
	var p refKongAIPlugin
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

// apisixEntry is the part of APISIX's http-logger default log format
// (log-util.lua get_full_log, docs/gateways.md §2d) that metrics need.
type apisixEntry struct {
	Request struct {
		Method string `json:"method"`
		URI    string `json:"uri"`
		Size   Number `json:"size"`
	} `json:"request"`
	Response struct {
		Status *Number `json:"status"`
		Size   Number  `json:"size"`
	} `json:"response"`
	Server struct {
		Hostname string `json:"hostname"`
	} `json:"server"`
	Upstream  string `json:"upstream"`
	ServiceID string `json:"service_id"`
	RouteID   string `json:"route_id"`
	Consumer  *struct {
		Username string `json:"username"`
	} `json:"consumer"`
	Latency         Number `json:"latency"`
	UpstreamLatency Number `json:"upstream_latency"`
	APISIXLatency   Number `json:"apisix_latency"`
	// LLMSummary is what ai-proxy adds with logging.summaries (apisix_llm.go).
	LLMSummary refLLMSummary `json:"llm_summary"`
}

func (a *apisixEntry) reset() {
	*a = apisixEntry{}
	a.Request.Size, a.Response.Size = unknownNumber(), unknownNumber()
	a.Latency, a.UpstreamLatency, a.APISIXLatency = unknownNumber(), unknownNumber(), unknownNumber()
	a.LLMSummary.reset()
}

func (a *apisixEntry) event(e *Event) error {
	if err := startEntry(e, KindAPISIX, a.Response.Status, a.Request.Method); err != nil {
		return err
	}
	e.Instance = a.Server.Hostname
	// A route miss: get_full_log leaves route_id unset and sets service_id
	// to $host; http-logger then writes route_id "no-matched" (since 2.0,
	// §2d). Neither is an entity: the request host is client input. Like
	// APISIX's own plugin, a miss has no route and no service.
	if a.RouteID != "" && a.RouteID != apisixRouteMiss {
		e.RouteID = a.RouteID
		e.ServiceID = a.ServiceID
	}
	// upstream is $upstream_addr: the balancer's "ip:port" (several,
	// comma-separated, after retries; the last one answered).
	e.Target = lastAddr(a.Upstream)
	if a.Consumer != nil {
		e.Consumer = a.Consumer.Username
	}
	var p plausible
	e.TotalMS = p.ms("latency", a.Latency)
	e.UpstreamMS = p.ms("upstream_latency", a.UpstreamLatency)
	e.AddedMS = p.ms("apisix_latency", a.APISIXLatency)
	if e.UpstreamMS >= 0 {
		e.Source = SourceUpstream
	} else {
		e.Source = SourceGateway
	}
	e.RequestSize = p.count("request.size", a.Request.Size, maxBytes)
	e.ResponseSize = p.count("response.size", a.Response.Size, maxBytes)
	a.LLMSummary.genAI(&e.GenAI, &p)
	return p.err
}

// refLLMSummary is the part of llm_summary GenAI needs.
type refLLMSummary struct {
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
	// UpstreamMS is $apisix_upstream_response_time (ms).
	UpstreamMS Number `json:"upstream_response_time"`
}

// looseBool is a JSON true; anything else (false, "true" as a string from
// ctx.var, null) reads as its plain meaning or false, never an error.
type looseBool bool

func (b *looseBool) UnmarshalJSON(v []byte) error {
	s := string(v)
	*b = looseBool(s == "true" || s == `"true"`)
	return nil
}

func (s *refLLMSummary) reset() {
	*s = refLLMSummary{PromptTokens: unknownNumber(), CompletionTokens: unknownNumber(), Duration: unknownNumber(), UpstreamMS: unknownNumber()}
}

// genAI fills g. gen_ai.request.model is the model the request was made to,
// which is llm_model; the client's model only stands in when APISIX logged
// none. APISIX does not log the response model, so ResponseModel stays empty.
func (s *refLLMSummary) genAI(g *GenAI, p *plausible) {
	g.RequestModel = string(s.Model)
	if g.RequestModel == "" {
		g.RequestModel = string(s.RequestModel)
	}
	g.ClientModel, g.ClientModelLogged = string(s.RequestModel), g.RequestModel != ""
	g.Stream = bool(s.Stream)
	g.FirstTokenMS = p.ms("llm_summary.duration", s.Duration)
	g.ProviderMS = p.ms("llm_summary.upstream_response_time", s.UpstreamMS)
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
