package gateway

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func decodeAPISIX(t *testing.T, body string) ([]Event, int, []EntryError, error) {
	t.Helper()
	var got []Event
	n, errs, err := DecodeAPISIXHTTPLogger([]byte(body), func(e *Event) { got = append(got, *e) })
	return got, n, errs, err
}

// apisixSampleEvent is what the verbatim APISIX 3.9.0 sample (§2d) maps to.
func apisixSampleEvent() Event {
	e := base()
	e.Kind, e.Method, e.StatusCode, e.Source = KindAPISIX, "GET", 200, SourceUpstream
	e.Instance, e.RouteID, e.Target = "7d8d831179d4", "http-logger-route", "3.213.1.197:80"
	e.TotalMS, e.UpstreamMS, e.AddedMS, e.RequestSize, e.ResponseSize = 1200.0000476837, 1133, 67.000047683716, 85, 617
	return e
}

func TestAPISIXHTTPLoggerShapes(t *testing.T) {
	sample, err := os.ReadFile("testdata/apisix-3.9-http-logger.json")
	if err != nil {
		t.Fatal(err)
	}
	entry := strings.TrimSpace(string(sample))
	entry = strings.TrimSuffix(strings.TrimPrefix(entry, "["), "]") // the one object
	compact := strings.Join(strings.Fields(entry), "")              // one line for NDJSON
	for name, body := range map[string]string{
		"array (concat_method json, the published sample)": string(sample),
		"one object (batch_max_size 1)":                    entry,
		"NDJSON (concat_method new_line)":                  compact + "\n" + compact + "\n" + compact,
	} {
		t.Run(name, func(t *testing.T) {
			got, n, errs, err := decodeAPISIX(t, body)
			if err != nil || len(errs) != 0 || n != len(got) || n == 0 {
				t.Fatalf("n=%d events=%d errs=%v err=%v", n, len(got), errs, err)
			}
			for _, e := range got {
				if e != apisixSampleEvent() {
					t.Fatalf("got  %+v\nwant %+v", e, apisixSampleEvent())
				}
			}
		})
	}
}

func TestAPISIXHTTPLoggerNoRouteAndBadLine(t *testing.T) {
	// No route matched: service_id is $host, no route_id, no upstream.
	body := `{"request":{"method":"GET","size":"40"},"response":{"status":404,"size":"230"},"service_id":"example.com","latency":0.5,"apisix_latency":0.5,"server":{"hostname":"h1"}}
{"request":{"method":"GET"},"response":{"status":200},"upstream":"10.0.0.1:80, 10.0.0.2:80","route_id":"1","service_id":"s","latency":30,"upstream_latency":20,"consumer":{"username":"bob"}}
{"response":{}}
{"broken`
	got, n, errs, err := decodeAPISIX(t, body)
	if err != nil || n != 4 || len(got) != 2 {
		t.Fatalf("n=%d events=%d err=%v", n, len(got), err)
	}
	noRoute := base()
	noRoute.Kind, noRoute.Method, noRoute.StatusCode, noRoute.Source, noRoute.Instance = KindAPISIX, "GET", 404, SourceGateway, "h1"
	noRoute.AddedMS = 0.5
	noRoute.TotalMS, noRoute.RequestSize, noRoute.ResponseSize = 0.5, 40, 230
	retried := base()
	retried.Kind, retried.Method, retried.StatusCode, retried.Source = KindAPISIX, "GET", 200, SourceUpstream
	retried.RouteID, retried.ServiceID, retried.Target, retried.Consumer, retried.TotalMS, retried.UpstreamMS = "1", "s", "10.0.0.2:80", "bob", 30, 20
	if got[0] != noRoute || got[1] != retried {
		t.Fatalf("got %+v\nwant %+v\n and %+v", got, noRoute, retried)
	}
	want := []string{"entry 2: response.status is missing", "entry 3: unexpected EOF"}
	if len(errs) != 2 || errs[0].Error() != want[0] || errs[1].Error() != want[1] {
		t.Fatalf("errors %v, want %v", errs, want)
	}
}

