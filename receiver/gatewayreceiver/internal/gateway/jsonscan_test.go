package gateway

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// The scanner's decoders (DecodeKongHTTPLog, DecodeAPISIXHTTPLogger) must
// answer every body as the encoding/json reference of
// logs_reference_test.go does: the same body error, the same entry errors
// (index and message), the same number of entries and the same events.
// Run the fuzzer for a while, e.g.:
//
//	go test ./receiver/gatewayreceiver/internal/gateway -run '^$' -fuzz FuzzDecodeLogs -fuzztime 3m

// logDecoders pairs each scanner decoder with its reference.
var logDecoders = []struct {
	name      string
	scan, ref func([]byte, func(*Event)) (int, []EntryError, error)
}{
	{"kong", DecodeKongHTTPLog, refDecodeKongHTTPLog},
	{"apisix", DecodeAPISIXHTTPLogger, refDecodeAPISIXHTTPLogger},
}

// decoded is one decoder's whole answer to a body.
type decoded struct {
	entries   int
	entryErrs []string
	err       string
	events    []Event
}

func decodeAll(dec func([]byte, func(*Event)) (int, []EntryError, error), body []byte) decoded {
	var out decoded
	n, entryErrs, err := dec(body, func(e *Event) { out.events = append(out.events, *e) })
	out.entries = n
	for _, ee := range entryErrs {
		out.entryErrs = append(out.entryErrs, ee.Error())
	}
	if err != nil {
		out.err = err.Error()
	}
	return out
}

// compareDecoders fails t where the scanner and the reference differ on
// body.
func compareDecoders(t *testing.T, body []byte) {
	t.Helper()
	for _, d := range logDecoders {
		// Each decoder gets its own copy: a decoder must not depend on, or
		// change, bytes it was not given.
		got := decodeAll(d.scan, bytes.Clone(body))
		want := decodeAll(d.ref, bytes.Clone(body))
		if repeatsArrayKey(body) {
			// The deliberate difference (see scanner): a repeated tries or
			// route.paths key replaces the earlier array in the scanner,
			// where encoding/json merges into (even stale) earlier elements.
			forgetArrays(got.events)
			forgetArrays(want.events)
		}
		if got.err != want.err || got.entries != want.entries || !reflect.DeepEqual(got.entryErrs, want.entryErrs) {
			t.Fatalf("%s: body %q\nscanner:  n=%d err=%q entry errors %q\nencoding/json: n=%d err=%q entry errors %q",
				d.name, body, got.entries, got.err, got.entryErrs, want.entries, want.err, want.entryErrs)
		}
		if len(got.events) != len(want.events) {
			t.Fatalf("%s: body %q: scanner emitted %d events, encoding/json %d", d.name, body, len(got.events), len(want.events))
		}
		for i := range got.events {
			if !reflect.DeepEqual(got.events[i], want.events[i]) {
				t.Fatalf("%s: body %q: event %d\nscanner:       %+v\nencoding/json: %+v", d.name, body, i, got.events[i], want.events[i])
			}
		}
	}
}

// forgetArrays clears what the tries and route.paths arrays map to.
func forgetArrays(events []Event) {
	for i := range events {
		events[i].Target, events[i].TargetPort, events[i].Route = "", 0, ""
	}
}

// repeatsArrayKey reports whether an object of body (as a whole, or any of
// its lines) repeats a key that folds to tries or paths.
func repeatsArrayKey(body []byte) bool {
	if repeatsIn(body) {
		return true
	}
	for line := range bytes.SplitSeq(body, []byte("\n")) {
		if repeatsIn(line) {
			return true
		}
	}
	return false
}

func repeatsIn(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		obj, wantKey bool
		seen         map[string]bool
	}
	var stack []*frame
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].obj {
			stack[n-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return false // the end, or broken: nothing more to look at
		}
		if n := len(stack); n > 0 && stack[n-1].wantKey {
			if k, ok := tok.(string); ok {
				top := stack[n-1]
				top.wantKey = false
				for _, name := range []string{"tries", "paths"} {
					if strings.EqualFold(k, name) {
						if top.seen[name] {
							return true
						}
						top.seen[name] = true
					}
				}
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, wantKey: true, seen: map[string]bool{}})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
}

