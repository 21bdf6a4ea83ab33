package gateway

import (
	"os"
	"strings"
	"testing"
)

// apisixAISampleEvent is what testdata/apisix-http-logger-ai-proxy.json maps
// to: the §2d default format of an ai-proxy route (the docs' "Send Request
// Log to Logger" example: options.model gpt-4, the client sends no model),
// with the llm_summary table set_logging builds (base.lua) and log-util.lua
// adds to the entry.
func apisixAISampleEvent() Event {
	e := base()
	e.Kind, e.Method, e.StatusCode, e.Source = KindAPISIX, "POST", 200, SourceUpstream
	e.Instance, e.RouteID, e.Target = "7d8d831179d4", "ai-proxy-openai-route", "api.openai.com:443"
	e.TotalMS, e.UpstreamMS, e.AddedMS, e.RequestSize, e.ResponseSize = 2904.0000438690186, 2858, 46.000043869018555, 213, 1031
	e.GenAI = GenAI{RequestModel: "gpt-4", ClientModel: "gpt-4", ClientModelLogged: true, InputTokens: 23, OutputTokens: 8, TotalTokens: Unknown, Cost: Unknown, FirstTokenMS: 2103, ProviderMS: 2858}
	return e
}

func TestAPISIXHTTPLoggerAIProxy(t *testing.T) {
	sample, err := os.ReadFile("testdata/apisix-http-logger-ai-proxy.json")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := os.ReadFile("testdata/apisix-3.9-http-logger.json")
	if err != nil {
		t.Fatal(err)
	}
	// An AI entry, then the plain sample (its llm-free event must not inherit
	// the reused entry's summary), then the AI entry as one NDJSON line.
	one := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(string(plain)), "["), "]")
	body := strings.Join(strings.Fields(string(sample)), "") + "\n" + strings.Join(strings.Fields(one), "") + "\n" +
		strings.Join(strings.Fields(string(sample)), "")
	got, n, errs, err := decodeAPISIX(t, body)
	if err != nil || len(errs) != 0 || n != 3 || len(got) != 3 {
		t.Fatalf("n=%d events=%d errs=%v err=%v", n, len(got), errs, err)
	}
	if got[0] != apisixAISampleEvent() || got[2] != apisixAISampleEvent() {
		t.Fatalf("got  %+v\nwant %+v", got[0], apisixAISampleEvent())
	}
	if got[1] != apisixSampleEvent() || got[1].GenAI.IsLLM() || got[1].GenAI.InputTokens != Unknown || got[1].GenAI.OutputTokens != Unknown {
		t.Fatalf("entry without llm_summary: %+v", got[1])
	}
}

