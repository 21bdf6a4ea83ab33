package promstreamexporter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/metadata"
)

// FuzzHandler scrapes a small exporter (every kind of metric, a few gauges)
// with fuzzed query parameters (shard, shards, name[]) and headers (Accept,
// Accept-Encoding, X-Prometheus-Scrape-Timeout-Seconds). Whatever the
// input, the handler must not panic (the abort that fails a scrape past its
// deadline aside) and must answer either 200 with a body, read in full and
// decompressed, that Prometheus's parser accepts for the negotiated
// Content-Type, or a 4xx/503 with a message.
// Run: go test ./exporter/promstreamexporter -run '^$' -fuzz FuzzHandler -fuzztime 60s
func FuzzHandler(f *testing.F) {
	for _, s := range [][4]string{
		{"", "", "", ""},
		{"shard=1&shards=3", acceptOpenMetrics, "gzip", "10"},
		{"name[]=rpc_duration_seconds&name[]=kong_request_latency_milliseconds_bucket", acceptProto, "zstd", "1e10"},
		{"shard=5&shards=2", acceptText004, "", "NaN"},
		{"shard=0&shards=0", "", "", "-1"},
		{"shards=4294967296&shard=1", "", "", ""},
		{"%zz", "", "", ""},
		{"name[]=kong_http_requests&name[]=", "text/plain;version=1.0.0;escaping=allow-utf-8", "zstd;q=0, gzip;q=0.5", "+Inf"},
		{"name[]=g", "application/openmetrics-text;version=0.0.1;escaping=dots", "*", "0.000000001"},
		{";;&&==", "*/*;q=0, text/plain;q=nope", "gzip;q=x", "1e400"},
		{"shard=1&shards=2&shard=0", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;escaping=values", "br", "garbage"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	e, err := newExporter(createDefaultConfig(), exportertest.NewNopSettings(metadata.Type))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(e.telemetry.Shutdown)
	if err := e.consumeMetrics(context.Background(), kindsMetrics()); err != nil {
		f.Fatal(err)
	}
	if err := e.consumeMetrics(context.Background(), gauges("a", "b", "c", "d", "é", `"`)); err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, query, accept, encoding, timeout string) {
		for _, v := range []string{accept, encoding, timeout} {
			if !validHeaderValue(v) {
				return // net/http refuses such a request before any handler
			}
		}
		req := httptest.NewRequest(http.MethodGet, metricsPath, nil)
		req.URL.RawQuery = query
		for k, v := range map[string]string{"Accept": accept, "Accept-Encoding": encoding, "X-Prometheus-Scrape-Timeout-Seconds": timeout} {
			if v != "" {
				req.Header.Set(k, v)
			}
		}
		rec := httptest.NewRecorder()
		if aborted := serve(e, rec, req); aborted {
			// The only abort a recorder allows: the deadline passed. A
			// timeout the scrape of this small table could have met is a bug.
			if d, ok := scrapeTimeout(timeout); !ok || d >= time.Second {
				t.Fatalf("scrape aborted with timeout %q", timeout)
			}
			return
		}
		body, err := io.ReadAll(decoded(t, rec))
		if err != nil {
			t.Fatalf("reading the %s body: %v", rec.Header().Get("Content-Encoding"), err)
		}
		switch code := rec.Code; {
		case code == http.StatusOK:
			ct := rec.Header().Get("Content-Type")
			if err := parses(body, ct); err != nil {
				t.Fatalf("query %q, Accept %q: %s body does not parse: %v\n%.2000q", query, accept, ct, err, body)
			}
		case code >= 400 && code < 500, code == http.StatusServiceUnavailable:
			if len(bytes.TrimSpace(body)) == 0 {
				t.Fatalf("query %q: %d without a message", query, code)
			}
		default:
			t.Fatalf("query %q: status %d", query, code)
		}
	})
}

// serve calls the handler and reports whether it aborted the response (the
// panic net/http turns into a reset connection); any other panic is passed on.
func serve(e *promStreamExporter, w http.ResponseWriter, r *http.Request) (aborted bool) {
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				panic(p)
			}
			aborted = true
		}
	}()
	e.handleMetrics(w, r)
	return false
}

