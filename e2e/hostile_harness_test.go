package e2e

// Helpers of the hostile-client suite (hostile_test.go) and the soak test
// (soak_test.go): a collector with the receiver's default bounds, a monitor
// sampling the collector's RSS, heap and scrape latency, a sender of good
// traffic that counts exactly what was accepted, fast OTLP protobuf
// encoding for hundreds of thousands of spans, and readers of the
// exporter's and the collector's own metrics.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

const mib = 1 << 20

// hostileConfig is collectorConfig with the receiver's default settings
// except its endpoints, flush_interval (1s, so counts show up fast; not a
// bound) and limits.max_tuples: collectorConfig's max_request_body_size of 1
// MiB is replaced by httpExtra (YAML lines under protocols.http, or "" for
// the 20 MiB default). limits.max_gateways (1000), tuple_expiry (5m),
// limits.max_request_bytes_in_flight (64 MiB), read_header_timeout (10s)
// and read_timeout (30s) keep their defaults. limits.max_tuples is 10,000
// (hostileMaxTuples), a tenth of its default: the cardinality attack fills
// it, and at the default's 100,000 tuples the exposition the monitor scrapes
// through the attack is ~550 MiB, which a lean test cannot afford; what the
// default costs full is measured by TestSeedScale.
func hostileConfig(httpExtra string) string {
	const limitLine = "        max_request_body_size: 1048576\n"
	const nameLine = "    collector_name: e2e-0\n"
	if !strings.Contains(collectorConfig, limitLine) || !strings.Contains(collectorConfig, nameLine) {
		panic("collectorConfig changed: hostileConfig cannot drop its body limit or set its tuple bound")
	}
	cfg := strings.Replace(collectorConfig, limitLine, httpExtra, 1)
	return strings.Replace(cfg, nameLine, nameLine+"    limits:\n      max_tuples: "+strconv.Itoa(hostileMaxTuples)+"\n", 1)
}

func (c *collector) pid() int { return c.proc.cmd.Process.Pid }

func (c *collector) url(path string) string { return "http://" + c.httpAddr + path }

// readRSS reads VmRSS of pid from /proc (bytes).
func readRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmRSS line %q: %w", line, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// ---------------------------------------------------------------------------
// Monitor: RSS, Go heap and scrape latency, sampled while an attack runs

// scrapeClient is used for the latency samples only: its own connections,
// so a hostile client never shares them.
var scrapeClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2}}

// timedScrape GETs u as Prometheus does (Accept-Encoding: gzip), reads the
// whole body and returns the wall time and the (uncompressed) body size.
func timedScrape(u string) (time.Duration, int64, error) {
	return timedScrapeWith(scrapeClient, u)
}

// plainClient asks for no compression.
var plainClient = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableCompression: true}}

func timedScrapeWith(c *http.Client, u string) (time.Duration, int64, error) {
	start := time.Now()
	resp, err := c.Get(u)
	if err != nil {
		return time.Since(start), 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	d := time.Since(start)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: status %d", u, resp.StatusCode)
	}
	return d, n, err
}

// scrapeSample is one timed GET of the exporter's /metrics.
type scrapeSample struct {
	at      time.Time
	latency time.Duration
	bytes   int64
	phase   string
}

// monitor samples the collector while tests run: RSS every rssEvery, the Go
// heap from its telemetry and the latency of a full /metrics scrape every
// scrapeEvery. Each sample is tagged with the phase set by setPhase.
type monitor struct {
	col                   *collector
	rssEvery, scrapeEvery time.Duration

	mu      sync.Mutex
	phase   string
	rss     map[string][]int64 // phase → RSS samples (bytes)
	heap    map[string][]int64 // phase → heap_alloc samples (bytes)
	scrapes []scrapeSample
	errs    []string

	stop chan struct{}
	done sync.WaitGroup
}

// startMonitor starts sampling in phase "before"; it stops at the end of
// the test (or earlier with stopSampling).
func startMonitor(t *testing.T, col *collector, rssEvery, scrapeEvery time.Duration) *monitor {
	t.Helper()
	m := &monitor{
		col: col, rssEvery: rssEvery, scrapeEvery: scrapeEvery, phase: "before",
		rss: map[string][]int64{}, heap: map[string][]int64{}, stop: make(chan struct{}),
	}
	m.done.Add(2)
	go m.loopRSS()
	go m.loopScrape()
	t.Cleanup(m.stopSampling)
	return m
}

