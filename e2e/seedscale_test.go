package e2e

// The seeds' scale through `make run`'s own configuration: a Kong with
// 10,000 routes, 2 methods and 3 status codes (60,000 label tuples) sends
// its spans to testdata/config.yaml, untouched but for its ports, and every
// tuple is served exactly, with nothing folded into overflow anywhere in the
// pipeline. SEED_ROUTES=100000 runs the same with 100,000 routes (600,000
// tuples), beyond the receiver's default bound: its first 100,000 tuples
// are counted exactly, the rest under the overflow series, the fold is
// logged once, and the totals stay exact (not part of `make test`: ~1 GB
// of RSS and a minute of two cores).

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/encoding/protowire"
)

const (
	// seedRoutes × seedMethods × seedStatuses is the seeds' Kong.
	seedRoutes = 10_000
	// seedDefaultMaxTuples is the receiver's default limits.max_tuples
	// (receiver README, Limits).
	seedDefaultMaxTuples = 100_000
	// seedTracesPerExport: one OTLP/HTTP export per 1,000 requests (a Kong
	// node's batch), 2,000 spans.
	seedTracesPerExport = 1000
	// seedRSSBound bounds the collector's peak RSS at the seeds' scale: the
	// README's figure (receiver, processor, exporter and Go's headroom at
	// GOGC=100) with room.
	seedRSSBound = 1024 * mib
)

var (
	seedMethods  = []string{"GET", "POST"}
	seedStatuses = []int64{200, 404, 503}
)

// seedTuple is one (route, method, status) of the seed gateway.
type seedTuple struct {
	route  string
	method string
	status int64
}

// seedTuples lists routes × methods × statuses.
func seedTuples(routes int) []seedTuple {
	out := make([]seedTuple, 0, routes*len(seedMethods)*len(seedStatuses))
	for r := range routes {
		route := "/api/v1/route-" + strconv.Itoa(r) + "/{id}"
		for _, m := range seedMethods {
			for _, s := range seedStatuses {
				out = append(out, seedTuple{route, m, s})
			}
		}
	}
	return out
}

func (s seedTuple) key() string {
	return s.method + " " + s.route + " " + strconv.FormatInt(s.status, 10)
}

// makeRunConfig is testdata/config.yaml with its ports (and only its ports)
// replaced by ports[0..4]: OTLP/gRPC, OTLP/HTTP, promstream, health_check,
// telemetry. Each port must appear exactly once, so a change of the file
// fails here rather than testing something else.
func makeRunConfig(t *testing.T, ports []int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b)
	for i, old := range []string{"localhost:14317", "localhost:14318", "localhost:9464", "localhost:13133", "port: 8888"} {
		if n := strings.Count(cfg, old); n != 1 {
			t.Fatalf("testdata/config.yaml has %q %d times, want once", old, n)
		}
		prefix, _, _ := strings.Cut(old, ":")
		sep := ":"
		if prefix == "port" {
			sep = ": "
		}
		cfg = strings.Replace(cfg, old, prefix+sep+strconv.Itoa(ports[i]), 1)
	}
	return cfg
}

