package gateway

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// kongAISampleEvent is what testdata/kong-3.8-http-log-ai-proxy.json maps to.
// The fixture is an ai-proxy request as Kong ≥ 3.8 logs it: the §1d envelope,
// with the `ai.proxy` object serialize-analytics.lua writes, holding the
// values Kong's own OpenAI spec expects (_EXPECTED_CHAT_STATS in
// spec/03-plugins/38-ai-proxy/02-openai_integration_spec.lua: openai,
// gpt-3.5-turbo → gpt-3.5-turbo-0613, 25 + 12 = 37 tokens, cost 0.00037).
func kongAISampleEvent() Event {
	e := base()
	e.Kind, e.Method, e.StatusCode, e.Source = KindKong, "POST", 200, SourceUpstream
	e.Route, e.RouteID, e.RouteName = "/openai/v1/chat/completions", "5c1b9a44-7a4c-4c3e-9d6e-2f0d3f1c7a10", "openai-chat"
	e.ServiceID, e.ServiceName, e.ServiceHost, e.Upstream = "3e2b7c1d-5f6a-4b8c-9d0e-1f2a3b4c5d6e", "openai-service", "api.openai.com", "api.openai.com"
	e.Workspace, e.Target, e.TargetPort = "default", "162.159.140.245", 443
	e.TotalMS, e.UpstreamMS, e.AddedMS, e.RequestSize, e.ResponseSize = 1536, 1532, 3, 323, 1045
	e.GenAI = GenAI{Provider: "openai", RequestModel: "gpt-3.5-turbo", ResponseModel: "gpt-3.5-turbo-0613", InputTokens: 25, OutputTokens: 12, TotalTokens: 37, Cost: 0.00037, FirstTokenMS: Unknown, ProviderMS: 1530}
	return e
}