func (m *monitor) stopSampling() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	m.done.Wait()
}

func (m *monitor) setPhase(p string) {
	m.mu.Lock()
	m.phase = p
	m.mu.Unlock()
}

func (m *monitor) loopRSS() {
	defer m.done.Done()
	tick := time.NewTicker(m.rssEvery)
	defer tick.Stop()
	for {
		if m.col.proc.exited() {
			m.fail("collector exited (%v)", m.col.proc.waitErr)
			return
		}
		rss, err := readRSS(m.col.pid())
		m.mu.Lock()
		if err == nil {
			m.rss[m.phase] = append(m.rss[m.phase], rss)
		}
		m.mu.Unlock()
		select {
		case <-m.stop:
			return
		case <-tick.C:
		}
	}
}

func (m *monitor) loopScrape() {
	defer m.done.Done()
	tick := time.NewTicker(m.scrapeEvery)
	defer tick.Stop()
	for {
		m.mu.Lock()
		phase := m.phase
		m.mu.Unlock()
		d, n, err := timedScrape(m.col.metricsURL())
		heap, herr := telemetryValue(m.col, "otelcol_process_runtime_heap_alloc_bytes", nil)
		m.mu.Lock()
		if err != nil {
			m.errs = append(m.errs, fmt.Sprintf("%s: scrape after %s: %v", phase, d.Round(time.Millisecond), err))
		} else {
			m.scrapes = append(m.scrapes, scrapeSample{at: time.Now(), latency: d, bytes: n, phase: phase})
		}
		if herr == nil {
			m.heap[phase] = append(m.heap[phase], int64(heap))
		}
		m.mu.Unlock()
		select {
		case <-m.stop:
			return
		case <-tick.C:
		}
	}
}

// waitScrapes waits until the monitor has completed n scrapes begun in
// phase, or timeout: a phase whose scrapes are slow (a huge exposition)
// must last long enough for its figures to mean something.
func (m *monitor) waitScrapes(phase string, n int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if m.stats(phase).scrapes >= n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (m *monitor) fail(format string, args ...any) {
	m.mu.Lock()
	m.errs = append(m.errs, fmt.Sprintf(format, args...))
	m.mu.Unlock()
}

// phaseStats summarises one phase.
type phaseStats struct {
	rssFirst, rssMax, rssLast int64
	heapMax                   int64
	scrapes                   int
	scrapeP50, scrapeMax      time.Duration
	scrapeBytes               int64 // of the largest scrape
}

func (m *monitor) stats(phase string) phaseStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	var s phaseStats
	if r := m.rss[phase]; len(r) > 0 {
		s.rssFirst, s.rssLast = r[0], r[len(r)-1]
		for _, v := range r {
			s.rssMax = max(s.rssMax, v)
		}
	}
	for _, v := range m.heap[phase] {
		s.heapMax = max(s.heapMax, v)
	}
	var lat []time.Duration
	for _, sc := range m.scrapes {
		if sc.phase == phase {
			lat = append(lat, sc.latency)
			if sc.latency > s.scrapeMax {
				s.scrapeMax = sc.latency
			}
			s.scrapeBytes = max(s.scrapeBytes, sc.bytes)
		}
	}
	if len(lat) > 0 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		s.scrapeP50 = lat[len(lat)/2]
	}
	s.scrapes = len(lat)
	return s
}

func (s phaseStats) String() string {
	return fmt.Sprintf("RSS %.0f→%.0f MiB (max %.0f), heap max %.0f MiB, %d scrapes p50 %s max %s (%.1f MiB)",
		float64(s.rssFirst)/mib, float64(s.rssLast)/mib, float64(s.rssMax)/mib, float64(s.heapMax)/mib,
		s.scrapes, s.scrapeP50.Round(time.Millisecond), s.scrapeMax.Round(time.Millisecond), float64(s.scrapeBytes)/mib)
}

// errors returns the sampling errors (a failed scrape, the collector gone).
func (m *monitor) errors() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.errs...)
}