// logFixtures are every JSON body in this package's and the receiver's
// testdata.
func logFixtures(t testing.TB) map[string][]byte {
	out := map[string][]byte{}
	for _, dir := range []string{"testdata", filepath.Join("..", "..", "testdata")} {
		names, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			out[name] = b
		}
	}
	if len(out) < 4 {
		t.Fatalf("found only %d fixtures", len(out))
	}
	return out
}

// diffSeeds are the quirks where encoding/json's answer is easy to miss.
var diffSeeds = []string{
	`{"response":{"status":200}}`,
	`[{"response":{"status":200}},{"response":{"status":"200"}},{"response":{"status":null}}]`,
	`{"Response":{"STATUS":200},"REQUEST":{"Method":"get"}}`,
	`{"ſervice":{"name":"K"},"response":{"ſtatus":201},"route":{"ID":"\u0069d"}}`,
	`{"respon\u0073e":{"status":200},"route":{"paths":["\/a\/b","x"],"name":"\ud83d\ude00\ud800"}}`,
	`{"response":{"status":200},"route":{"id":"a"},"route":{"name":"b"}}`,
	`{"response":{"status":200},"route":{"id":"a"},"route":null}`,
	`{"response":{"status":200},"request":5,"latencies":{"kong":"x"}}`,
	`{"response":{"status":200},"latencies":{"kong":"x"},"request":5}`,
	`{"response":{"status":200},"latencies":{"kong":"\/1"}}`,
	`{"response":{"status":200},"latencies":{"kong":"1e400","proxy":true}}`,
	`{"response":{"status":200},"latencies":{"kong":{"a":1}}}`,
	`{"response":{"status":200},"tries":[{"ip":"1.2.3.4","port":"8080"},{"ip":"5.6.7.8"}]}`,
	`{"response":{"status":200},"tries":[5]}`,
	`{"response":{"status":200},"tries":{}}`,
	`{"response":{"status":200},"tries":[{"ip":"a","port":1}],"tries":[{"state":"x"}]}`,
	"{\"response\":{\"status\":200},\"source\":\"up\xffstream\"}",
	`{"response":{"status":200},"ai":{"x":{"meta":{"provider_name":"p"}},"proxy":{"usage":{}}},"ai":{"proxy":{"meta":{"request_model":"m"}}}}`,
	`{"response":{"status":200},"ai":{"b":{"meta":{"provider_name":"b"}},"a":{"meta":{"provider_name":5}}}}`,
	`{"response":{"status":200},"ai":{"proxy":{"usage":{"cost":"x"}}}}`,
	`{"response":{"status":200},"ai":{"proxy":{"meta":[]}}}`,
	`{"response":{"status":200},"ai":5}`,
	`{"response":{"status":200},"ai":{"proxy":{"meta":{"provider_name":"p"}}},"ai":null}`,
	`{"response":{"status":200},"llm_summary":{"model":{"name":"x"},"request_model":"r","stream":"true","duration":5,"prompt_tokens":"3"}}`,
	`{"response":{"status":200},"llm_summary":5}`,
	`{"response":{"status":200},"upstream":"1.1.1.1:80, 2.2.2.2:81 : 3.3.3.3:82"}`,
	"{\"response\":{\"status\":200}}\n{bad\n\n{\"response\":{\"status\":404}}\n",
	"{bad\n{worse",
	`[]`, `[1,]`, `{} {}`, `5`, `"x"`, `null`, `[null,true,"s",[]]`, ` `, `{"a":1}x`,
	"\u00a0{\"response\":{\"status\":200}}\u0085",
	`{"response":{"status":200},"route":5,"service":[],"consumer":"c"}`,
	`[null,{"response":null},{"response":{"status":null}},{"response":{"status":""}},{"response":{"status":"\u0032\u0030\u0030"}}]`,
	`{"response":{"status":200,"size":"0x10"},"request":{"size":" 1"}}`,
	`{"response":{"status":200,"size":"1_0"},"request":{"size":"\u0661"}}`,
	`{"response":{"status":200,"size":""},"request":{"size":"\t1"},"latencies":{"\u212aong":3,"PROXY":-1}}`,
	`{"response":{"status":200},"ai":{"pro\u0078y":{"meta":{"provider_name":"p"}},"Proxy":{"meta":{"provider_name":"q"}}}}`,
	`{"response":{"status":200},"ai":{"z\u00e9":{"meta":{"provider_name":"z"}},"a":5,"\u00e9":{"usage":{"prompt_tokens":1}}}}`,
	`{"response":{"status":200},"ai":{"proxy":{"meta":{"provider_name":"p"},"usage":{"prompt_tokens":-2}}}}`,
	`{"response":{"status":200},"ai":{"proxy":{"meta":null,"usage":null},"ai-proxy":{"meta":{"response_model":"r"}}}}`,
	`{"response":{"status":200},"llm_summary":{"stream":true,"duration":"x"}}`,
	`{"response":{"status":200},"llm_summary":{"stream":"tru\u0065","model":null,"request_model":5}}`,
	`{"response":{"status":200},"llm_summary":{"stream":true,"stream":1,"duration":1e9}}`,
	`{"response":{"status":200},"llm_summary":null,"server":null,"consumer":null,"consumer":{"username":"u"}}`,
	`{"response":{"status":200},"consumer":{"username":"u"},"consumer":{}}`,
	`{"response":{"status":200},"route_id":"no-matched","service_id":"s","upstream":"a:1,b:2"}`,
	`{"response":{"status":200},"tries":[{"ip":5}],"latencies":{"kong":[1]}}`,
	`{"response":{"status":200},"tries":[null,{"port":null}]}`,
	`{"response":{"status":200},"tries":[{"ip":"1.1.1.1","port":65536}]}`,
	`{"response":{"status":200},"route":{"paths":[null]},"request":{"method":"g\u0065t"}}`,
	`{"response":{"status":200},"route":{"paths":[5]}}`,
	`{"response":{"status":200},"route":{"paths":"x"}}`,
	`{"response":{"status":200},"source":"kong","workspace_name":null}`,
	`{"response":{"status":99.5}}`, `{"response":{"status":600}}`, `{"response":{"status":"abc"}}`,
	"{\"response\":{\"status\":200},\"route\":{\"name\":\"\xed\xa0\x80\"}}",
	"{\"respon\xc5\xbfe\":{\"\xc5\xbftatus\":200}}",
	"[{\"response\":{\"status\":200}}\n,\n{\"response\":{\"status\":201}}]",
	"{\"response\":{\"status\":200}}\n\n   \n{\"response\":{\"status\":201}} x\n[1]\n5",
	"{\"a\":\"\\ud800\\u0041\"}\n{\"a\":\"\\x\"}",
}