func readKongAISample(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("testdata/kong-3.8-http-log-ai-proxy.json")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestKongHTTPLogAIProxy(t *testing.T) {
	got, n, errs, err := decodeKong(t, readKongAISample(t))
	if err != nil || len(errs) != 0 || n != 1 || len(got) != 1 {
		t.Fatalf("n=%d errs=%v err=%v events=%d, want one event", n, errs, err, len(got))
	}
	if want := kongAISampleEvent(); got[0] != want {
		t.Fatalf("got  %+v\nwant %+v", got[0], want)
	}
}

// TestKongHTTPLogWithoutAI: an entry without `ai` (or with nothing GenAI in
// it) is no LLM request: GenAI stays empty, token counts Unknown. The
// decoder reuses its entry, so an `ai` entry first must not leak into them.
func TestKongHTTPLogWithoutAI(t *testing.T) {
	sample, err := os.ReadFile("testdata/kong-3.8-http-log.json")
	if err != nil {
		t.Fatal(err)
	}
	plain := string(sample)
	withAI := func(ai string) string {
		return strings.Replace(plain, `"source": "upstream"`, `"ai": `+ai+`, "source": "upstream"`, 1)
	}
	body := "[" + readKongAISample(t) + "," + plain + "," +
		withAI(`null`) + "," +
		withAI(`{}`) + "," +
		// A cached answer's cache object, another plugin's keys: nothing to read.
		withAI(`{"proxy": {"cache": {"cache_status": "Hit", "fetch_latency": 21}}, "sanitizer": {"pii_identified": 2}}`) + "," +
		// 3.6's request payload sits beside the plugins, a string value is
		// some other plugin's: both ignored.
		withAI(`{"payload": {"request": "{\"messages\":[]}"}, "audit": "x", "ai-proxy": {"meta": {}, "usage": {}}}`) + "]"
	got, n, errs, err := decodeKong(t, body)
	if err != nil || len(errs) != 0 || n != 6 || len(got) != 6 {
		t.Fatalf("n=%d errs=%v err=%v events=%d, want 6 events", n, errs, err, len(got))
	}
	if got[0] != kongAISampleEvent() {
		t.Fatalf("entry 0: got %+v", got[0])
	}
	for i, e := range got[1:] {
		if e != kongSampleEvent() {
			t.Errorf("entry %d: got  %+v\nwant %+v", i+1, e, kongSampleEvent())
		}
		if e.GenAI.IsLLM() || e.GenAI.InputTokens != Unknown || e.GenAI.OutputTokens != Unknown {
			t.Errorf("entry %d: GenAI %+v, want empty with Unknown tokens", i+1, e.GenAI)
		}
	}
}

// TestKongHTTPLogAIShapes: which `ai` value GenAI comes from.
func TestKongHTTPLogAIShapes(t *testing.T) {
	sample, err := os.ReadFile("testdata/kong-3.8-http-log.json")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, ai string
		want     GenAI
	}{{
		// Kong 3.6–3.7: keyed by plugin name, with the request payload
		// beside it (the 3.7 audit-log reference's layout; the 3.6/3.7
		// spec's values).
		name: "3.7 ai-proxy",
		ai: `{"payload": {"request": "{}"}, "ai-proxy": {"payload": {"response": "{}"}, "cache": {},
			"meta": {"plugin_id": "6e7c40f6-ce96-48e4-a366-d109c169e444", "provider_name": "openai", "request_model": "gpt-3.5-turbo", "response_model": "gpt-3.5-turbo-0613"},
			"usage": {"prompt_tokens": 25, "completion_tokens": 12, "total_tokens": 37, "cost": 0.00037}}}`,
		want: GenAI{Provider: "openai", RequestModel: "gpt-3.5-turbo", ResponseModel: "gpt-3.5-turbo-0613", InputTokens: 25, OutputTokens: 12, TotalTokens: 37, Cost: 0.00037, FirstTokenMS: Unknown, ProviderMS: Unknown},
	}, {
		// A transformer's own LLM call and the proxied request: the proxy
		// namespace wins whatever the key order.
		name: "transformer and proxy",
		ai: `{"ai-request-transformer": {"meta": {"provider_name": "openai", "request_model": "gpt-4", "response_model": "gpt-3.5-turbo-0613"}, "usage": {"prompt_tokens": 25, "completion_tokens": 12}},
			"proxy": {"meta": {"provider_name": "cohere", "request_model": "command", "response_model": "command", "llm_latency": 2670}, "usage": {"prompt_tokens": 28, "completion_tokens": 20, "total_tokens": 48}}}`,
		want: GenAI{Provider: "cohere", RequestModel: "command", ResponseModel: "command", InputTokens: 28, OutputTokens: 20, TotalTokens: 48, Cost: Unknown, FirstTokenMS: Unknown, ProviderMS: 2670},
	}, {
		name: "ai-proxy before ai-proxy-advanced",
		ai: `{"ai-proxy-advanced": {"meta": {"provider_name": "azure", "request_model": "gpt-35-turbo"}},
			"ai-proxy": {"meta": {"provider_name": "cohere", "request_model": "command"}}}`,
		want: GenAI{Provider: "cohere", RequestModel: "command", InputTokens: Unknown, OutputTokens: Unknown, TotalTokens: Unknown, Cost: Unknown, FirstTokenMS: Unknown, ProviderMS: Unknown},
	}, {
		// Only transformers: the first key in byte order, never map order.
		name: "transformers only",
		ai: `{"ai-response-transformer": {"meta": {"provider_name": "azure", "request_model": "gpt-35-turbo"}},
			"ai-request-transformer": {"meta": {"provider_name": "openai", "request_model": "gpt-4"}, "usage": {"prompt_tokens": 25}}}`,
		want: GenAI{Provider: "openai", RequestModel: "gpt-4", InputTokens: 25, OutputTokens: Unknown, TotalTokens: Unknown, Cost: Unknown, FirstTokenMS: Unknown, ProviderMS: Unknown},
	}, {
		// A proxy value without GenAI fields (a cache-only object) does not
		// hide a later one.
		name: "empty proxy, then ai-proxy",
		ai:   `{"proxy": {"cache": {"cache_status": "Miss"}}, "ai-proxy": {"meta": {"provider_name": "mistral", "response_model": "mistral-tiny"}}}`,
		want: GenAI{Provider: "mistral", ResponseModel: "mistral-tiny", InputTokens: Unknown, OutputTokens: Unknown, TotalTokens: Unknown, Cost: Unknown, FirstTokenMS: Unknown, ProviderMS: Unknown},
	}, {
		// Nested guardrail objects and the 3.11+ token details are ignored;
		// numbers that are not counts read as Unknown, as sizes do.
		name: "3.11 extras, odd counts",
		ai: `{"proxy": {"aws-guardrails": {"guardrails_id": "g1", "input_processing_latency": 12}, "meta": {"provider_name": "bedrock", "request_model": "m", "request_mode": "oneshot"},
			"usage": {"prompt_tokens": "7", "prompt_tokens_details": {"cached_tokens": 2}, "completion_tokens": -1}}}`,
		want: GenAI{Provider: "bedrock", RequestModel: "m", InputTokens: 7, OutputTokens: Unknown, TotalTokens: Unknown, Cost: Unknown, FirstTokenMS: Unknown, ProviderMS: Unknown},
	}, {
		// Values after the one read are never decoded, so their shape
		// cannot reject the entry.
		name: "later values unread",
		ai:   `{"proxy": {"meta": {"provider_name": "openai"}}, "ai-request-transformer": {"meta": 5}}`,
		want: GenAI{Provider: "openai", InputTokens: Unknown, OutputTokens: Unknown, TotalTokens: Unknown, Cost: Unknown, FirstTokenMS: Unknown, ProviderMS: Unknown},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := strings.Replace(string(sample), `"source": "upstream"`, `"ai": `+c.ai+`, "source": "upstream"`, 1)
			got, _, errs, err := decodeKong(t, body)
			if err != nil || len(errs) != 0 || len(got) != 1 {
				t.Fatalf("errs=%v err=%v events=%d", errs, err, len(got))
			}
			want := kongSampleEvent()
			want.GenAI = c.want
			if got[0] != want {
				t.Fatalf("GenAI %+v, want %+v", got[0].GenAI, c.want)
			}
		})
	}
}