// ---------------------------------------------------------------------------
// Good traffic: sent alongside every attack, counted exactly

// goodJob is the service.name of the good traffic (its Prometheus job).
const goodJob = "good-traffic"

// goodRoutes are the good traffic's label tuples: two over OTLP protobuf,
// one over OTLP JSON. Hostile traffic never uses job="good-traffic".
var goodRoutes = []struct {
	route, method string
	status        int
	json          bool
}{
	{"/good/proto", "GET", 200, false},
	{"/good/proto-err", "POST", 503, false},
	{"/good/json", "PUT", 201, true},
}

// goodSender posts good requests every interval until stopped. A 429 is
// retried after its Retry-After like an OTLP exporter would; only requests
// answered 200 are counted. Anything else (another status, no answer) is an
// error: the count would no longer be exact.
type goodSender struct {
	col      *collector
	interval time.Duration
	spans    int // spans per route per tick

	accepted  []atomic.Int64 // spans accepted per goodRoutes index
	requests  atomic.Int64   // requests answered 200
	throttled atomic.Int64   // 429 answers (each retried)
	mu        sync.Mutex
	errs      []string

	cancel context.CancelFunc
	done   chan struct{}
}

// goodClient carries the good traffic on connections of its own.
var goodClient = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}

// startGoodSender starts the good traffic; it is stopped by stop (or at the
// end of the test) and runs at most maxRun.
func startGoodSender(t *testing.T, col *collector, interval time.Duration, spans int, maxRun time.Duration) *goodSender {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), maxRun)
	g := &goodSender{col: col, interval: interval, spans: spans, accepted: make([]atomic.Int64, len(goodRoutes)),
		cancel: cancel, done: make(chan struct{})}
	go g.run(ctx)
	t.Cleanup(g.stop)
	return g
}

func (g *goodSender) stop() {
	g.cancel()
	<-g.done
}

func (g *goodSender) run(ctx context.Context) {
	defer close(g.done)
	tick := time.NewTicker(g.interval)
	defer tick.Stop()
	for ctx.Err() == nil {
		for i, r := range goodRoutes {
			var body []byte
			ct := "application/x-protobuf"
			if r.json {
				ct = "application/json"
				spans := make([]jsonSpan, g.spans)
				for j := range spans {
					spans[j] = jsonSpan{method: r.method, route: r.route, status: map[string]any{"intValue": strconv.Itoa(r.status)}}
				}
				body = otlpJSON(service(goodJob), spans...)
			} else {
				body = newProtoExport().resource(goodJob).spans(g.spans, r.method, r.route, r.status, 0).bytes()
			}
			if g.post(ctx, ct, body) {
				g.accepted[i].Add(int64(g.spans))
			}
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// post sends one request until it is answered 200 (true) or refused for good
// (false, recorded as an error). A stop while throttled gives up the request
// (false, not an error: it was never accepted).
func (g *goodSender) post(ctx context.Context, ct string, body []byte) bool {
	for attempt := 0; attempt < 60; attempt++ {
		resp, err := goodClient.Post(g.col.tracesURL(), ct, bytes.NewReader(body))
		if err != nil {
			g.fail("good request got no answer: %v", err)
			return false
		}
		msg, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			g.requests.Add(1)
			return true
		case resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "":
			g.throttled.Add(1)
			secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			select {
			case <-ctx.Done():
				return false
			case <-time.After(time.Duration(max(secs, 1)) * time.Second):
			}
		default:
			g.fail("good request answered %d: %s", resp.StatusCode, truncate(msg))
			return false
		}
	}
	g.fail("good request still throttled after 60 attempts")
	return false
}

func (g *goodSender) fail(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.errs) < 20 {
		g.errs = append(g.errs, fmt.Sprintf(format, args...))
	}
}

func (g *goodSender) errors() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.errs...)
}

// want is what the exporter must show for the good traffic.
func (g *goodSender) want() seriesCounts {
	e := expectedCounts{}
	for i, r := range goodRoutes {
		if n := g.accepted[i].Load(); n > 0 {
			e.add(map[string]string{"job": goodJob, "http_route": r.route,
				"http_request_method": r.method, "http_response_status_code": strconv.Itoa(r.status)}, int(n))
		}
	}
	return e.exported()
}

