package gateway

import (
	"bytes"
	"encoding/json"
	"os"
	"strconv"
	"testing"
)

// benchBatch is the entries per body: a Kong queue or APISIX batch
// processor flushing a busy route (both default to far larger maxima).
const benchBatch = 100

type benchBody struct {
	name, gateway string
	body          []byte
}

// benchBodies builds batches of benchBatch entries from the fixtures, each
// entry with its own route path and request size so no two are identical.
func benchBodies(t testing.TB) []benchBody {
	entry := func(name string) []byte {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.TrimSpace(b)
		if b[0] == '[' {
			var raws []json.RawMessage
			if err := json.Unmarshal(b, &raws); err != nil {
				t.Fatal(err)
			}
			b = raws[0]
		}
		var c bytes.Buffer
		if err := json.Compact(&c, b); err != nil {
			t.Fatal(err)
		}
		return c.Bytes()
	}
	vary := func(e []byte, i int) []byte {
		n := strconv.Itoa(i)
		e = bytes.Replace(e, []byte(`"/anything"`), []byte(`"/anything/`+n+`"`), 1)
		return bytes.Replace(e, []byte(`"/anything/ai"`), []byte(`"/anything/ai/`+n+`"`), 1)
	}
	array := func(e []byte) []byte {
		out := []byte{'['}
		for i := range benchBatch {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, vary(e, i)...)
		}
		return append(out, ']')
	}
	lines := func(e []byte) []byte {
		var out []byte
		for i := range benchBatch {
			out = append(append(out, vary(e, i)...), '\n')
		}
		return out
	}
	kong, kongAI := entry("kong-3.8-http-log.json"), entry("kong-3.8-http-log-ai-proxy.json")
	apisix, apisixAI := entry("apisix-3.9-http-logger.json"), entry("apisix-http-logger-ai-proxy.json")
	return []benchBody{
		{"kong", "kong", array(kong)},
		{"kong-ai", "kong", array(kongAI)},
		{"apisix-array", "apisix", array(apisix)},
		{"apisix-ndjson", "apisix", lines(apisix)},
		{"apisix-llm-array", "apisix", array(apisixAI)},
		{"apisix-llm-ndjson", "apisix", lines(apisixAI)},
	}
}

// BenchmarkDecodeLogs measures the scanner and the encoding/json reference
// on the same bodies in the same run: per body of benchBatch entries,
// entries/s, allocs/entry, and (on the scanner) x-json, how many times
// faster than encoding/json it was. Compare runs with
//
//	go test -run '^$' -bench DecodeLogs -benchmem -count 6 ./receiver/gatewayreceiver/internal/gateway > new.txt
//	benchstat old.txt new.txt
func BenchmarkDecodeLogs(b *testing.B) {
	for _, c := range benchBodies(b) {
		var scan, ref func([]byte, func(*Event)) (int, []EntryError, error)
		for _, d := range logDecoders {
			if d.name == c.gateway {
				scan, ref = d.scan, d.ref
			}
		}
		var refNS float64
		b.Run(c.name+"/encoding_json", func(b *testing.B) {
			refNS = benchDecode(b, ref, c.body)
		})
		b.Run(c.name+"/scanner", func(b *testing.B) {
			if ns := benchDecode(b, scan, c.body); refNS > 0 {
				b.ReportMetric(refNS/ns, "x-json")
			}
		})
	}
}

// benchDecode runs dec over body b.N times and returns ns per entry.
func benchDecode(b *testing.B, dec func([]byte, func(*Event)) (int, []EntryError, error), body []byte) float64 {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var sink int64
	fn := func(e *Event) { sink += e.StatusCode }
	entries := 0
	for b.Loop() {
		n, errs, err := dec(body, fn)
		if err != nil || len(errs) > 0 {
			b.Fatal(err, errs)
		}
		entries += n
	}
	if sink == 0 {
		b.Fatal("no entry decoded")
	}
	ns := float64(b.Elapsed().Nanoseconds()) / float64(entries)
	b.ReportMetric(1e9/ns, "entries/s")
	b.ReportMetric(float64(testing.AllocsPerRun(1, func() { _, _, _ = dec(body, fn) }))/benchBatch, "allocs/entry")
	return ns
}