// seedExport is one Kong node's OTLP/HTTP protobuf export of the requests
// of tuples (a `kong` SERVER root span and its `kong.balancer` CLIENT
// child each, the attributes of kongExport's), with span ids from seq.
//
// Encoded from pieces built once (every attribute but the route's and the
// URL's is one of a few values), a few appends of whole byte strings per
// span: the suite runs with -race, which instruments every byte a varint
// or tag writer touches, and proto.Marshal of the 180,000 spans took ~25 s
// of the test's minute (protowire field by field, ~18 s).
func seedExport(tuples []seedTuple, seq *uint64) []byte {
	now := uint64(time.Now().UnixNano())
	p := seedPiecesOnce()
	// Root: head (ids patched), attributes; child: head, parent, attributes.
	spans := make([]byte, 0, len(tuples)*(len(p.rootHead)+len(p.childSpan)+256))
	for _, tp := range tuples {
		*seq++
		url := kvString("http.url", "http://api.example.com"+tp.route)
		route := kvString("http.route", tp.route)
		method, status := p.methods[tp.method], p.statuses[tp.status]
		size := len(p.rootHead) + len(method) + len(url) + len(p.rootConst) + len(status) + len(route)
		spans = protowire.AppendTag(spans, 2, protowire.BytesType) // ScopeSpans.spans
		spans = protowire.AppendVarint(spans, uint64(size))
		at := len(spans)
		spans = append(spans, p.rootHead...)
		spans = append(spans, method...)
		spans = append(spans, url...)
		spans = append(spans, p.rootConst...)
		spans = append(spans, status...)
		spans = append(spans, route...)
		patchHead(spans[at:], *seq, *seq<<1, p.rootTimesAt, now-20_000_000, now)
		spans = protowire.AppendTag(spans, 2, protowire.BytesType)
		spans = protowire.AppendVarint(spans, uint64(len(p.childSpan)))
		at = len(spans)
		spans = append(spans, p.childSpan...)
		patchHead(spans[at:], *seq, *seq<<1|1, p.childTimesAt, now-19_000_000, now-1_000_000)
		binary.BigEndian.PutUint64(spans[at+p.parentAt:], *seq<<1) // parent_span_id
	}
	var res []byte
	res = appendKVString(res, 1, "service.name", "kong")
	res = appendKVString(res, 1, "service.instance.id", "kong-seed-0")
	res = appendKVString(res, 1, "service.version", "3.9.1")
	var scope []byte
	scope = protowire.AppendTag(scope, 1, protowire.BytesType) // ScopeSpans.scope
	scope = protowire.AppendBytes(scope, protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "kong-internal"))
	scope = append(scope, spans...)
	var rs []byte
	rs = protowire.AppendTag(rs, 1, protowire.BytesType) // ResourceSpans.resource
	rs = protowire.AppendBytes(rs, res)
	rs = protowire.AppendTag(rs, 2, protowire.BytesType) // ResourceSpans.scope_spans
	rs = protowire.AppendBytes(rs, scope)
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), rs) // ExportTraceServiceRequest.resource_spans
}

// seedPieces are the encoded parts of seed spans that repeat.
type seedPieces struct {
	// rootHead and childSpan start with trace_id (16 bytes at 2), span_id
	// (8 bytes at 20), and start and end times (fixed64 at timesAt and
	// timesAt+9); childSpan's parent_span_id is at parentAt.
	rootHead, childSpan []byte
	rootConst           []byte // http.host, http.scheme, http.flavor
	methods             map[string][]byte
	statuses            map[int64][]byte
	rootTimesAt         int
	childTimesAt        int
	parentAt            int
}

var (
	seedPiecesVal  *seedPieces
	seedPiecesInit sync.Once
)

func seedPiecesOnce() *seedPieces {
	seedPiecesInit.Do(func() {
		head := func(name string, kind uint64) ([]byte, int) {
			var b []byte
			b = protowire.AppendTag(b, 1, protowire.BytesType) // trace_id at 2
			b = protowire.AppendBytes(b, make([]byte, 16))
			b = protowire.AppendTag(b, 2, protowire.BytesType) // span_id at 20
			b = protowire.AppendBytes(b, make([]byte, 8))
			b = protowire.AppendTag(b, 5, protowire.BytesType)
			b = protowire.AppendString(b, name)
			b = protowire.AppendTag(b, 6, protowire.VarintType)
			b = protowire.AppendVarint(b, kind)
			at := len(b) + 1
			b = protowire.AppendTag(b, 7, protowire.Fixed64Type)
			b = protowire.AppendFixed64(b, 0)
			b = protowire.AppendTag(b, 8, protowire.Fixed64Type)
			return protowire.AppendFixed64(b, 0), at
		}
		p := &seedPieces{methods: map[string][]byte{}, statuses: map[int64][]byte{}}
		p.rootHead, p.rootTimesAt = head("kong", 2)            // SERVER
		p.childSpan, p.childTimesAt = head("kong.balancer", 3) // CLIENT
		p.childSpan = protowire.AppendTag(p.childSpan, 4, protowire.BytesType)
		p.parentAt = len(p.childSpan) + 1
		p.childSpan = protowire.AppendBytes(p.childSpan, make([]byte, 8))
		p.childSpan = append(p.childSpan, kvString("net.peer.ip", "10.1.0.7")...)
		p.childSpan = append(p.childSpan, kvString("net.peer.name", "upstream.internal")...)
		for _, kv := range [][2]string{{"http.host", "api.example.com"}, {"http.scheme", "http"}, {"http.flavor", "1.1"}} {
			p.rootConst = append(p.rootConst, kvString(kv[0], kv[1])...)
		}
		for _, m := range seedMethods {
			p.methods[m] = kvString("http.method", m)
		}
		for _, st := range seedStatuses {
			p.statuses[st] = appendKVInt(nil, 9, "http.status_code", st)
		}
		seedPiecesVal = p
	})
	return seedPiecesVal
}