func (g *goodSender) total() int64 {
	var n int64
	for i := range g.accepted {
		n += g.accepted[i].Load()
	}
	return n
}

// waitGoodExact waits until the exporter's good series equal what was
// accepted, exactly; it fails on any error of the good sender.
func waitGoodExact(t *testing.T, col *collector, g *goodSender) {
	t.Helper()
	if errs := g.errors(); len(errs) > 0 {
		t.Fatalf("good traffic was not all answered 200/429:\n%s", strings.Join(errs, "\n"))
	}
	want := g.want()
	eventually(t, convergeTimeout, "the good traffic on the exporter, exactly", func() (bool, string) {
		got, _, err := scrapeFamily(col, metricName, func(l string) bool { return strings.Contains(l, `job="`+goodJob+`"`) })
		if err != nil {
			return false, err.Error()
		}
		diff := diffCounts(got, want)
		return diff == "", diff
	})
}

// ---------------------------------------------------------------------------
// Exporter and telemetry readers

// scrapeFamily scrapes the exporter and returns the samples of one metric
// name whose line keep accepts, and how many samples of that name there are
// in all. Lines are selected by prefix before parsing, so a scrape of
// hundreds of thousands of series is cheap; the kept ones are parsed by
// textparse like every other check.
func scrapeFamily(col *collector, name string, keep func(line string) bool) (seriesCounts, int, error) {
	resp, err := plainClient.Get(col.metricsURL())
	if err != nil {
		return nil, 0, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: status %d", col.metricsURL(), resp.StatusCode)
	}
	if err != nil {
		return nil, 0, err
	}
	var kept bytes.Buffer
	total := 0
	for line := range bytes.Lines(body) {
		if !bytes.HasPrefix(line, []byte(name)) || len(line) <= len(name) || (line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		total++
		if keep == nil || keep(string(line)) {
			kept.Write(line)
		}
	}
	samples, err := parseExposition(kept.Bytes(), exporterContentType)
	if err != nil {
		return nil, 0, err
	}
	return samplesOf(samples, name), total, nil
}

// sumCounts adds up the values of a seriesCounts.
func sumCounts(s seriesCounts) float64 {
	var n float64
	for _, v := range s {
		n += v
	}
	return n
}

// telemetryValue sums the collector's own metric name over the samples whose
// labels include match (nil: all).
func telemetryValue(col *collector, name string, match map[string]string) (float64, error) {
	body, contentType, err := scrape(col.telemetryURL())
	if err != nil {
		return 0, err
	}
	samples, err := parseExposition(body, contentType)
	if err != nil {
		return 0, err
	}
	var total float64
	found := false
outer:
	for _, s := range samples {
		if s.labels.Get("__name__") != name {
			continue
		}
		for k, v := range match {
			if s.labels.Get(k) != v {
				continue outer
			}
		}
		total += s.value
		found = true
	}
	if !found && match == nil {
		return 0, fmt.Errorf("no %s in the collector's telemetry", name)
	}
	return total, nil
}

// waitTelemetry waits until the collector's metric equals want.
func waitTelemetry(t *testing.T, col *collector, name string, match map[string]string, want float64) {
	t.Helper()
	eventually(t, convergeTimeout, fmt.Sprintf("%s%v = %v", name, match, want), func() (bool, string) {
		got, err := telemetryValue(col, name, match)
		if err != nil {
			return false, err.Error()
		}
		return got == want, fmt.Sprintf("got %v", got)
	})
}

// requestsOutcome is the receiver's request counter of one outcome (HTTP).
func requestsOutcome(outcome string) map[string]string {
	return map[string]string{"outcome": outcome, "transport": "http"}
}

// ---------------------------------------------------------------------------
// OTLP protobuf, encoded by hand: the suite sends hundreds of thousands of
// spans under -race, where a generated marshaller would be the bottleneck.
// Field numbers from opentelemetry-proto (collector/trace/v1, trace/v1,
// common/v1, resource/v1).

// protoExport builds an ExportTraceServiceRequest one resource at a time.
type protoExport struct {
	out  []byte // finished resource_spans
	res  []byte // the current ResourceSpans' resource
	body []byte // the current ScopeSpans' spans
	open bool
}

func newProtoExport() *protoExport { return &protoExport{} }

var spanSeq atomic.Uint64

// resource starts a resource with service.name (closing the previous one).
func (p *protoExport) resource(serviceName string) *protoExport {
	p.flush()
	p.res = appendKVString(p.res[:0], 1, "service.name", serviceName)
	p.body = p.body[:0]
	p.open = true
	return p
}

// spans adds n SERVER spans of one method, route and status, each with a
// pad-byte string attribute (to reach a body size cheaply).
func (p *protoExport) spans(n int, method, route string, status, pad int) *protoExport {
	for range n {
		p.span(method, route, status, pad)
	}
	return p
}

var padding = strings.Repeat("p", 1<<20)

// span adds one SERVER span; route "" leaves http.route out.
func (p *protoExport) span(method, route string, status, pad int) *protoExport {
	seq := spanSeq.Add(1)
	var ids [16]byte
	binary.BigEndian.PutUint64(ids[:8], 0xfeedface)
	binary.BigEndian.PutUint64(ids[8:], seq)
	end := uint64(time.Now().UnixNano())
	var s []byte
	s = protowire.AppendTag(s, 1, protowire.BytesType) // trace_id
	s = protowire.AppendBytes(s, ids[:])
	s = protowire.AppendTag(s, 2, protowire.BytesType) // span_id
	s = protowire.AppendBytes(s, ids[8:])
	s = protowire.AppendTag(s, 5, protowire.BytesType) // name
	s = protowire.AppendString(s, method+" "+route)
	s = protowire.AppendTag(s, 6, protowire.VarintType) // kind = SERVER
	s = protowire.AppendVarint(s, 2)
	s = protowire.AppendTag(s, 7, protowire.Fixed64Type) // start_time_unix_nano
	s = protowire.AppendFixed64(s, end-5_000_000)
	s = protowire.AppendTag(s, 8, protowire.Fixed64Type) // end_time_unix_nano
	s = protowire.AppendFixed64(s, end)
	s = appendKVString(s, 9, "http.request.method", method)
	if route != "" {
		s = appendKVString(s, 9, "http.route", route)
	}
	s = appendKVInt(s, 9, "http.response.status_code", int64(status))
	if pad > 0 {
		s = appendKVString(s, 9, "pad", padding[:pad])
	}
	p.body = protowire.AppendTag(p.body, 2, protowire.BytesType) // ScopeSpans.spans
	p.body = protowire.AppendBytes(p.body, s)
	return p
}

// flush closes the current resource into out.
func (p *protoExport) flush() {
	if !p.open {
		return
	}
	var scope []byte
	scope = protowire.AppendTag(scope, 1, protowire.BytesType) // ScopeSpans.scope
	scope = protowire.AppendBytes(scope, protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "e2e-hostile"))
	scope = append(scope, p.body...)
	var rs []byte
	rs = protowire.AppendTag(rs, 1, protowire.BytesType) // ResourceSpans.resource
	rs = protowire.AppendBytes(rs, p.res)
	rs = protowire.AppendTag(rs, 2, protowire.BytesType) // ResourceSpans.scope_spans
	rs = protowire.AppendBytes(rs, scope)
	p.out = protowire.AppendTag(p.out, 1, protowire.BytesType) // ExportTraceServiceRequest.resource_spans
	p.out = protowire.AppendBytes(p.out, rs)
	p.open = false
}

