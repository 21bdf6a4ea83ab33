package e2e

// Fleet harness: collectors that can be restarted with the same config, a
// Kong-shaped traffic driver that spreads OTLP exports round-robin over them
// and keeps exact acknowledgement counts, and the Prometheus reads that turn
// raw samples into totals (counter lifetimes from _created, resets from
// remote-written values).

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// ---------------------------------------------------------------------------
// Collectors of a fleet

// fleetOpts are what differ between the fleet's collector configs.
type fleetOpts struct {
	name       string // collector_name: the collector label's value
	storageDir string // file_storage directory for the cumulative processor; "" = in memory only
	kongURL    string // fake Kong Admin API to poll for health; "" = no health section
	rwURL      string // Prometheus remote-write endpoint; "" = no prometheus_remote_write exporter
	otlpHTTP   string // otlp_http exporter endpoint (a second exporter that fails); "" = none
	// receiverStorage: the receiver checkpoints its flushed windows to the
	// same file_storage (needs storageDir).
	receiverStorage bool
	// checkpointInterval is the processor's (default 1s).
	checkpointInterval time.Duration
	// flushInterval is the receiver's (default 1s).
	flushInterval time.Duration
	// defaultGrace leaves promstream's shutdown_grace at its default
	// instead of fleetShutdownGrace.
	defaultGrace bool
	// tracesPipeline also lists the receiver in a traces pipeline (the
	// spans passed on to the debug exporter), so one receiver serves two
	// pipelines.
	tracesPipeline bool
}

// fleetShutdownGrace is promstream's shutdown_grace in the fleet: the
// Prometheus scrape interval (1s) plus its timeout (1s), and a second more.
// With sharded jobs only whole scrapes end the wait early, and Prometheus
// makes none, so every shutdown waits all of it.
const fleetShutdownGrace = 3 * time.Second

// fleetCollectorConfig renders one collector's config. ports: OTLP/HTTP,
// OTLP/gRPC, promstream, internal telemetry.
func fleetCollectorConfig(o fleetOpts, ports []int) string {
	var b strings.Builder
	exporters := []string{"promstream"}
	if o.storageDir != "" {
		fmt.Fprintf(&b, "extensions:\n  file_storage:\n    directory: %s\n", o.storageDir)
	}
	fmt.Fprintf(&b, `receivers:
  gateway:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
      grpc:
        endpoint: 127.0.0.1:%d
    flush_interval: %s
    collector_name: %s
`, ports[0], ports[1], flushOr(o.flushInterval), o.name)
	if o.receiverStorage {
		// checkpoint_replay as it was before it followed checkpoint_interval +
		// flush_interval (2s here): the storage tests' files span many pages.
		b.WriteString("    storage: file_storage\n    checkpoint_replay: 20s\n")
	}
	if o.kongURL != "" {
		fmt.Fprintf(&b, `    health:
      profile: kong
      report_interval: 5s
      stale_after: 10s
      kong:
        - endpoint: %s
          instance: kong-0
          interval: 1s
          timeout: 2s
`, o.kongURL)
	}
	b.WriteString("processors:\n  cumulative:\n    max_stale: 5m\n")
	if o.storageDir != "" {
		ci := o.checkpointInterval
		if ci == 0 {
			ci = time.Second
		}
		fmt.Fprintf(&b, "    storage: file_storage\n    checkpoint_interval: %s\n", ci)
	}
	fmt.Fprintf(&b, `exporters:
  promstream:
    endpoint: 127.0.0.1:%d
    without_scope_info: true
`, ports[2])
	if !o.defaultGrace {
		fmt.Fprintf(&b, "    shutdown_grace: %s\n", fleetShutdownGrace)
	}
	if o.rwURL != "" {
		// One request at a time: Prometheus 2.42 refuses out-of-order samples.
		fmt.Fprintf(&b, `  prometheus_remote_write:
    endpoint: %s
    namespace: rw
    disable_scope_info: true
    max_batch_request_parallelism: 1
`, o.rwURL)
		exporters = append(exporters, "prometheus_remote_write")
	}
	if o.otlpHTTP != "" {
		// No queue and no retries: the export error reaches the receiver at
		// once, so a retryable one makes it resend the window and a
		// permanent one makes it drop the counts.
		fmt.Fprintf(&b, `  otlp_http:
    endpoint: %s
    timeout: 2s
    sending_queue:
      enabled: false
    retry_on_failure:
      enabled: false
`, o.otlpHTTP)
		exporters = append(exporters, "otlp_http")
	}
	if o.tracesPipeline {
		b.WriteString("  debug:\n    verbosity: basic\n    sampling_initial: 1\n    sampling_thereafter: 1000000\n")
	}
	b.WriteString("service:\n")
	if o.storageDir != "" {
		b.WriteString("  extensions: [file_storage]\n")
	}
	fmt.Fprintf(&b, `  telemetry:
    logs:
      level: info
    metrics:
      level: detailed
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: %d
  pipelines:
    metrics:
      receivers: [gateway]
      processors: [cumulative]
      exporters: [%s]
`, ports[3], strings.Join(exporters, ", "))
	if o.tracesPipeline {
		b.WriteString("    traces:\n      receivers: [gateway]\n      exporters: [debug]\n")
	}
	return b.String()
}

