package gateway

import (
	"os"
	"strings"
	"testing"
)

func decodeKong(t *testing.T, body string) ([]Event, int, []EntryError, error) {
	t.Helper()
	var got []Event
	n, errs, err := DecodeKongHTTPLog([]byte(body), func(e *Event) { got = append(got, *e) })
	return got, n, errs, err
}

// kongSampleEvent is what the verbatim Kong 3.8 sample (§1d) maps to.
func kongSampleEvent() Event {
	e := base()
	e.Kind, e.Method, e.StatusCode, e.Source = KindKong, "GET", 200, SourceUpstream
	e.Route, e.RouteID, e.RouteName = "/example-route", "0f1a4101-3327-4274-b1e4-484a4ab0c030", "example_route"
	e.ServiceID, e.ServiceName, e.ServiceHost, e.Upstream = "fb4eecf8-dec2-40ef-b779-16de7e2384c7", "example_service", "httpbin.konghq.com", "httpbin.konghq.com"
	e.Workspace, e.Target, e.TargetPort = "default", "34.237.204.224", 80
	e.TotalMS, e.UpstreamMS, e.AddedMS, e.RequestSize, e.ResponseSize = 173, 171, 1, 139, 9982
	return e
}

func TestKongHTTPLogSample(t *testing.T) {
	sample, err := os.ReadFile("testdata/kong-3.8-http-log.json")
	if err != nil {
		t.Fatal(err)
	}
	got, n, errs, err := decodeKong(t, string(sample))
	if err != nil || len(errs) != 0 || n != 1 || len(got) != 1 {
		t.Fatalf("n=%d errs=%v err=%v events=%d, want one event", n, errs, err, len(got))
	}
	if want := kongSampleEvent(); got[0] != want {
		t.Fatalf("got  %+v\nwant %+v", got[0], want)
	}
	if g, ok := got[0].GatewayMS(); !ok || g != 1 {
		t.Errorf("gateway-added = %v %v, want 1 (latencies.kong, as Kong reports it)", g, ok)
	}
}

// TestKong37EntryWithoutSource: Kong 3.7's kong.log.serialize has no
// `source` (3.8 added it); the source is then told from latencies.proxy,
// Kong's waiting time, set once it proxied: the 3.8 sample without its
// source is still the upstream's answer, an exit without a proxy latency
// is Kong's.
func TestKong37EntryWithoutSource(t *testing.T) {
	sample, err := os.ReadFile("testdata/kong-3.8-http-log.json")
	if err != nil {
		t.Fatal(err)
	}
	proxied := strings.Replace(string(sample), `"source": "upstream",`, "", 1)
	if proxied == string(sample) {
		t.Fatal("the sample has no source to remove")
	}
	exit := `{"request":{"method":"GET"},"response":{"status":401},"latencies":{"kong":2,"proxy":-1,"request":2}}`
	got, _, errs, err := decodeKong(t, "["+proxied+","+exit+"]")
	if err != nil || len(errs) != 0 || len(got) != 2 {
		t.Fatalf("events=%d errs=%v err=%v, want 2", len(got), errs, err)
	}
	if got[0] != kongSampleEvent() {
		t.Errorf("proxied 3.7 entry: got %+v\nwant %+v", got[0], kongSampleEvent())
	}
	if got[1].Source != SourceGateway {
		t.Errorf("3.7 exit: source %v, want the gateway's", got[1].Source)
	}
}

func TestKongHTTPLogBatch(t *testing.T) {
	sample, err := os.ReadFile("testdata/kong-3.8-http-log.json")
	if err != nil {
		t.Fatal(err)
	}
	// queue.max_batch_size > 1: an array. The second entry is a Kong exit
	// (no route, no tries, proxy latency -1); the third is broken.
	body := "[" + string(sample) + `,
	 {"request":{"method":"post","size":"12"},"response":{"status":429,"size":50},"source":"kong",
	  "latencies":{"kong":3,"proxy":-1,"request":3},"consumer":{"id":"c1","username":"alice"}},
	 {"response":{"status":"two hundred"}},
	 "not an object",
	 {"request":{"method":"GET"}}]`
	got, n, errs, err := decodeKong(t, body)
	if err != nil || n != 5 || len(got) != 2 {
		t.Fatalf("n=%d events=%d err=%v, want 5 entries, 2 events", n, len(got), err)
	}
	exit := base()
	exit.Kind, exit.Method, exit.StatusCode, exit.Source, exit.Consumer = KindKong, "POST", 429, SourceGateway, "alice"
	exit.TotalMS, exit.AddedMS, exit.RequestSize, exit.ResponseSize = 3, 3, 12, 50
	if got[0] != kongSampleEvent() || got[1] != exit {
		t.Fatalf("got %+v\nwant %+v", got[1], exit)
	}
	want := []string{
		`entry 2: want a number, got "two hundred"`,
		`entry 3: want a JSON object, got JSON string`,
		`entry 4: response.status is missing`,
	}
	if len(errs) != len(want) {
		t.Fatalf("errors %v, want %v", errs, want)
	}
	for i := range want {
		if errs[i].Error() != want[i] {
			t.Errorf("error %d = %q, want %q", i, errs[i].Error(), want[i])
		}
	}
}