// TestDecodeLogsFixtures runs every fixture, and the quirk seeds, through
// both decoders.
func TestDecodeLogsFixtures(t *testing.T) {
	for name, b := range logFixtures(t) {
		t.Run(filepath.Base(name), func(t *testing.T) {
			compareDecoders(t, b)
			// The same entries as an array and as NDJSON lines.
			var compact bytes.Buffer
			if err := json.Compact(&compact, b); err == nil {
				compareDecoders(t, compact.Bytes())
			}
		})
	}
	for i, s := range append(diffSeeds, deepSeeds()...) {
		t.Run("seed"+strconv.Itoa(i), func(t *testing.T) { compareDecoders(t, []byte(s)) })
	}
}

// deepSeeds nest around MaxLogDepth: as one object, in an array, and on
// an NDJSON line after a line of stray closing brackets (which lowers
// CheckJSONDepth's count for the whole body).
func deepSeeds() []string {
	nest := func(n int) string { return strings.Repeat(`[`, n) + strings.Repeat(`]`, n) }
	entry := func(n int) string { return `{"response":{"status":200},"x":` + nest(n) + `}` }
	return []string{
		entry(MaxLogDepth - 1), entry(MaxLogDepth),
		`[` + entry(MaxLogDepth-2) + `]`, `[` + entry(MaxLogDepth-1) + `]`,
		entry(MaxLogDepth-1) + "\n" + entry(5),
		strings.Repeat("]", 200) + "\n" + entry(250) + "\n" + entry(1),
		"[" + entry(MaxLogDepth) + ",", // deep and broken: the depth is reported
	}
}