// decoded returns the recorded body, decompressed as its Content-Encoding says.
func decoded(t *testing.T, rec *httptest.ResponseRecorder) io.Reader {
	t.Helper()
	switch enc := rec.Header().Get("Content-Encoding"); enc {
	case "":
		return rec.Body
	case "gzip":
		r, err := gzip.NewReader(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		return r
	case "zstd":
		r, err := zstd.NewReader(rec.Body, zstd.WithDecoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		return r
	default:
		t.Fatalf("Content-Encoding %q", enc)
		return nil
	}
}

// parses reads the whole body with Prometheus's parser for contentType.
func parses(body []byte, contentType string) error {
	if contentType == "" {
		return errors.New("no Content-Type")
	}
	p, err := textparse.New(body, contentType, labels.NewSymbolTable(), textparse.ParserOptions{KeepClassicOnClassicAndNativeHistograms: true})
	if err != nil {
		return err
	}
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var l labels.Labels
		switch entry {
		case textparse.EntrySeries, textparse.EntryHistogram:
			p.Labels(&l)
			if l.IsEmpty() {
				return errors.New("a sample without a name")
			}
		}
	}
}

// validHeaderValue is what net/http lets through as a header value: no
// control characters but tab.
func validHeaderValue(v string) bool {
	return !strings.ContainsFunc(v, func(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f })
}

// exposeFormats are the Accept headers FuzzExposition scrapes with: every
// format, every escaping scheme, and gzip.
var exposeFormats = []struct{ accept, encoding string }{
	{"", ""},
	{"", "gzip"},
	{"text/plain;version=1.0.0;escaping=allow-utf-8", ""},
	{"text/plain;version=1.0.0;escaping=underscores", ""},
	{"text/plain;version=1.0.0;escaping=dots", ""},
	{"text/plain;version=1.0.0;escaping=values", ""},
	{"application/openmetrics-text;version=1.0.0;escaping=allow-utf-8", ""},
	{"application/openmetrics-text;version=1.0.0;escaping=underscores", ""},
	{"application/openmetrics-text;version=1.0.0;escaping=dots", ""},
	{"application/openmetrics-text;version=1.0.0;escaping=values", ""},
	{"application/openmetrics-text;version=0.0.1", ""},
	{protoMediaType + ";escaping=allow-utf-8", ""},
	{protoMediaType + ";escaping=underscores", ""},
	{protoMediaType + ";escaping=dots", ""},
	{protoMediaType + ";escaping=values", "gzip"},
}

const protoMediaType = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"

// checkExposition reads the whole body with Prometheus's parser for
// contentType, as a scrape does, and returns what would make Prometheus
// refuse the scrape or a sample of it: a parse error, a series with a
// label name twice (Prometheus: "label name is not unique"), a series
// without a name, or two series with one label set (a duplicate sample).
// It returns the number of series read.
func checkExposition(body []byte, contentType string) (int, error) {
	p, err := textparse.New(body, contentType, labels.NewSymbolTable(), textparse.ParserOptions{KeepClassicOnClassicAndNativeHistograms: true})
	if err != nil {
		return 0, err
	}
	seen := map[string]bool{}
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			return len(seen), nil
		}
		if err != nil {
			return len(seen), err
		}
		var l labels.Labels
		switch entry {
		case textparse.EntrySeries, textparse.EntryHistogram:
			p.Labels(&l)
		default:
			continue
		}
		if name, dup := l.HasDuplicateLabelNames(); dup {
			return len(seen), fmt.Errorf("label %q twice in %s", name, l)
		}
		if l.Get(model.MetricNameLabel) == "" {
			return len(seen), fmt.Errorf("a series without a name: %s", l)
		}
		id := l.String()
		if entry == textparse.EntryHistogram {
			id = "native " + id
		}
		if seen[id] {
			return len(seen), fmt.Errorf("series %s twice", l)
		}
		seen[id] = true
	}
}

// fuzzInput reads a fuzzer's bytes as a sequence of small choices; past
// their end every choice is 0.
type fuzzInput struct {
	b []byte
	i int
}

func (in *fuzzInput) byte() byte {
	if in.i >= len(in.b) {
		return 0
	}
	in.i++
	return in.b[in.i-1]
}