// TestKongHTTPLogAIWrongTypes: a wrong type in a field GenAI is read from
// rejects that entry only, naming the field.
func TestKongHTTPLogAIWrongTypes(t *testing.T) {
	cases := []struct{ ai, want string }{
		{`"x"`, `ai: wrong type, got JSON string`},
		{`[]`, `ai: wrong type, got JSON array`},
		{`{"proxy": {"meta": "openai"}}`, `ai.proxy.meta: wrong type, got JSON string`},
		{`{"proxy": {"meta": {"request_model": 4}}}`, `ai.proxy.meta.request_model: wrong type, got JSON number`},
		{`{"ai-proxy": {"meta": {"provider_name": {}}}}`, `ai.ai-proxy.meta.provider_name: wrong type, got JSON object`},
		{`{"proxy": {"usage": {"completion_tokens": "twelve"}}}`, `ai.proxy: want a number, got "twelve"`},
		{`{"proxy": {"usage": []}}`, `ai.proxy.usage: wrong type, got JSON array`},
	}
	for _, c := range cases {
		ai, want := c.ai, c.want
		body := `[{"response":{"status":200},"route":{"name":"r"},"ai":` + ai + `},{"response":{"status":200}}]`
		got, n, errs, err := decodeKong(t, body)
		if err != nil || n != 2 || len(got) != 1 || len(errs) != 1 {
			t.Errorf("ai %s: n=%d events=%d errs=%v err=%v, want the first entry rejected", ai, n, len(got), errs, err)
			continue
		}
		if errs[0].Index != 0 || errs[0].Err.Error() != want {
			t.Errorf("ai %s: error %q, want %q", ai, errs[0].Error(), "entry 0: "+want)
		}
	}
}

// TestKongAIMapReused: the decoder's entry keeps its ai map between
// entries; only the raw values it holds are allocated.
func TestKongAIMapReused(t *testing.T) {
	var k kongEntry
	k.reset()
	if k.AI != nil {
		t.Fatal("fresh entry has an ai map")
	}
	k.AI = map[string]json.RawMessage{"proxy": json.RawMessage(`{}`)}
	m := k.AI
	k.reset()
	if len(k.AI) != 0 || k.AI == nil {
		t.Fatalf("ai after reset = %v, want the same map, empty", k.AI)
	}
	k.AI["x"] = nil
	if len(m) != 1 {
		t.Fatal("reset replaced the map")
	}
}