// FuzzDecodeAPISIXHTTPLogger: as FuzzDecodeKongHTTPLog.
// Run: go test ./internal/gateway -run '^$' -fuzz FuzzDecodeAPISIXHTTPLogger -fuzztime 60s
func FuzzDecodeAPISIXHTTPLogger(f *testing.F) {
	sample, err := os.ReadFile("testdata/apisix-3.9-http-logger.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sample)
	f.Add([]byte(`{"response":{"status":200}}` + "\n" + `{"response":{"status":"503"},"upstream":" : "}`))
	f.Add([]byte(`{"response":{"status":200},"latency":"NaN","upstream":","}`))
	ai, err := os.ReadFile("testdata/apisix-http-logger-ai-proxy.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ai)
	f.Add([]byte(`{"response":{"status":200},"llm_summary":{"model":["x"],"prompt_tokens":"-3","completion_tokens":1.5}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		n, errs, err := DecodeAPISIXHTTPLogger(body, func(e *Event) { checkEvent(t, e) })
		if err != nil && (n != 0 || len(errs) != 0) {
			t.Fatalf("body error %v with %d entries and %d entry errors", err, n, len(errs))
		}
		if len(errs) > n {
			t.Fatalf("%d entry errors for %d entries", len(errs), n)
		}
	})
}

// A broken NDJSON line rejects only itself: the lines after it are counted
// (APISIX does not resend a batch answered 200), and every line is either
// an event or an error.
func TestAPISIXNDJSONGoesOnAfterABadLine(t *testing.T) {
	good := `{"request":{"method":"GET"},"response":{"status":200},"route_id":"1","latency":3}`
	body := good + "\n{\"broken\n" + good + "\n\n" + `{"response":{}}` + "\n" + good + "\n" + `{"a":1} {"b":2}` + "\n"
	got, n, errs, err := decodeAPISIX(t, body)
	if err != nil || n != 6 || len(got) != 3 || len(errs) != 3 {
		t.Fatalf("n=%d events=%d errors=%v err=%v", n, len(got), errs, err)
	}
	want := []string{"entry 1: unexpected EOF", "entry 3: response.status is missing", "entry 5: more than one JSON value on one line"}
	for i, e := range errs {
		if e.Error() != want[i] {
			t.Errorf("error %d = %q, want %q", i, e.Error(), want[i])
		}
	}
	// No line parses: the body is refused whole.
	if _, _, _, err := decodeAPISIX(t, "{\"broken\n<xml/>"); err == nil || !strings.Contains(err.Error(), ErrBody.Error()) {
		t.Errorf("a body of broken lines: %v", err)
	}
}

// An empty batch and a body nested past MaxLogDepth are refused whole,
// before any entry is decoded.
func TestLogBodiesRefusedWhole(t *testing.T) {
	deep := strings.Repeat(`{"a":`, MaxLogDepth) + `1` + strings.Repeat(`}`, MaxLogDepth)
	deeper := `[` + deep + `]`
	for name, body := range map[string]string{"empty array": `[]`, "nested": deeper, "nested line": `{"x":[` + deep + `]}`} {
		for _, ndjson := range []bool{false, true} {
			n, _, err := forEachEntry([]byte(body), ndjson, func(int, json.RawMessage) error { return nil })
			if err == nil || n != 0 {
				t.Errorf("%s (ndjson %v): n=%d err=%v", name, ndjson, n, err)
			}
		}
	}
	if n, _, err := forEachEntry([]byte(deep), false, func(int, json.RawMessage) error { return nil }); err != nil || n != 1 {
		t.Errorf("a body exactly MaxLogDepth deep: n=%d err=%v", n, err)
	}
}

// A route miss reaches http-logger as route_id "no-matched" with service_id
// the request's Host (§2d): it is a miss, counted with no route and no
// service as APISIX's own plugin does, never as a route named "no-matched"
// or a service named after client input.
func TestAPISIXRouteMissIsNoRoute(t *testing.T) {
	body := `{"request":{"method":"GET"},"response":{"status":404},"route_id":"no-matched","service_id":"attacker-chosen.example","latency":1}`
	got, _, errs, err := decodeAPISIX(t, body)
	if err != nil || len(errs) != 0 || len(got) != 1 {
		t.Fatalf("events %v, errors %v, %v", got, errs, err)
	}
	if got[0].RouteID != "" || got[0].ServiceID != "" || got[0].StatusCode != 404 {
		t.Errorf("route miss mapped to route %q service %q", got[0].RouteID, got[0].ServiceID)
	}
}

// TestNDJSONBrokenLinesStayTheirOwn: the unclosed brackets of broken lines
// do not add up across lines (they once did, past MaxLogDepth, refusing the
// whole batch with its good lines): 150 good lines between 150 broken ones
// are 150 events, and a line nested deeper than MaxLogDepth is that line's
// error only.
func TestNDJSONBrokenLinesStayTheirOwn(t *testing.T) {
	good := `{"request":{"method":"GET"},"response":{"status":200},"route_id":"nd"}`
	var b strings.Builder
	for range 150 {
		b.WriteString(good + "\n{broken\n")
	}
	b.WriteString(strings.Repeat("[", MaxLogDepth+1) + strings.Repeat("]", MaxLogDepth+1) + "\n" + good + "\n")
	got, n, errs, err := decodeAPISIX(t, b.String())
	// 151 rejected (the entries not handed on), the first MaxEntryErrors listed.
	if err != nil || n != 302 || len(got) != 151 || len(errs) != MaxEntryErrors || errs[0].Index != 1 {
		t.Fatalf("n=%d events=%d errors listed=%d err=%v, want 302 entries, 151 events, the first %d errors listed", n, len(got), len(errs), err, MaxEntryErrors)
	}
	_, _, errs, err = decodeAPISIX(t, good+"\n"+strings.Repeat("[", MaxLogDepth+1)+strings.Repeat("]", MaxLogDepth+1)+"\n"+good+"\n")
	if err != nil || len(errs) != 1 || errs[0].Index != 1 || !strings.Contains(errs[0].Error(), "nested deeper than 100") {
		t.Errorf("deep line: %v %v", errs, err)
	}
}

// A batch of millions of bad entries lists the first MaxEntryErrors of
// them and counts the rest: 20 MiB of empty entries were 7 million errors,
// which took 880 MB to list.
func TestEntryErrorsAreListedUpToTheirBound(t *testing.T) {
	const n = 100_000
	for _, c := range []struct {
		name string
		dec  func([]byte, func(*Event)) (int, []EntryError, error)
		body string
	}{
		{"kong array", DecodeKongHTTPLog, "[" + strings.TrimSuffix(strings.Repeat("{},", n), ",") + "]"},
		{"apisix ndjson", DecodeAPISIXHTTPLogger, strings.Repeat("{}\n", n)},
		{"apisix array", DecodeAPISIXHTTPLogger, "[" + strings.TrimSuffix(strings.Repeat("{},", n), ",") + "]"},
	} {
		events := 0
		entries, errs, err := c.dec([]byte(c.body), func(*Event) { events++ })
		if err != nil || entries != n || events != 0 || len(errs) != MaxEntryErrors || errs[MaxEntryErrors-1].Index != MaxEntryErrors-1 {
			t.Errorf("%s: %d entries, %d events, %d errors listed, %v; want %d, 0, the first %d", c.name, entries, events, len(errs), err, n, MaxEntryErrors)
		}
	}
}