func (in *fuzzInput) pick(n int) int { return int(in.byte()) % n }

// fuzzKeys are attribute keys that collide with what the exporter writes or
// with each other: reserved names, le and quantile, keys that translate or
// escape alike, empty and underscore-only keys, generated label names.
var fuzzKeys = []string{
	"__name__", "le", "quantile", "__x", "", "_", "__", "a.b", "a_b", "a-b", "job", "instance",
	"otel_scope_name", "otel_scope_x", "exported_le", "exported___name__", "..name..", "1x", "é", "service.name",
	"http.route", "l.e", "_.x",
}

// fuzzNames are metric names that collide the same ways.
var fuzzNames = []string{
	"m", "m_total", "m.x", "m_x", "", "__name__", "le", "target_info", "m_bucket", "m_created", "m_count",
	"_", "1m", "m-x", "é",
}

// fuzzMetrics builds pdata from in: resources, scopes, metrics of every
// type (delta ones included), points with attributes from fuzzKeys and
// keys, values, bounds, quantiles, exponential buckets, exemplars and the
// no-recorded-value flag.
func fuzzMetrics(in *fuzzInput, name string, keys []string) pmetric.Metrics {
	keyPool := append(append([]string(nil), keys...), fuzzKeys...)
	namePool := append([]string{name}, fuzzNames...)
	values := []string{"", "v", "w", "v;w", "a\"b\\c\nd", "\xff", "0.5", "+Inf", "job"}
	attrs := func(m pcommon.Map, n int) {
		for range n {
			k := keyPool[in.pick(len(keyPool))]
			switch in.pick(4) {
			case 0:
				m.PutInt(k, int64(in.byte()))
			case 1:
				m.PutBool(k, in.byte()%2 == 0)
			default:
				m.PutStr(k, values[in.pick(len(values))])
			}
		}
	}
	md := pmetric.NewMetrics()
	for r := range 1 + in.pick(2) {
		rm := md.ResourceMetrics().AppendEmpty()
		ra := rm.Resource().Attributes()
		if in.byte()%4 != 3 {
			ra.PutStr("service.name", "svc"+strconv.Itoa(r))
			ra.PutStr("service.instance.id", "n"+strconv.Itoa(r))
		}
		attrs(ra, in.pick(4))
		for range 1 + in.pick(2) {
			sm := rm.ScopeMetrics().AppendEmpty()
			sm.Scope().SetName(namePool[in.pick(len(namePool))])
			attrs(sm.Scope().Attributes(), in.pick(3))
			for range 1 + in.pick(4) {
				m := sm.Metrics().AppendEmpty()
				m.SetName(namePool[in.pick(len(namePool))])
				m.SetUnit([]string{"", "s", "1", "By", "{request}"}[in.pick(5)])
				m.SetDescription([]string{"", "help", "a\\b\n\"c\""}[in.pick(3)])
				fuzzPoints(in, m, attrs)
			}
		}
	}
	return md
}