func TestKongHTTPLogBadBodies(t *testing.T) {
	cases := map[string]string{
		"":                "empty body",
		"{":               "body is not a JSON object, array or newline-delimited objects\nunexpected EOF",
		"[{},":            "body is not a JSON object, array or newline-delimited objects\nunexpected end of JSON input",
		`{"a":1} {"b":2}`: "body is not a JSON object, array or newline-delimited objects\nmore than one JSON value; send an array",
	}
	for body, want := range cases {
		got, _, _, err := decodeKong(t, body)
		if err == nil || err.Error() != want || len(got) != 0 {
			t.Errorf("body %q: err %v, events %d; want %q and none", body, err, len(got), want)
		}
	}
}

func TestKongStatusRange(t *testing.T) {
	_, _, errs, _ := decodeKong(t, `[{"response":{"status":700}},{"response":{"status":200.5}}]`)
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "got 700") || !strings.Contains(errs[1].Error(), "got 200.5") {
		t.Fatalf("errors %v", errs)
	}
}

// FuzzDecodeKongHTTPLog: any body maps without panicking, and every event has
// a valid status and no negative measurement but Unknown.
// Run: go test ./internal/gateway -run '^$' -fuzz FuzzDecodeKongHTTPLog -fuzztime 60s
func FuzzDecodeKongHTTPLog(f *testing.F) {
	sample, err := os.ReadFile("testdata/kong-3.8-http-log.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sample)
	f.Add([]byte("[" + string(sample) + "," + string(sample) + "]"))
	f.Add([]byte(`[{"response":{"status":"200"},"latencies":{"proxy":-1}}, 1, null]`))
	f.Add([]byte(`{"response":{"status":1e400}}`))
	f.Add([]byte(readKongAISample(f)))
	f.Add([]byte(`{"response":{"status":200},"ai":{"b":{"meta":{}},"a":{"usage":{"prompt_tokens":"1"}},"proxy":7}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		n, errs, err := DecodeKongHTTPLog(body, func(e *Event) { checkEvent(t, e) })
		if err != nil && (n != 0 || len(errs) != 0) {
			t.Fatalf("body error %v with %d entries and %d entry errors", err, n, len(errs))
		}
		if len(errs) > n {
			t.Fatalf("%d entry errors for %d entries", len(errs), n)
		}
	})
}

func checkEvent(t *testing.T, e *Event) {
	t.Helper()
	if e.StatusCode < 100 || e.StatusCode > 599 {
		t.Fatalf("status %d", e.StatusCode)
	}
	if e.TotalMS < 0 && e.TotalMS != Unknown || e.UpstreamMS < 0 && e.UpstreamMS != Unknown {
		t.Fatalf("latencies %v %v", e.TotalMS, e.UpstreamMS)
	}
	if e.RequestSize < Unknown || e.ResponseSize < Unknown {
		t.Fatalf("sizes %d %d", e.RequestSize, e.ResponseSize)
	}
	if e.GenAI.InputTokens < Unknown || e.GenAI.OutputTokens < Unknown {
		t.Fatalf("tokens %d %d", e.GenAI.InputTokens, e.GenAI.OutputTokens)
	}
}

// An implausible number (beyond a day of latency, NaN, a negative other
// than Kong's -1, a fractional or huge size, absurd token counts) refuses
// its entry, naming the field, and never reaches a sum: the entries beside
// it are unaffected.
func TestImplausibleValuesRejectTheEntry(t *testing.T) {
	ok := `{"response":{"status":200},"request":{"method":"GET","size":10},"latencies":{"request":5,"kong":1,"proxy":-1}}`
	cases := map[string]struct{ entry, want string }{
		"huge latency":     {`{"response":{"status":200},"latencies":{"request":1e300}}`, "latencies.request: 1e+300 is not a latency in ms from 0 to 86400000"},
		"NaN latency":      {`{"response":{"status":200},"latencies":{"kong":"NaN"}}`, "latencies.kong: NaN is not a latency in ms from 0 to 86400000"},
		"negative latency": {`{"response":{"status":200},"latencies":{"proxy":-5}}`, "latencies.proxy: -5 is not a latency in ms from 0 to 86400000"},
		"fractional size":  {`{"response":{"status":200,"size":1.5}}`, "response.size: 1.5 is not a whole number from 0 to 1099511627776"},
		"huge size":        {`{"response":{"status":200},"request":{"size":1e20}}`, "request.size: 1e+20 is not a whole number from 0 to 1099511627776"},
		"absurd tokens": {`{"response":{"status":200},"ai":{"proxy":{"meta":{"provider_name":"openai"},"usage":{"prompt_tokens":1e12}}}}`,
			"ai.proxy.usage.prompt_tokens: 1e+12 is not a whole number from 0 to 4294967296"},
	}
	for name, c := range cases {
		var got []Event
		n, errs, err := DecodeKongHTTPLog([]byte("["+ok+","+c.entry+","+ok+"]"), func(e *Event) { got = append(got, *e) })
		if err != nil || n != 3 || len(got) != 2 || len(errs) != 1 || errs[0].Index != 1 || errs[0].Err.Error() != c.want {
			t.Errorf("%s: n=%d events=%d errors=%v err=%v, want entry 1: %s", name, n, len(got), errs, err, c.want)
		}
	}
	var got []Event
	if _, errs, _ := DecodeAPISIXHTTPLogger([]byte(`{"response":{"status":200},"latency":1e300}`), func(e *Event) { got = append(got, *e) }); len(errs) != 1 || len(got) != 0 {
		t.Errorf("APISIX latency 1e300: errors %v, events %d", errs, len(got))
	}
}
