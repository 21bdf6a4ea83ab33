package e2e

// Hostile input to the exporter, through the distribution's standard otlp
// receiver (issue 24, items 3 and 7): attribute keys that collide with what
// the exporter writes, and histograms of 50,000 buckets. Good traffic runs
// alongside and must be counted exactly, as in hostile_test.go.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"
)

// exposeConfig is hostileConfig with the otlp receiver (OTLP/HTTP on port
// %[5]d) in the metrics pipeline, and a second promstream exporter on port
// %[6]d that never serves OpenMetrics, so that Prometheus 2.42 (which asks
// for OpenMetrics, or protobuf with native histograms) reads text 0.0.4
// from it.
var exposeConfig = func() string {
	c := hostileConfig("")
	for _, r := range [][2]string{
		{"processors:\n", "  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:%[5]d\nprocessors:\n"},
		{"receivers: [gateway]", "receivers: [gateway, otlp]"},
		{"service:\n", "  promstream/text:\n    endpoint: 127.0.0.1:%[6]d\n    without_scope_info: true\n    shutdown_grace: 1s\n    enable_open_metrics: false\nservice:\n"},
		{"exporters: [promstream]", "exporters: [promstream, promstream/text]"},
	} {
		if !strings.Contains(c, r[0]) {
			panic("collectorConfig changed: exposeConfig cannot find " + r[0])
		}
		c = strings.Replace(c, r[0], r[1], 1)
	}
	return c
}()

// startExposeRun is startHostileRun on exposeConfig.
func startExposeRun(t *testing.T) *hostileRun {
	t.Helper()
	col := startCollectorWith(t, exposeConfig, 6)
	mon := startMonitor(t, col, 200*time.Millisecond, time.Second)
	good := startGoodSender(t, col, 200*time.Millisecond, 5, 3*time.Minute)
	eventually(t, convergeTimeout, "the good traffic's tuples on the exporter", func() (bool, string) {
		got, _, err := scrapeFamily(col, metricName, func(l string) bool { return strings.Contains(l, `job="`+goodJob+`"`) })
		if err != nil {
			return false, err.Error()
		}
		return len(got) == len(goodRoutes), fmt.Sprintf("%d good series", len(got))
	})
	time.Sleep(2 * time.Second)
	mon.setPhase("attack")
	return &hostileRun{col: col, mon: mon, good: good}
}

// TestHostileExposition sends what other receivers hand the exporter, each
// case on a collector of its own.
func TestHostileExposition(t *testing.T) {
	t.Run("reserved_attribute_keys", testReservedAttributeKeys)
	t.Run("huge_histograms", testHugeHistograms)
}

// hostileAttrs are the point attributes of testReservedAttributeKeys: keys
// that are reserved (__name__, __x), written by the exporter for a sample
// (le, quantile), generated from the resource (job, instance), empty, or
// the same label once translated (a.b, a_b), besides an exported_le of
// their own.
var hostileAttrs = map[string]string{
	"__name__": "a", "le": "b", "quantile": "c", "__x": "d", "": "e", "job": "f", "instance": "g",
	"a.b": "i", "a_b": "j", "exported_le": "k", "route": "/hostile",
}