// fuzzPoints gives m a type (0 gauge, 1 monotonic sum, 2 non-monotonic
// sum, 3 histogram, 4 exponential histogram, 5 summary) and a few points.
func fuzzPoints(in *fuzzInput, m pmetric.Metric, attrs func(pcommon.Map, int)) {
	cumulative := pmetric.AggregationTemporalityCumulative
	if in.byte()%8 == 7 {
		cumulative = pmetric.AggregationTemporalityDelta
	}
	n := 1 + in.pick(3)
	common := func(dp interface {
		Attributes() pcommon.Map
		SetStartTimestamp(pcommon.Timestamp)
		SetTimestamp(pcommon.Timestamp)
		SetFlags(pmetric.DataPointFlags)
	}) {
		attrs(dp.Attributes(), in.pick(5))
		dp.SetStartTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + int64(in.byte())))
		dp.SetTimestamp(pcommon.Timestamp(1_700_000_100_000_000_000 + int64(in.byte())))
		if in.byte()%16 == 15 {
			dp.SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
		}
	}
	exemplar := func(s pmetric.ExemplarSlice) {
		if in.byte()%2 == 1 {
			e := s.AppendEmpty()
			e.SetDoubleValue(float64(in.byte()) / 10)
			e.SetTraceID([16]byte{1, in.byte()})
			e.SetSpanID([8]byte{2})
			e.SetTimestamp(pcommon.Timestamp(1_700_000_050_000_000_000))
		}
	}
	switch typ := in.pick(6); typ {
	case 0, 1, 2: // gauge, monotonic sum, non-monotonic sum
		var dps pmetric.NumberDataPointSlice
		if typ == 0 {
			dps = m.SetEmptyGauge().DataPoints()
		} else {
			s := m.SetEmptySum()
			s.SetAggregationTemporality(cumulative)
			s.SetIsMonotonic(typ == 1)
			dps = s.DataPoints()
		}
		for range n {
			dp := dps.AppendEmpty()
			common(dp)
			dp.SetDoubleValue(float64(int8(in.byte())) / 4)
			exemplar(dp.Exemplars())
		}
	case 3:
		h := m.SetEmptyHistogram()
		h.SetAggregationTemporality(cumulative)
		for range n {
			dp := h.DataPoints().AppendEmpty()
			common(dp)
			bound := float64(int8(in.byte()))
			var counts []uint64
			for range in.pick(5) {
				dp.ExplicitBounds().Append(bound)
				bound += float64(in.byte()%8) + 0.5
				counts = append(counts, uint64(in.byte()))
			}
			counts = append(counts, uint64(in.byte()))
			dp.BucketCounts().FromRaw(counts)
			var total uint64
			for _, c := range counts {
				total += c
			}
			dp.SetCount(total)
			if in.byte()%2 == 0 {
				dp.SetSum(float64(in.byte()))
			}
			exemplar(dp.Exemplars())
		}
	case 4:
		h := m.SetEmptyExponentialHistogram()
		h.SetAggregationTemporality(cumulative)
		for range n {
			dp := h.DataPoints().AppendEmpty()
			common(dp)
			dp.SetScale(int32(in.pick(31)) - 10)
			dp.SetZeroCount(uint64(in.byte() % 4))
			dp.Positive().SetOffset(int32(int8(in.byte())))
			dp.Negative().SetOffset(int32(int8(in.byte())))
			var total uint64 = dp.ZeroCount()
			for range in.pick(6) {
				c := uint64(in.byte() % 5)
				dp.Positive().BucketCounts().Append(c)
				total += c
			}
			for range in.pick(3) {
				c := uint64(in.byte() % 5)
				dp.Negative().BucketCounts().Append(c)
				total += c
			}
			dp.SetCount(total)
			dp.SetSum(float64(in.byte()))
			exemplar(dp.Exemplars())
		}
	default:
		s := m.SetEmptySummary()
		for range n {
			dp := s.DataPoints().AppendEmpty()
			common(dp)
			for q := range in.pick(4) {
				v := dp.QuantileValues().AppendEmpty()
				v.SetQuantile(float64(q) / 4)
				v.SetValue(float64(in.byte()))
			}
			dp.SetCount(uint64(in.byte()))
			dp.SetSum(float64(in.byte()))
		}
	}
}

// fuzzSeed is the shape of one resource (job, instance), one scope, one
// metric named as FuzzExposition's name argument, of type typ (see
// fuzzPoints), with one point whose attributes are its k1, k2 and k3 (string
// values v, w, v), and for a histogram two bounds; fuzzMetrics reads it.
func fuzzSeed(typ byte) []byte {
	return []byte{
		0, 0, 0, // one resource with job and instance (service.name, service.instance.id), no other attribute
		0, 0, 0, // one scope, named as the metric, no attribute
		0, 0, 0, 0, // one metric, named name, no unit, no description
		0, 0, typ, // cumulative, one point, its type
		3, 0, 2, 1, 1, 2, 2, 2, 2, 1, // attributes k1="v", k2="w", k3="v"
		0, 0, 0, // start time, timestamp, flags
		1, 2, 1, 5, 2, 3, 4, 1, 0, // values: bound 1, two bounds (+1.5) with counts 5, 3, +Inf 4, a sum; no exemplar
		0, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, // the other types' values
	}
}