// kvString is a span attribute (Span.attributes, field 9) with a string
// value.
func kvString(k, v string) []byte { return appendKVString(nil, 9, k, v) }

// patchHead writes a span's trace id (from trace), span id and times into
// span, which starts with a head as seedPiecesOnce builds it (its times at
// timesAt).
func patchHead(span []byte, trace, id uint64, timesAt int, start, end uint64) {
	binary.BigEndian.PutUint64(span[2+8:], trace)
	binary.BigEndian.PutUint64(span[20:], id)
	binary.LittleEndian.PutUint64(span[timesAt:], start)
	binary.LittleEndian.PutUint64(span[timesAt+9:], end)
}

func TestSeedScale(t *testing.T) {
	routes := seedRoutes
	if v, err := strconv.Atoi(os.Getenv("SEED_ROUTES")); err == nil && v > 0 {
		routes = v
	}
	ports := freePorts(t, 5)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(makeRunConfig(t, ports)), 0o600); err != nil {
		t.Fatal(err)
	}
	col := &collector{
		grpcAddr: hostPort(ports[0]), httpAddr: hostPort(ports[1]), promAddr: hostPort(ports[2]), telemetryAddr: hostPort(ports[4]),
	}
	col.proc = startProcess(t, "otelcol (make run config)", filepath.Join(dir, "otelcol.log"), otelcolBin, "--config", cfgPath)
	waitHTTP200(t, col.proc, col.metricsURL())

	// Every tuple once, then every fourth again: counts of 1 and 2.
	tuples := seedTuples(routes)
	var sendOrder []seedTuple
	sendOrder = append(sendOrder, tuples...)
	for i := 3; i < len(tuples); i += 4 {
		sendOrder = append(sendOrder, tuples[i])
	}
	want := make(map[string]float64, len(tuples))
	for _, tp := range sendOrder {
		want[tp.key()]++
	}
	began := time.Now()
	sendSeed(t, col.tracesURL(), sendOrder)
	sent := time.Since(began)
	t.Logf("%d routes × %d methods × %d statuses = %d tuples, %d requests (%d spans) sent in %v",
		routes, len(seedMethods), len(seedStatuses), len(tuples), len(sendOrder), 2*len(sendOrder), sent.Round(time.Millisecond))

	heldWant := min(len(tuples), seedDefaultMaxTuples)
	var got map[string]float64
	var overflow float64
	eventually(t, 2*convergeTimeout, "every request served by promstream", func() (bool, string) {
		var err error
		got, overflow, err = scrapeSeed(col)
		if err != nil {
			return false, err.Error()
		}
		var total float64
		for _, v := range got {
			total += v
		}
		total += overflow
		return total == float64(len(sendOrder)), fmt.Sprintf("%v of %d requests served (%d tuples, overflow %v)", total, len(sendOrder), len(got), overflow)
	})
	peak, err := readStatusKB(col.pid(), "VmHWM:")
	if err != nil {
		t.Fatal(err)
	}
	rss, _ := readStatusKB(col.pid(), "VmRSS:")
	cpu, _ := processCPU(col.pid())

	// Held tuples are counted exactly; with more tuples than the default
	// bound, the rest are in the overflow series, and only there.
	if len(got) != heldWant {
		t.Errorf("%d tuples served with their labels, want %d", len(got), heldWant)
	}
	var heldSum float64
	wrong := 0
	for k, v := range got {
		heldSum += v
		if want[k] != v {
			if wrong++; wrong <= 5 {
				t.Errorf("%s: served %v, want %v", k, v, want[k])
			}
		}
	}
	if wrong > 0 {
		t.Errorf("%d tuples served with a wrong count", wrong)
	}
	if wantOverflow := float64(len(sendOrder)) - heldSum; overflow != wantOverflow {
		t.Errorf("overflow series hold %v requests, want %v", overflow, wantOverflow)
	}
	if len(tuples) <= seedDefaultMaxTuples && overflow != 0 {
		t.Errorf("%v requests folded into overflow at %d tuples, within the default bound", overflow, len(tuples))
	}

	// Nothing folded or refused downstream, and the receiver's telemetry and
	// log say what the receiver folded.
	checks := []struct {
		name  string
		match map[string]string
		want  float64
	}{
		{"otelcol_receiver_gateway_events", map[string]string{"outcome": "overflow"}, overflow},
		{"otelcol_processor_cumulative_points", map[string]string{"outcome": "overflowed"}, 0},
		{"otelcol_exporter_promstream_dropped_points", map[string]string{"reason": "max_series"}, 0},
	}
	for _, c := range checks {
		if v, err := telemetrySum(col, c.name, c.match); err != nil || v != c.want {
			t.Errorf("%s%v = %v (%v), want %v", c.name, c.match, v, err, c.want)
		}
	}
	series, _ := telemetrySum(col, "otelcol_exporter_promstream_series", nil)
	folds := logLinesOf(t, col.proc, "limits.max_tuples reached")
	wantFolds := 0
	if overflow > 0 {
		wantFolds = 1
	}
	if len(folds) != wantFolds {
		t.Errorf("fold warnings %q, want %d", folds, wantFolds)
	}
	if other := logLinesOf(t, col.proc, "limits.max_streams"); len(other) > 0 {
		t.Errorf("the processor folded: %q", other)
	}
	t.Logf("\nroutes  tuples  requests  held tuples  overflow requests  exporter series  peak RSS  RSS at end  collector CPU  fold warnings\n"+
		"%6d  %6d  %8d  %11d  %17.0f  %15.0f  %4d MiB  %6d MiB  %11.1fs  %d",
		routes, len(tuples), len(sendOrder), len(got), overflow, series, peak>>10, rss>>10, cpu.Seconds(), len(folds))
	if routes == seedRoutes && peak<<10 > seedRSSBound {
		t.Errorf("peak RSS %d MiB at the seeds' scale, bound %d MiB", peak>>10, seedRSSBound>>20)
	}
}