// hostileMetricsJSON is an OTLP/JSON export: a cumulative counter,
// histogram and summary and a gauge whose points have hostileAttrs, and a
// good counter beside them, from one resource (job hostile-keys, instance
// h1). value sets the counter's value.
func hostileMetricsJSON(t *testing.T, value int) []byte {
	t.Helper()
	now := time.Now()
	start, end := fmt.Sprint(now.Add(-time.Minute).UnixNano()), fmt.Sprint(now.UnixNano())
	attrs := stringAttrs(hostileAttrs)
	point := func(extra map[string]any) map[string]any {
		p := map[string]any{"attributes": attrs, "startTimeUnixNano": start, "timeUnixNano": end}
		for k, v := range extra {
			p[k] = v
		}
		return p
	}
	metrics := []any{
		map[string]any{"name": "hostile.requests", "sum": map[string]any{"aggregationTemporality": 2, "isMonotonic": true,
			"dataPoints": []any{point(map[string]any{"asInt": fmt.Sprint(value)})}}},
		map[string]any{"name": "hostile.latency", "histogram": map[string]any{"aggregationTemporality": 2,
			"dataPoints": []any{point(map[string]any{"count": "6", "sum": 4.5, "explicitBounds": []any{0.1, 1}, "bucketCounts": []any{"1", "2", "3"}})}}},
		map[string]any{"name": "hostile.size", "summary": map[string]any{
			"dataPoints": []any{point(map[string]any{"count": "2", "sum": 9, "quantileValues": []any{map[string]any{"quantile": 0.5, "value": 7}}})}}},
		map[string]any{"name": "hostile.temperature", "gauge": map[string]any{"dataPoints": []any{point(map[string]any{"asDouble": 21.5})}}},
		map[string]any{"name": "good.requests", "sum": map[string]any{"aggregationTemporality": 2, "isMonotonic": true,
			"dataPoints": []any{map[string]any{"attributes": stringAttrs(map[string]string{"route": "/good"}),
				"startTimeUnixNano": start, "timeUnixNano": end, "asInt": fmt.Sprint(value)}}}},
	}
	body, err := json.Marshal(map[string]any{"resourceMetrics": []any{map[string]any{
		"resource":     map[string]any{"attributes": stringAttrs(map[string]string{"service.name": "hostile-keys", "service.instance.id": "h1"})},
		"scopeMetrics": []any{map[string]any{"scope": map[string]any{"name": "hostile"}, "metrics": metrics}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// hostileWant is the label set (besides __name__, le and quantile's own)
// every hostile series must have, by the exporter's rule: generated job and
// instance keep their names and the attributes are exported_job and
// exported_instance; __name__ and __x are exported___name__ and
// exported___x; le, the histogram's own, is exported_le there, taken by an
// attribute, so exported_exported_le; a.b and a_b are a_b="i;j"; the empty
// key is left out.
func hostileWant(family string) map[string]string {
	want := map[string]string{
		"exported___name__": "a", "exported___x": "d", "job": "hostile-keys", "exported_job": "f",
		"instance": "h1", "exported_instance": "g", "a_b": "i;j", "exported_le": "k", "route": "/hostile",
	}
	switch family {
	case "hostile_latency":
		want["exported_exported_le"], want["quantile"] = "b", "c"
	case "hostile_size":
		want["le"], want["exported_quantile"] = "b", "c"
	default:
		want["le"], want["quantile"] = "b", "c"
	}
	return want
}

// checkHostileSeries compares the label sets of the hostile series in v
// (a Prometheus query result or parsed exposition; other series are left
// alone) with hostileWant, and counts them per family.
func checkHostileSeries(v model.Vector) (map[string]int, []string) {
	counts := map[string]int{}
	var problems []string
	for _, s := range v {
		name := string(s.Metric[model.MetricNameLabel])
		if !strings.HasPrefix(name, "hostile_") {
			continue
		}
		family := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count"), "_total")
		got := map[string]string{}
		for k, val := range s.Metric {
			got[string(k)] = string(val)
		}
		delete(got, model.MetricNameLabel)
		switch {
		case family == "hostile_latency" && strings.HasSuffix(name, "_bucket"):
			delete(got, "le")
		case family == "hostile_size" && name == "hostile_size":
			delete(got, "quantile")
		}
		counts[family]++
		if want := hostileWant(family); fmt.Sprint(got) != fmt.Sprint(want) {
			problems = append(problems, fmt.Sprintf("%s: labels %v, want %v", name, got, want))
		}
	}
	return counts, problems
}

// wantHostileCounts: the hostile series of each family (3 buckets, _sum and
// _count; a quantile, _sum and _count; one counter; one gauge).
var wantHostileCounts = map[string]int{"hostile_latency": 5, "hostile_size": 3, "hostile_requests": 1, "hostile_temperature": 1}

// testReservedAttributeKeys: metrics whose point attributes are named
// __name__, le, quantile, __x, job, instance, an empty key and two keys
// that translate alike arrive through the otlp receiver, beside good ones.
// Every format the exporter serves parses (Prometheus's own parser reads
// every body, every escaping scheme: an attribute le or quantile was a
// second label of that name, and OpenMetrics bodies were refused, failing
// the scrape for every series); the real Prometheus scrapes them in
// OpenMetrics, protobuf and text 0.0.4, gzipped, with every target up; every
// hostile series has the labels the exporter's rule gives; the good series
// (gateway traffic and an OTLP counter) are exact.
func testReservedAttributeKeys(t *testing.T) {
	h := startExposeRun(t)
	textAddr := hostPort(h.col.ports[5])
	metricsURL := "http://" + h.col.otlpHTTPAddr + "/v1/metrics"
	// Prometheus 2.42 asks for OpenMetrics (and gzip); with native
	// histograms, for protobuf first.
	promOM := startPrometheusWith(t, fmt.Sprintf(`  - job_name: openmetrics
    honor_labels: true
    static_configs:
      - targets: ['%s']
  - job_name: text
    honor_labels: true
    static_configs:
      - targets: ['%s']
`, h.col.promAddr, textAddr))
	promProto := startPrometheusWith(t, fmt.Sprintf(`  - job_name: protobuf
    honor_labels: true
    static_configs:
      - targets: ['%s']
`, h.col.promAddr), "--enable-feature=native-histograms")

	const sends = 3
	for i := 1; i <= sends; i++ {
		if status, resp := httpPost(t, metricsURL, "application/json", hostileMetricsJSON(t, i)); status != http.StatusOK {
			t.Fatalf("POST OTLP metrics: %d %s", status, truncate(resp))
		}
		time.Sleep(attackPause)
	}

	// Every body, every format and scheme, read by Prometheus's parser.
	for _, accept := range exposeAccepts {
		for _, url := range []string{h.col.metricsURL(), "http://" + textAddr + "/metrics"} {
			body, ct, err := scrapeWith(url, accept, "")
			if err != nil {
				t.Fatalf("%s, Accept %q: %v", url, accept, err)
			}
			series, err := checkBody(body, ct)
			if err != nil {
				t.Fatalf("%s (%s): %v\n%s", url, ct, err, truncate(body))
			}
			counts, problems := checkHostileSeries(series)
			if len(problems) > 0 {
				t.Errorf("%s (%s):\n%s", url, ct, strings.Join(problems, "\n"))
			}
			if fmt.Sprint(counts) != fmt.Sprint(wantHostileCounts) {
				t.Errorf("%s (%s): hostile series %v, want %v", url, ct, counts, wantHostileCounts)
			}
		}
	}

	// The real Prometheus, every format it speaks.
	for _, c := range []struct {
		prom *promServer
		job  string
	}{{promOM, "openmetrics"}, {promOM, "text"}, {promProto, "protobuf"}} {
		eventually(t, convergeTimeout, "Prometheus to scrape the hostile series from job "+c.job, func() (bool, string) {
			up, err := promQuery(c.prom, `up{job="`+c.job+`"}`)
			if err != nil {
				return false, err.Error()
			}
			if len(up) != 1 || up[0].Value != 1 {
				return false, fmt.Sprintf("up = %v (a refused scrape)", up)
			}
			v, err := promQuery(c.prom, `{__name__=~"hostile_.*", __name__!~".*_created"}`)
			if err != nil {
				return false, err.Error()
			}
			counts, problems := checkHostileSeries(v)
			if len(problems) > 0 {
				return false, strings.Join(problems, "\n")
			}
			good, err := promQuery(c.prom, `good_requests_total{route="/good"}`)
			if err != nil {
				return false, err.Error()
			}
			if len(good) != 1 || good[0].Value != sends {
				return false, fmt.Sprintf("good_requests_total = %v, want %d", good, sends)
			}
			return fmt.Sprint(counts) == fmt.Sprint(wantHostileCounts), fmt.Sprintf("hostile series %v, want %v", counts, wantHostileCounts)
		})
	}
	h.finish(t, cardinalityRSSBound, 0, scrapeBound)
	// The good gateway traffic reached Prometheus exactly as well, through
	// each exporter (Prometheus adds the target as instance: the good
	// series have none of their own).
	want := h.good.want()
	for _, target := range []string{h.col.promAddr, textAddr} {
		eventually(t, convergeTimeout, "the good traffic in Prometheus from "+target+", exactly", func() (bool, string) {
			v, err := promQuery(promOM, metricName+`{job="`+goodJob+`",instance="`+target+`"}`)
			if err != nil {
				return false, err.Error()
			}
			for _, s := range v {
				delete(s.Metric, model.InstanceLabel)
			}
			diff := diffCounts(vectorCounts(v), want)
			return diff == "", diff
		})
	}
}

// exposeAccepts are the Accept headers every body is read with: every
// format and escaping scheme the exporter serves.
var exposeAccepts = []string{
	"",
	"text/plain;version=1.0.0;escaping=allow-utf-8",
	"text/plain;version=1.0.0;escaping=underscores",
	"text/plain;version=1.0.0;escaping=dots",
	"text/plain;version=1.0.0;escaping=values",
	"application/openmetrics-text;version=1.0.0;escaping=allow-utf-8",
	"application/openmetrics-text;version=1.0.0;escaping=values",
	"application/openmetrics-text;version=0.0.1",
	"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;escaping=allow-utf-8",
	"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;escaping=dots",
}

// checkBody reads a whole exposition with Prometheus's parser, as a scrape
// does, and returns its float samples; an error for what Prometheus refuses:
// a parse error, a label name twice in a series, two series with one label
// set.
func checkBody(body []byte, contentType string) (model.Vector, error) {
	p, err := textparse.New(body, contentType, labels.NewSymbolTable(), textparse.ParserOptions{KeepClassicOnClassicAndNativeHistograms: true, OpenMetricsSkipSTSeries: true})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out model.Vector
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if entry != textparse.EntrySeries && entry != textparse.EntryHistogram {
			continue
		}
		var l labels.Labels
		p.Labels(&l)
		if name, dup := l.HasDuplicateLabelNames(); dup {
			return nil, fmt.Errorf("label %q twice in %s", name, l)
		}
		id := l.String()
		if entry == textparse.EntryHistogram {
			id = "native " + id
		}
		if seen[id] {
			return nil, fmt.Errorf("series %s twice", l)
		}
		seen[id] = true
		if entry == textparse.EntrySeries {
			_, _, v := p.Series()
			m := model.Metric{}
			l.Range(func(lb labels.Label) { m[model.LabelName(lb.Name)] = model.LabelValue(lb.Value) })
			out = append(out, &model.Sample{Metric: m, Value: model.SampleValue(v)})
		}
	}
}

// Issue 24's histograms: 40 of 50,000 buckets.
const (
	hugeHistograms = 40
	hugeBuckets    = 50_000
	// hugeRSSBound bounds the collector's RSS while 4 scrapers read the
	// huge histograms at once: it held some 975 MiB, each scrape slot
	// rendering a page whole (some 220 MiB); now a slot holds about 1 MiB,
	// and the bound is what the histograms cost to receive and hold (about
	// 250 MiB seen) with room for a loaded machine's GC.
	hugeRSSBound = 400 * mib
)

// hugeHistogramExport is one OTLP/protobuf export of n cumulative
// histograms of hugeBuckets bounds, numbered from first; with gone, flagged
// "no recorded value" (the exporter removes their series).
func hugeHistogramExport(t *testing.T, first, n int, gone bool) []byte {
	t.Helper()
	bounds := make([]float64, hugeBuckets)
	counts := make([]uint64, hugeBuckets+1)
	for i := range bounds {
		bounds[i] = float64(i) / 1000
		counts[i] = uint64(i % 3)
	}
	now := uint64(time.Now().UnixNano())
	var points []*metricpb.HistogramDataPoint
	for i := first; i < first+n; i++ {
		p := &metricpb.HistogramDataPoint{
			Attributes:        []*commonpb.KeyValue{{Key: "i", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: int64(i)}}}},
			StartTimeUnixNano: now - uint64(time.Minute), TimeUnixNano: now,
			Count: hugeBuckets, ExplicitBounds: bounds, BucketCounts: counts,
		}
		if gone {
			p = &metricpb.HistogramDataPoint{Attributes: p.Attributes, StartTimeUnixNano: p.StartTimeUnixNano, TimeUnixNano: now + 1,
				Flags: uint32(metricpb.DataPointFlags_DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK)}
		}
		points = append(points, p)
	}
	req := &colmetricpb.ExportMetricsServiceRequest{ResourceMetrics: []*metricpb.ResourceMetrics{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			{Key: "service.name", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "huge"}}}}},
		ScopeMetrics: []*metricpb.ScopeMetrics{{Metrics: []*metricpb.Metric{{
			Name: "huge.latency", Unit: "s",
			Data: &metricpb.Metric_Histogram{Histogram: &metricpb.Histogram{
				AggregationTemporality: metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE, DataPoints: points}},
		}}}},
	}}}
	body, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// testHugeHistograms: 40 histograms of 50,000 buckets arrive through the