// fuzzConfig reads the exporter options from opts: translation strategy,
// label order, empty labels, resource attributes copied, scope labels,
// timestamps, const labels.
func fuzzConfig(opts uint8) *Config {
	cfg := createDefaultConfig()
	cfg.TranslationStrategy = []string{underscoreEscapingWithSuffixes, underscoreEscapingWithoutSuffixes, noUTF8EscapingWithSuffixes, noTranslation}[opts&3]
	if opts&4 != 0 {
		cfg.LabelOrder = labelOrderAsReceived
	}
	cfg.KeepEmptyLabels = opts&8 != 0
	if opts&16 != 0 {
		cfg.ResourceConstantLabels.Included = []string{"*"}
	}
	cfg.WithoutScopeInfo = opts&32 != 0
	cfg.SendTimestamps = opts&64 != 0
	if opts&128 != 0 {
		cfg.ConstLabels = map[string]string{"job": "const", "region": "eu", "a.b": "c"}
	}
	return cfg
}

// FuzzExposition feeds random pdata (metric names, types, attribute keys
// and values, reserved and colliding ones among them) through the exporter
// under random options, and reads every format and escaping scheme the
// exporter serves with Prometheus's own parsers: any parse error, any
// label name twice in a series, or two series with one label set fails it
// (checkExposition).
// Run: go test ./exporter/promstreamexporter -run '^$' -fuzz FuzzExposition -fuzztime 60s
func FuzzExposition(f *testing.F) {
	// The cases of issue 24, one seed each (fuzzSeed: one metric of a type,
	// see fuzzPoints, whose one point has the attributes k1, k2, k3):
	// reserved keys on a histogram and a summary, keys that collide after
	// translation or escaping, generated labels, empty keys, names that
	// translate alike.
	for _, s := range []struct {
		opts       uint8
		name       string
		k1, k2, k3 string
		typ        byte
	}{
		{0, "latency", "__name__", "le", "quantile", 3},
		{0, "latency", "__name__", "le", "quantile", 5},
		{0, "latency", "__x", "le", "", 4},
		{0, "requests", "a.b", "a_b", "job", 1},
		{16, "requests", "instance", "otel_scope_name", "service.name", 1},
		{2, "requests.x", "a.b", "a_b", "..name..", 0},
		{3, "m.x", "l.e", "_.x", "a-b", 3},
		{3 | 4, "m.x", "a.b", "a_b", "a-b", 5},
		{16 | 128, "latency", "le", "exported_le", "a.b", 3},
		{4 | 8 | 64, "latency", "le", "exported_le", "exported_exported_le", 3},
	} {
		f.Add(s.opts, s.name, s.k1, s.k2, s.k3, fuzzSeed(s.typ))
	}
	// Several metrics and points, every choice 1, then 2.
	f.Add(uint8(0), "m", "le", "a.b", "a_b", bytes.Repeat([]byte{1}, 200))
	f.Add(uint8(2), "m.x", "le", "a.b", "a_b", bytes.Repeat([]byte{2}, 200))
	f.Fuzz(func(t *testing.T, opts uint8, name, k1, k2, k3 string, shape []byte) {
		if len(shape) > 512 {
			return // small inputs explore as much, faster
		}
		md := fuzzMetrics(&fuzzInput{b: shape}, name, []string{k1, k2, k3})
		e, err := newExporter(fuzzConfig(opts), exportertest.NewNopSettings(metadata.Type))
		if err != nil {
			t.Fatal(err)
		}
		defer e.telemetry.Shutdown()
		if err := e.consumeMetrics(context.Background(), md); err != nil {
			t.Fatal(err)
		}
		for _, fm := range exposeFormats {
			req := httptest.NewRequest(http.MethodGet, metricsPath, nil)
			if fm.accept != "" {
				req.Header.Set("Accept", fm.accept)
			}
			if fm.encoding != "" {
				req.Header.Set("Accept-Encoding", fm.encoding)
			}
			rec := httptest.NewRecorder()
			e.handleMetrics(rec, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("Accept %q: status %d", fm.accept, rec.Code)
			}
			body, err := io.ReadAll(decoded(t, rec))
			if err != nil {
				t.Fatal(err)
			}
			ct := rec.Header().Get("Content-Type")
			if _, err := checkExposition(body, ct); err != nil {
				t.Fatalf("options %08b, Accept %q: %v\n%.3000s", opts, fm.accept, err, body)
			}
		}
	})
}