// TestAPISIXLLMSummaryShapes: which model is read, and what a client's model
// of another JSON type does.
func TestAPISIXLLMSummaryShapes(t *testing.T) {
	cases := []struct {
		name, summary string
		want          GenAI
	}{{
		// options.model overrides the client's: the provider was asked for
		// llm_model.
		name:    "override",
		summary: `{"request_model": "gpt-4o-mini", "model": "gpt-4", "prompt_tokens": 23, "completion_tokens": 8}`,
		want:    GenAI{RequestModel: "gpt-4", ClientModel: "gpt-4o-mini", ClientModelLogged: true, InputTokens: 23, OutputTokens: 8, TotalTokens: Unknown, Cost: Unknown, FirstTokenMS: Unknown, ProviderMS: Unknown},
	}, {
		name:    "client model only",
		summary: `{"request_model": "deepseek-chat", "prompt_tokens": "15", "completion_tokens": "4"}`,
		want:    GenAI{RequestModel: "deepseek-chat", ClientModel: "deepseek-chat", ClientModelLogged: true, InputTokens: 15, OutputTokens: 4, TotalTokens: Unknown, Cost: Unknown, FirstTokenMS: Unknown, ProviderMS: Unknown},
	}, {
		name:    "streamed",
		summary: `{"request_model": "gpt-4", "model": "gpt-4", "stream": true, "duration": 310, "prompt_tokens": 5}`,
		want:    GenAI{RequestModel: "gpt-4", ClientModel: "gpt-4", ClientModelLogged: true, Stream: true, InputTokens: 5, OutputTokens: Unknown, TotalTokens: Unknown, Cost: Unknown, FirstTokenMS: 310, ProviderMS: Unknown},
	}, {
		// The docs' nested client model ({"name": "openai"}) copied
		// verbatim: no model, the entry still counts.
		name:    "object model",
		summary: `{"request_model": {"name": "openai"}, "model": {"name": "openai"}, "prompt_tokens": 9}`,
		want:    GenAI{InputTokens: 9, OutputTokens: Unknown, TotalTokens: Unknown, Cost: Unknown, FirstTokenMS: Unknown, ProviderMS: Unknown},
	}, {
		// Summaries of a failed call: nginx variables never set. The
		// client named no model (request_llm_model ""): the plugin's was
		// asked for.
		name:    "no usage",
		summary: `{"model": "gpt-4", "prompt_tokens": "", "completion_tokens": null}`,
		want:    GenAI{RequestModel: "gpt-4", ClientModelLogged: true, InputTokens: Unknown, OutputTokens: Unknown, TotalTokens: Unknown, Cost: Unknown, FirstTokenMS: Unknown, ProviderMS: Unknown},
	}, {
		// A non-streamed answer: duration is its whole time; and the
		// upstream response time APISIX observes as llm_latency total.
		name:    "answered",
		summary: `{"request_model": "gpt-4", "model": "gpt-4", "stream": "false", "duration": "2103", "upstream_response_time": 2858, "prompt_tokens": 0, "completion_tokens": 0}`,
		want:    GenAI{RequestModel: "gpt-4", ClientModel: "gpt-4", ClientModelLogged: true, InputTokens: 0, OutputTokens: 0, TotalTokens: Unknown, Cost: Unknown, FirstTokenMS: 2103, ProviderMS: 2858},
	}, {
		name:    "null",
		summary: `null`,
		want:    GenAI{InputTokens: Unknown, OutputTokens: Unknown, TotalTokens: Unknown, Cost: Unknown, FirstTokenMS: Unknown, ProviderMS: Unknown},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, _, errs, err := decodeAPISIX(t, `{"response":{"status":200},"route_id":"r","llm_summary":`+c.summary+`}`)
			if err != nil || len(errs) != 0 || len(got) != 1 {
				t.Fatalf("errs=%v err=%v events=%d", errs, err, len(got))
			}
			if got[0].GenAI != c.want {
				t.Fatalf("GenAI %+v, want %+v", got[0].GenAI, c.want)
			}
		})
	}
}

// TestAPISIXLLMSummaryWrongTypes: token counts and the summary itself are
// typed like the entry's other fields; a wrong type rejects that entry only.
func TestAPISIXLLMSummaryWrongTypes(t *testing.T) {
	cases := []struct{ summary, want string }{
		{`"gpt-4"`, `llm_summary: wrong type, got JSON string`},
		{`{"prompt_tokens": "many"}`, `want a number, got "many"`},
		{`{"completion_tokens": {}}`, `want a number, got "{}"`},
	}
	for _, c := range cases {
		body := `{"response":{"status":200},"llm_summary":` + c.summary + `}` + "\n" + `{"response":{"status":200}}`
		got, n, errs, err := decodeAPISIX(t, body)
		if err != nil || n != 2 || len(got) != 1 || len(errs) != 1 {
			t.Errorf("summary %s: n=%d events=%d errs=%v err=%v, want the first entry rejected", c.summary, n, len(got), errs, err)
			continue
		}
		if errs[0].Index != 0 || errs[0].Err.Error() != c.want {
			t.Errorf("summary %s: error %q, want %q", c.summary, errs[0].Error(), "entry 0: "+c.want)
		}
	}
}