// otlp receiver; then three scrapers (text 0.0.4, OpenMetrics, protobuf)
// read them twice, besides the monitor's gzipped scrapes: four scrapes at
// once, max_concurrent_scrapes. Every body is whole; the collector's RSS
// stays bounded (890 MiB before, a page of histograms rendered whole per
// slot); the histograms leave (no recorded value) and the good traffic is
// exact.
func testHugeHistograms(t *testing.T) {
	h := startExposeRun(t)
	metricsURL := "http://" + h.col.otlpHTTPAddr + "/v1/metrics"
	const perExport = 10 // 5 MB an export, under the otlp receiver's 20 MiB
	for first := 0; first < hugeHistograms; first += perExport {
		if status, resp := httpPost(t, metricsURL, "application/x-protobuf", hugeHistogramExport(t, first, perExport, false)); status != http.StatusOK {
			t.Fatalf("POST OTLP metrics: %d %s", status, truncate(resp))
		}
	}
	// The last bucket line of the last histogram, in text.
	last := fmt.Sprintf(`huge_latency_seconds_bucket{i="%d",job="huge",le="%s"}`, hugeHistograms-1, "49.999")
	eventually(t, convergeTimeout, "the huge histograms on the exporter", func() (bool, string) {
		found, _, err := scanScrape(h.col.metricsURL(), []byte(last))
		if err != nil {
			return false, err.Error()
		}
		return found, "no " + last
	})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	sizes := map[string][]int64{}
	for _, accept := range []string{
		"text/plain;version=0.0.4",
		"application/openmetrics-text;version=1.0.0",
		"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited",
	} {
		wg.Go(func() {
			for round := 0; round < 2 && ctx.Err() == nil; round++ {
				n, err := discardScrape(ctx, h.col.metricsURL(), accept)
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Sprintf("Accept %s: %v", accept, err))
				}
				sizes[accept] = append(sizes[accept], n)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Errorf("scrapes failed:\n%s", strings.Join(errs, "\n"))
	}
	keys := make([]string, 0, len(sizes))
	for k := range sizes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("Accept %s: bodies %v bytes", k, sizes[k])
		for _, n := range sizes[k] {
			if n < hugeHistograms*hugeBuckets*8 {
				t.Errorf("Accept %s: a body of %d bytes, less than the histograms", k, n)
			}
		}
	}
	// The monitor's own scrapes (gzip, seconds each under -race) must read
	// the huge exposition too, not only the small one left after it.
	h.mon.waitScrapes("attack", 2, time.Minute)
	// The histograms leave (no recorded value), so that the checks of the
	// good traffic read a small exposition again.
	if status, resp := httpPost(t, metricsURL, "application/x-protobuf", hugeHistogramExport(t, 0, hugeHistograms, true)); status != http.StatusOK {
		t.Fatalf("POST OTLP metrics: %d %s", status, truncate(resp))
	}
	eventually(t, convergeTimeout, "the huge histograms gone", func() (bool, string) {
		found, n, err := scanScrape(h.col.metricsURL()+"?name[]=huge_latency_seconds", []byte("huge_latency_seconds"))
		if err != nil {
			return false, err.Error()
		}
		return !found, fmt.Sprintf("a body of %d bytes", n)
	})
	h.finish(t, hugeRSSBound, 0, 60*time.Second)
}

// scanScrape reads a whole text /metrics body, uncompressed, line by line,
// and reports whether a line starts with prefix; the body is never held.
func scanScrape(u string, prefix []byte) (bool, int64, error) {
	resp, err := plainClient.Get(u)
	if err != nil {
		return false, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	found, n := false, int64(0)
	for sc.Scan() {
		n += int64(len(sc.Bytes())) + 1
		found = found || bytes.HasPrefix(sc.Bytes(), prefix)
	}
	return found, n, sc.Err()
}

// discardScrape reads a whole /metrics body with accept, uncompressed, and
// returns its size; the body is never held.
func discardScrape(ctx context.Context, u, accept string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", accept)
	resp, err := plainClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return n, err
}