// bytes returns the encoded request.
func (p *protoExport) bytes() []byte {
	p.flush()
	return p.out
}

// appendKVString appends a KeyValue with a string value as field num.
func appendKVString(b []byte, num protowire.Number, key, val string) []byte {
	var v []byte
	v = protowire.AppendTag(v, 1, protowire.BytesType) // AnyValue.string_value
	v = protowire.AppendString(v, val)
	return appendKV(b, num, key, v)
}

// appendKVInt appends a KeyValue with an int value as field num.
func appendKVInt(b []byte, num protowire.Number, key string, val int64) []byte {
	var v []byte
	v = protowire.AppendTag(v, 3, protowire.VarintType) // AnyValue.int_value
	v = protowire.AppendVarint(v, uint64(val))
	return appendKV(b, num, key, v)
}

func appendKV(b []byte, num protowire.Number, key string, anyValue []byte) []byte {
	var kv []byte
	kv = protowire.AppendTag(kv, 1, protowire.BytesType)
	kv = protowire.AppendString(kv, key)
	kv = protowire.AppendTag(kv, 2, protowire.BytesType)
	kv = protowire.AppendBytes(kv, anyValue)
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, kv)
}

// bigJSONExport is an OTLP/JSON export of one resource with spans of route,
// padded to about size bytes.
func bigJSONExport(job, route string, size int) ([]byte, int) {
	const pad = 900
	var b bytes.Buffer
	b.Grow(size + 4096)
	fmt.Fprintf(&b, `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":%q}}]},"scopeSpans":[{"scope":{"name":"e2e-hostile"},"spans":[`, job)
	now := time.Now().UnixNano()
	n := 0
	for b.Len() < size-2048 {
		if n > 0 {
			b.WriteByte(',')
		}
		seq := spanSeq.Add(1)
		fmt.Fprintf(&b, `{"traceId":"%016x%016x","spanId":"%016x","name":"POST %s","kind":2,"startTimeUnixNano":"%d","endTimeUnixNano":"%d",`+
			`"attributes":[{"key":"http.request.method","value":{"stringValue":"POST"}},{"key":"http.route","value":{"stringValue":%q}},`+
			`{"key":"http.response.status_code","value":{"intValue":"200"}},{"key":"pad","value":{"stringValue":"%s"}}]}`,
			uint64(0xfeedface), seq, seq, route, now-5_000_000, now, route, padding[:pad])
		n++
	}
	b.WriteString(`]}]}]}`)
	return b.Bytes(), n
}