// fleetMember is one collector of a fleet, restartable with the same config
// (same ports, same storage directory).
type fleetMember struct {
	name    string
	dir     string
	cfgPath string
	col     *collector
	starts  int
}

// newFleetMember writes the config; launch starts the process.
func newFleetMember(t *testing.T, o fleetOpts, ports []int) *fleetMember {
	t.Helper()
	dir := t.TempDir()
	m := &fleetMember{name: o.name, dir: dir, cfgPath: filepath.Join(dir, "config.yaml")}
	if err := os.WriteFile(m.cfgPath, []byte(fleetCollectorConfig(o, ports)), 0o600); err != nil {
		t.Fatalf("write %s config: %v", o.name, err)
	}
	m.col = &collector{
		httpAddr: hostPort(ports[0]), grpcAddr: hostPort(ports[1]),
		promAddr: hostPort(ports[2]), telemetryAddr: hostPort(ports[3]),
	}
	return m
}

// launch starts the collector process; waitReady waits for its /metrics.
func (m *fleetMember) launch(t *testing.T) {
	t.Helper()
	m.starts++
	log := filepath.Join(m.dir, fmt.Sprintf("otelcol-%d.log", m.starts))
	m.col.proc = startProcess(t, "otelcol "+m.name, log, otelcolBin, "--config", m.cfgPath)
}

func (m *fleetMember) waitReady(t *testing.T) {
	t.Helper()
	waitHTTP200(t, m.col.proc, m.col.metricsURL())
}

// terminate sends SIGTERM and waits for a clean exit (status 0), bounded by
// fleetShutdownGrace plus generous slack; it returns how long shutdown took.
func (m *fleetMember) terminate(t *testing.T) time.Duration {
	t.Helper()
	p := m.col.proc
	began := time.Now()
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM %s: %v", m.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(fleetShutdownGrace + 30*time.Second):
		t.Fatalf("%s did not exit within %v of SIGTERM; log tail:\n%s", m.name, fleetShutdownGrace+30*time.Second, p.logTail(logTailLines))
	}
	if p.waitErr != nil {
		t.Errorf("%s exited with %v after SIGTERM; log tail:\n%s", m.name, p.waitErr, p.logTail(logTailLines))
	}
	return time.Since(began)
}

// logLines returns the lines of the current process's log that contain
// substr, each cut to its level and message.
func (m *fleetMember) logLines(substr string) []string {
	b, err := os.ReadFile(m.col.proc.logPath)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, substr) {
			continue
		}
		if f := strings.SplitN(l, "\t", 5); len(f) >= 4 { // time, level, caller, message, fields
			l = f[1] + " " + f[3]
		}
		out = append(out, l)
	}
	return out
}

// ---------------------------------------------------------------------------
// Kong-shaped traffic

// kongCall is one kind of request: a route, a method and a status.
type kongCall struct {
	method, route string
	status        int
}

// fleetCalls: 12 label tuples (route × method × status).
var fleetCalls = []kongCall{
	{"GET", "/orders", 200}, {"GET", "/orders", 404}, {"POST", "/orders", 201}, {"POST", "/orders", 503},
	{"GET", "/users/{id}", 200}, {"GET", "/users/{id}", 404}, {"PUT", "/users/{id}", 204},
	{"GET", "/search", 200}, {"GET", "/search", 429}, {"GET", "/search", 500},
	{"DELETE", "/carts/{id}", 204}, {"DELETE", "/carts/{id}", 503},
}

// seriesKey names one gateway_requests_total series of one collector.
func seriesKey(collector string, c kongCall) string {
	return collector + " " + c.method + " " + c.route + " " + strconv.Itoa(c.status)
}

// metricSeriesKey is seriesKey read back from a series' labels.
func metricSeriesKey(m model.Metric) string {
	return string(m["collector"]) + " " + string(m["http_request_method"]) + " " +
		string(m["http_route"]) + " " + string(m["http_response_status_code"])
}