// sendSeed posts the requests of order in exports of seedTracesPerExport,
// from two workers; every export must be acknowledged.
func sendSeed(t *testing.T, url string, order []seedTuple) {
	t.Helper()
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := range 2 {
		wg.Go(func() {
			var seq uint64 = uint64(w) << 40
			for first := w * seedTracesPerExport; first < len(order); first += 2 * seedTracesPerExport {
				body := seedExport(order[first:min(first+seedTracesPerExport, len(order))], &seq)
				if err := postAcked(client, url, body); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// postAcked posts body, retrying a 429/503 (the receiver's admission) after
// its Retry-After, as a gateway's exporter does.
func postAcked(client *http.Client, url string, body []byte) error {
	for attempt := 0; ; attempt++ {
		resp, err := client.Post(url, "application/x-protobuf", bytes.NewReader(body))
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			return nil
		case (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) && attempt < 50:
			time.Sleep(time.Second) // Retry-After: 1
		default:
			return fmt.Errorf("POST %s: status %d (attempt %d)", url, resp.StatusCode, attempt+1)
		}
	}
}

// scrapeSeed reads gateway_requests_total from promstream (that family
// only: ?name[]=) and returns the tuples' counts by seedTuple.key and the
// overflow series' sum.
func scrapeSeed(col *collector) (map[string]float64, float64, error) {
	body, ct, err := scrape(col.metricsURL() + "?name[]=gateway_requests_total")
	if err != nil {
		return nil, 0, err
	}
	samples, err := parseExposition(body, ct)
	if err != nil {
		return nil, 0, err
	}
	out := make(map[string]float64, len(samples))
	var overflow float64
	for _, s := range samples {
		if s.labels.Get(model.MetricNameLabel) != "gateway_requests_total" {
			return nil, 0, fmt.Errorf("?name[]=gateway_requests_total served %s", s.labels)
		}
		if s.labels.Get("otel_metric_overflow") == "true" {
			overflow += s.value
			continue
		}
		k := s.labels.Get("http_request_method") + " " + s.labels.Get("http_route") + " " + s.labels.Get("http_response_status_code")
		if _, dup := out[k]; dup {
			return nil, 0, fmt.Errorf("two series for %s", k)
		}
		out[k] = s.value
	}
	return out, overflow, nil
}

// readStatusKB reads a kB field (VmHWM:, VmRSS:) of /proc/<pid>/status.
func readStatusKB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// processCPU is the user and system CPU time pid has used
// (/proc/<pid>/stat, fields 14 and 15, in clock ticks of 10 ms).
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command, which is in parentheses and may hold spaces.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// logLinesOf returns the lines of p's log that contain substr.
func logLinesOf(t *testing.T, p *process, substr string) []string {
	t.Helper()
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}