// ---------------------------------------------------------------------------
// Small helpers

// answers tallies the statuses a hostile client got; a request with no
// answer is kept apart (noAnswer), with its error.
type answers struct {
	mu       sync.Mutex
	byStatus map[int]int
	noAnswer []string
}

func newAnswers() *answers { return &answers{byStatus: map[int]int{}} }

func (a *answers) add(status int) {
	a.mu.Lock()
	a.byStatus[status]++
	a.mu.Unlock()
}

func (a *answers) lost(err error) {
	a.mu.Lock()
	a.noAnswer = append(a.noAnswer, err.Error())
	a.mu.Unlock()
}

func (a *answers) get(status int) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.byStatus[status]
}

func (a *answers) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	codes := make([]int, 0, len(a.byStatus))
	for c := range a.byStatus {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d×%d", c, a.byStatus[c]))
	}
	if len(a.noAnswer) > 0 {
		parts = append(parts, fmt.Sprintf("no answer×%d", len(a.noAnswer)))
	}
	return strings.Join(parts, " ")
}

// checkAllAnswered fails when a request got no answer.
func (a *answers) checkAllAnswered(t *testing.T) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.noAnswer) > 0 {
		t.Errorf("%d requests got no answer, e.g. %s", len(a.noAnswer), a.noAnswer[0])
	}
}

// attackClient sends hostile requests; its own transport, generous timeout
// (a 20 MB upload on a loaded 2-core machine), no compression.
func newAttackClient() *http.Client {
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: 32, DisableCompression: true,
	}}
}

// clientFrom is newAttackClient connecting from the loopback address ip
// (any of 127.0.0.0/8 on Linux): a client of its own, as another gateway.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: 2, DisableCompression: true, DialContext: d.DialContext,
	}}
}

// postCount posts body and records the answer in a; it returns the status
// (0: no answer), the Retry-After header and the body.
func postCount(c *http.Client, a *answers, u, ct string, body []byte) (int, string, []byte) {
	resp, err := c.Post(u, ct, bytes.NewReader(body))
	if err != nil {
		a.lost(err)
		return 0, "", nil
	}
	defer resp.Body.Close()
	msg, err := io.ReadAll(resp.Body)
	if err != nil {
		a.lost(fmt.Errorf("status %d, reading the answer: %w", resp.StatusCode, err))
		return 0, "", nil
	}
	a.add(resp.StatusCode)
	return resp.StatusCode, resp.Header.Get("Retry-After"), msg
}

func mibOf(n int64) float64 { return math.Round(float64(n)/mib*10) / 10 }