// kongExport is one OTLP/HTTP protobuf export from a Kong node: n traces,
// each a `kong` SERVER root with a `kong.balancer` CLIENT child, the i-th
// for fleetCalls[(first+i) % len]. It returns the body and the count per call.
func kongExport(node string, first, n int) ([]byte, map[int]int) {
	str := func(k, v string) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
	}
	dbl := func(k string, v float64) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v}}}
	}
	now := time.Now()
	counts := map[int]int{}
	spans := make([]*tracepb.Span, 0, 2*n)
	for i := range n {
		ci := (first + i) % len(fleetCalls)
		c := fleetCalls[ci]
		counts[ci]++
		tid, root, child := make([]byte, 16), make([]byte, 8), make([]byte, 8)
		_, _ = rand.Read(tid)
		_, _ = rand.Read(root)
		_, _ = rand.Read(child)
		start := uint64(now.Add(-20 * time.Millisecond).UnixNano())
		spans = append(spans, &tracepb.Span{
			TraceId: tid, SpanId: root, Name: "kong", Kind: tracepb.Span_SPAN_KIND_SERVER,
			StartTimeUnixNano: start, EndTimeUnixNano: uint64(now.UnixNano()),
			Attributes: []*commonpb.KeyValue{
				str("http.method", c.method), str("http.url", "http://api.example.com"+c.route),
				str("http.host", "api.example.com"), str("http.scheme", "http"), str("http.flavor", "1.1"),
				str("http.client_ip", "192.168.107.1"), str("net.peer.ip", "192.168.107.1"),
				str("kong.request.id", randomHex(16)),
				{Key: "http.status_code", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: int64(c.status)}}},
				str("http.route", c.route),
			},
		}, &tracepb.Span{
			TraceId: tid, SpanId: child, ParentSpanId: root, Name: "kong.balancer", Kind: tracepb.Span_SPAN_KIND_CLIENT,
			StartTimeUnixNano: start + 1_000_000, EndTimeUnixNano: uint64(now.UnixNano()) - 1_000_000,
			Attributes: []*commonpb.KeyValue{
				dbl("try_count", 1), str("net.peer.ip", "37.16.15.184"), dbl("net.peer.port", 80),
				str("net.peer.name", "upstream.example.com"),
			},
		})
	}
	req := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			str("service.name", "kong"), str("service.instance.id", node), str("service.version", "3.9.1"),
		}},
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: "kong-internal", Version: "0.1.0"}, Spans: spans}},
	}}}
	body, err := proto.Marshal(req)
	if err != nil {
		panic(err) // plain generated messages: cannot fail
	}
	return body, counts
}

// trafficTarget is a collector's OTLP/HTTP traces endpoint.
type trafficTarget struct{ name, url string }

// trafficDriver posts Kong exports round-robin over its targets, as a load
// balancer in front of the fleet would: export i goes to target i mod n; an
// export that is not acknowledged (connection refused while a collector
// restarts, any status but 200) goes to the next target, as a gateway's
// exporter retries. Every count is of traces (= requests).
type trafficDriver struct {
	targets []trafficTarget
	perPost int
	client  *http.Client

	mu     sync.Mutex
	sent   map[string]int         // traces by the target they were first posted to
	acked  map[string]map[int]int // traces acknowledged, by target and call
	failed map[string]int         // failed posts by target
	lost   int                    // traces no target acknowledged
	acks   []ack                  // every acknowledgement, in order
	ackedN atomic.Int64
}

func newTrafficDriver(targets []trafficTarget, perPost int) *trafficDriver {
	return &trafficDriver{
		targets: targets, perPost: perPost,
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2}},
		sent:   map[string]int{}, acked: map[string]map[int]int{}, failed: map[string]int{},
	}
}