func FuzzDecodeLogs(f *testing.F) {
	for _, b := range logFixtures(f) {
		f.Add(b)
	}
	for _, s := range append(diffSeeds, deepSeeds()...) {
		f.Add([]byte(s))
	}
	// Strings whose byte needing a look (quote, backslash, control, UTF-8,
	// invalid UTF-8) sits past the first 8 bytes, for str's 8-byte path.
	for _, v := range []string{`abcdefgh\"ijklmnop`, `abcdefghi\u00e9jklmnopq`, "abcdefghij\x01klmnopqrs", "abcdefghijk\u00ffxyz",
		"abcdefghijkl\xc3\xa9mnopqrstu", "abcdefghijklm\xffno", `abcdefghijklmnop\\`} {
		f.Add([]byte(`{"request":{"method":"GET","uri":"/` + v + `"},"response":{"status":200},"route":{"name":"` + v + `"}}`))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		compareDecoders(t, body)
	})
}

// TestDecodeLogsDoNotAllocate: a valid body allocates nothing per entry
// (nor per body, once the pooled state is warm).
func TestDecodeLogsDoNotAllocate(t *testing.T) {
	pool := logStates
	logStates = new(heldState)
	defer func() { logStates = pool }()
	for _, c := range benchBodies(t) {
		for _, d := range logDecoders {
			if d.name != c.gateway {
				continue
			}
			allocs := testing.AllocsPerRun(20, func() {
				if _, errs, err := d.scan(c.body, func(*Event) {}); err != nil || len(errs) > 0 {
					t.Fatal(err, errs)
				}
			})
			if allocs != 0 {
				t.Errorf("%s: %v allocations per body", c.name, allocs)
			}
		}
	}
}

// heldState is a pool of one state that it never drops, unlike sync.Pool
// under the race detector.
type heldState struct{ st any }

func (h *heldState) Get() any {
	if h.st == nil {
		return new(logState)
	}
	st := h.st
	h.st = nil
	return st
}

func (h *heldState) Put(st any) { h.st = st }

// TestEscapedStringsStayValid: the receiver keeps events (and their
// strings) until the whole body is aggregated, after later entries, and
// other bodies, were decoded. A string with escapes lives in the arena,
// which later decodes only append to.
func TestEscapedStringsStayValid(t *testing.T) {
	entry := func(i int) string {
		return `{"response":{"status":200},"route":{"paths":["\/r\/` + strconv.Itoa(i) + `"]},"workspace_name":"w\u00e9` + strconv.Itoa(i) + `"}`
	}
	var kept []Event
	for i := range 2000 { // enough to fill several arena chunks
		if _, _, err := DecodeKongHTTPLog([]byte(`[`+entry(i)+`]`), func(e *Event) { kept = append(kept, *e) }); err != nil {
			t.Fatal(err)
		}
	}
	for i, e := range kept {
		n := strconv.Itoa(i)
		if e.Route != "/r/"+n || e.Workspace != "wé"+n {
			t.Fatalf("event %d: route %q workspace %q", i, e.Route, e.Workspace)
		}
	}
}

// special8 answers, for every byte value in every position, what plainByte
// says of the byte: the fast path of str never skips a byte it must see.
func TestSpecial8MatchesPlainByte(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 8; pos++ {
			for _, fill := range []byte{'a', ' ', '~', 0x21, 0x5d} {
				var w [8]byte
				for i := range w {
					w[i] = fill
				}
				w[pos] = byte(c)
				if got, want := special8(binary.LittleEndian.Uint64(w[:])), !plainByte[c]; got != want {
					t.Fatalf("special8 of byte %#x at %d among %q = %v, want %v", c, pos, fill, got, want)
				}
			}
		}
	}
}