// run posts total traces, one export every interval. Before the export that
// would pass holdAt traces it waits for release (bounded by holdMax), so
// that traffic still flows after the restarts however slow they were.
func (d *trafficDriver) run(total int, interval time.Duration, holdAt int, release <-chan struct{}, holdMax time.Duration) error {
	defer d.client.CloseIdleConnections()
	n := len(d.targets)
	began := time.Now()
	held := false
	for post := 0; post*d.perPost < total; post++ {
		first := post * d.perPost
		if !held && first+d.perPost > holdAt {
			held = true
			select {
			case <-release:
			case <-time.After(holdMax):
				return fmt.Errorf("traffic held at %d traces for %v: not released", first, holdMax)
			}
			began = time.Now().Add(-time.Duration(post) * interval)
		}
		if wait := time.Until(began.Add(time.Duration(post) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		count := min(d.perPost, total-first)
		body, calls := kongExport("kong-node-"+strconv.Itoa(post%4), first, count)
		d.mu.Lock()
		d.sent[d.targets[post%n].name] += count
		d.mu.Unlock()
		acked := false
		// At most 20 rounds over every target, 250ms apart: 5s without any
		// live collector loses the export.
		for round := 0; round < 20 && !acked; round++ {
			if round > 0 {
				time.Sleep(250 * time.Millisecond)
			}
			for k := range n {
				tg := d.targets[(post+k)%n]
				if d.postOnce(tg.url, body) {
					d.mu.Lock()
					if d.acked[tg.name] == nil {
						d.acked[tg.name] = map[int]int{}
					}
					for ci, c := range calls {
						d.acked[tg.name][ci] += c
					}
					d.acks = append(d.acks, ack{at: time.Now(), traces: count})
					d.mu.Unlock()
					d.ackedN.Add(int64(count))
					acked = true
					break
				}
				d.mu.Lock()
				d.failed[tg.name]++
				d.mu.Unlock()
			}
		}
		if !acked {
			d.mu.Lock()
			d.lost += count
			d.mu.Unlock()
		}
	}
	return nil
}

// ack is one acknowledged export: when the 200 arrived, and its traces.
type ack struct {
	at     time.Time
	traces int
}

// ackedBetween counts the traces acknowledged in (from, to].
func (d *trafficDriver) ackedBetween(from, to time.Time) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, a := range d.acks {
		if a.at.After(from) && !a.at.After(to) {
			n += a.traces
		}
	}
	return n
}

// postOnce posts body and reports whether it was acknowledged (200).
func (d *trafficDriver) postOnce(u string, body []byte) bool {
	resp, err := d.client.Post(u, "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// ackedTotal is what target name acknowledged, all calls.
func (d *trafficDriver) ackedTotal(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	total := 0
	for _, c := range d.acked[name] {
		total += c
	}
	return total
}

// expected is every acknowledged trace as seriesKey → count.
func (d *trafficDriver) expected() map[string]float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]float64{}
	for name, calls := range d.acked {
		for ci, c := range calls {
			out[seriesKey(name, fleetCalls[ci])] += float64(c)
		}
	}
	return out
}

// waitAcked waits until n traces were acknowledged in all.
func (d *trafficDriver) waitAcked(t *testing.T, n int64, done <-chan struct{}) {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for d.ackedN.Load() < n {
		select {
		case <-done:
			t.Fatalf("traffic ended before %d traces were acknowledged", n)
		case <-deadline:
			t.Fatalf("only %d of %d traces acknowledged after 2m", d.ackedN.Load(), n)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ---------------------------------------------------------------------------
// Prometheus reads

// promQueryMatrix runs an instant query for a range vector and returns the
// raw samples.
func promQueryMatrix(p *promServer, query string) (model.Matrix, error) {
	status, body, err := httpGet("http://" + p.addr + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return nil, err
	}
	var resp struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string       `json:"resultType"`
			Result     model.Matrix `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("status %d, decode %q: %w", status, truncate(body), err)
	}
	if resp.Status != "success" || resp.Data.ResultType != "matrix" {
		return nil, fmt.Errorf("status %d, query %q: %s (%s)", status, query, resp.Error, resp.Data.ResultType)
	}
	return resp.Data.Result, nil
}

// metricKey is a series' labels without __name__ (the key that pairs a
// counter's _total and _created series).
func metricKey(m model.Metric) string {
	l := make(map[string]string, len(m))
	for k, v := range m {
		if k != model.MetricNameLabel {
			l[string(k)] = string(v)
		}
	}
	return labelKey(labels.FromMap(l))
}

// lifetimeTotals reads what Prometheus scraped of a counter's samples
// (x_total) or a histogram's count (x_count), scraped as OpenMetrics so that
// their created times are stored too (x_created), over window, and sums, per series, the last value of every counter
// lifetime. A lifetime is a created time: a collector restarted without
// storage starts its counters again with a new one, a restored one keeps
// it. This is exact as long as every lifetime's last value was scraped.
// It returns seriesKey → total, seriesKey → lifetimes, and problems (a
// series twice, samples without a created time at the same timestamp).
func lifetimeTotals(p *promServer, sample, created, window string) (map[string]float64, map[string]int, []string, error) {
	totals, err := promQueryMatrix(p, sample+"["+window+"]")
	if err != nil {
		return nil, nil, nil, err
	}
	createdM, err := promQueryMatrix(p, created+"["+window+"]")
	if err != nil {
		return nil, nil, nil, err
	}
	createdAt := map[string]map[model.Time]float64{}
	for _, s := range createdM {
		m := map[model.Time]float64{}
		for _, v := range s.Values {
			m[v.Timestamp] = float64(v.Value)
		}
		createdAt[metricKey(s.Metric)] = m
	}
	out, lives := map[string]float64{}, map[string]int{}
	var problems []string
	for _, s := range totals {
		k := metricSeriesKey(s.Metric)
		if _, dup := out[k]; dup {
			problems = append(problems, "two series for "+k+": "+s.Metric.String())
		}
		last := map[float64]float64{} // created → last value of that lifetime
		cs := createdAt[metricKey(s.Metric)]
		missing := 0
		for _, v := range s.Values {
			c, ok := cs[v.Timestamp]
			if !ok {
				missing++
				continue
			}
			last[c] = math.Max(last[c], float64(v.Value))
		}
		if missing > 0 {
			problems = append(problems, fmt.Sprintf("%s: %d of %d samples have no _created sample at their timestamp", k, missing, len(s.Values)))
		}
		for _, v := range last {
			out[k] += v
		}
		lives[k] = len(last)
	}
	sort.Strings(problems)
	return out, lives, problems, nil
}

// resetTotals reads remote-written counter samples of name over window and
// sums each series the way Prometheus's increase does without extrapolation:
// the first value, every rise, and after a drop (a reset) the whole new
// value. Remote write delivers every point the pipeline emitted (not a
// scrape's sample of them), so this is exact as long as a restarted
// counter's first value is below its last before the restart, which holds
// here by a wide margin (one second's share of the traffic against tens of
// seconds'). Returns seriesKey → total and seriesKey → resets.
func resetTotals(p *promServer, name, window string) (map[string]float64, map[string]int, []string, error) {
	m, err := promQueryMatrix(p, name+"["+window+"]")
	if err != nil {
		return nil, nil, nil, err
	}
	out, resets := map[string]float64{}, map[string]int{}
	var problems []string
	for _, s := range m {
		k := metricSeriesKey(s.Metric)
		if _, dup := out[k]; dup {
			problems = append(problems, "two series for "+k+": "+s.Metric.String())
		}
		var total, prev float64
		for i, v := range s.Values {
			x := float64(v.Value)
			switch {
			case i == 0:
				total = x
			case x < prev:
				total += x
				resets[k]++
			default:
				total += x - prev
			}
			prev = x
		}
		out[k] = total
	}
	sort.Strings(problems)
	return out, resets, problems, nil
}

// diffTotals is diffCounts for seriesKey maps.
func diffTotals(got, want map[string]float64) string {
	return diffCounts(seriesCounts(got), seriesCounts(want))
}

// sumWhere adds the values whose seriesKey starts with prefix ("c0 ").
func sumWhere(m map[string]float64, prefix string) float64 {
	var s float64
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			s += v
		}
	}
	return s
}

// promSelfMetrics scrapes Prometheus's own /metrics and sums the samples of
// each name whose labels contain every pair of match (name → sum).
func promSelfMetrics(p *promServer) (map[string]float64, []parsedSample, error) {
	body, contentType, err := scrape("http://" + p.addr + "/metrics")
	if err != nil {
		return nil, nil, err
	}
	samples, err := parseExposition(body, contentType)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]float64{}
	for _, s := range samples {
		out[s.labels.Get(model.MetricNameLabel)] += s.value
	}
	return out, samples, nil
}

// telemetrySum scrapes a collector's own telemetry and sums the samples of
// name whose labels contain every pair of match.
func telemetrySum(col *collector, name string, match map[string]string) (float64, error) {
	body, contentType, err := scrape(col.telemetryURL())
	if err != nil {
		return 0, err
	}
	samples, err := parseExposition(body, contentType)
	if err != nil {
		return 0, err
	}
	var sum float64
outer:
	for _, s := range samples {
		if s.labels.Get(model.MetricNameLabel) != name {
			continue
		}
		for k, v := range match {
			if s.labels.Get(k) != v {
				continue outer
			}
		}
		sum += s.value
	}
	return sum, nil
}

// exporterSampleSet scrapes u (text format) and returns its samples' label
// sets with their names.
func exporterSampleSet(u string) (map[string]bool, error) {
	body, _, err := scrape(u)
	if err != nil {
		return nil, err
	}
	samples, err := parseExposition(body, exporterContentType)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(samples))
	for _, s := range samples {
		out[s.labels.String()] = true
	}
	return out, nil
}

// flushOr is f, or 1s when f is zero.
func flushOr(f time.Duration) time.Duration {
	if f == 0 {
		return time.Second
	}
	return f
}
