package e2e

// What the tests observe: Prometheus queries, the exporter's exposition and
// the collector's own telemetry.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
)

// ---------------------------------------------------------------------------
// Prometheus server checks

// promQueryResponse is the /api/v1/query envelope for an instant vector.
type promQueryResponse struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		ResultType string       `json:"resultType"`
		Result     model.Vector `json:"result"`
	} `json:"data"`
}

// promQuery runs an instant query and returns the vector result.
func promQuery(p *promServer, query string) (model.Vector, error) {
	status, body, err := httpGet("http://" + p.addr + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return nil, err
	}
	var resp promQueryResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("status %d, decode %q: %w", status, truncate(body), err)
	}
	if resp.Status != "success" || resp.Data.ResultType != "vector" {
		return nil, fmt.Errorf("status %d, query %q: %s (%s)", status, query, resp.Error, resp.Data.ResultType)
	}
	return resp.Data.Result, nil
}

// vectorCounts keys a query result the same way as seriesCounts.
func vectorCounts(v model.Vector) seriesCounts {
	out := seriesCounts{}
	for _, s := range v {
		m := make(map[string]string, len(s.Metric))
		for k, val := range s.Metric {
			m[string(k)] = string(val)
		}
		out[labelKey(labels.FromMap(m))] = float64(s.Value)
	}
	return out
}

// waitPrometheusCounts polls Prometheus until the stored series equal want
// exactly: same label sets, same values, nothing extra.
func waitPrometheusCounts(t *testing.T, p *promServer, want seriesCounts) {
	t.Helper()
	eventually(t, convergeTimeout, "Prometheus to store the expected "+metricName, func() (bool, string) {
		v, err := promQuery(p, metricName)
		if err != nil {
			return false, err.Error()
		}
		diff := diffCounts(vectorCounts(v), want)
		return diff == "", diff
	})
}

// checkKongInstance asserts that every Kong series carries one instance, the
// collector's scrape target, whichever Kong node reported the requests.
func checkKongInstance(t *testing.T, p *promServer, instanceID string) {
	t.Helper()
	v, err := promQuery(p, `count by (instance) (`+metricName+`{job="kong"})`)
	if err != nil {
		t.Fatalf("query Kong instances: %v", err)
	}
	if len(v) != 1 || string(v[0].Metric["instance"]) != instanceID {
		t.Fatalf("Kong series instances = %v, want exactly instance=%q", v, instanceID)
	}
}

// ---------------------------------------------------------------------------
// Exporter exposition checks

// scrape fetches a /metrics endpoint and returns its body and Content-Type.
func scrape(u string) ([]byte, string, error) {
	resp, err := httpClient.Get(u)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("GET %s: status %d: %q", u, resp.StatusCode, truncate(body))
	}
	return body, resp.Header.Get("Content-Type"), nil
}

// parsedSample is one float sample from an exposition.
type parsedSample struct {
	labels labels.Labels // includes __name__
	value  float64
}

// parseExposition runs textparse over the whole body, every entry up to
// io.EOF, so that any syntax error anywhere fails the check.
func parseExposition(body []byte, contentType string) ([]parsedSample, error) {
	p, err := textparse.New(body, contentType, labels.NewSymbolTable(), textparse.ParserOptions{})
	if p == nil {
		return nil, fmt.Errorf("no parser for Content-Type %q: %v", contentType, err)
	}
	if err != nil {
		return nil, fmt.Errorf("textparse.New(%q): %w", contentType, err)
	}
	var out []parsedSample
	for {
		entry, err := p.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("parse exposition after %d samples: %w", len(out), err)
		}
		switch entry {
		case textparse.EntrySeries:
			var l labels.Labels
			p.Labels(&l)
			_, _, v := p.Series()
			out = append(out, parsedSample{labels: l, value: v})
		case textparse.EntryHistogram:
			return nil, fmt.Errorf("unexpected native histogram in text exposition")
		}
	}
}

// samplesOf keys the samples of one metric name like seriesCounts.
func samplesOf(samples []parsedSample, name string) seriesCounts {
	out := seriesCounts{}
	for _, s := range samples {
		if s.labels.Get(model.MetricNameLabel) == name {
			out[labelKey(s.labels)] = s.value
		}
	}
	return out
}

// exporterCounts scrapes and parses the promstream exporter.
func exporterCounts(col *collector) (seriesCounts, error) {
	body, _, err := scrape(col.metricsURL())
	if err != nil {
		return nil, err
	}
	samples, err := parseExposition(body, exporterContentType)
	if err != nil {
		return nil, err
	}
	return samplesOf(samples, metricName), nil
}

// waitExporterCounts polls the exporter until its gateway_requests_total
// series equal want exactly.
func waitExporterCounts(t *testing.T, col *collector, want seriesCounts, what string) {
	t.Helper()
	eventually(t, convergeTimeout, what, func() (bool, string) {
		got, err := exporterCounts(col)
		if err != nil {
			return false, err.Error()
		}
		diff := diffCounts(got, want)
		return diff == "", diff
	})
}

// checkExporterExposition validates one scrape of the exporter: the media
// type, promtool's linter, a full textparse pass, and the exact counts.
func checkExporterExposition(t *testing.T, col *collector, want seriesCounts) {
	t.Helper()
	body, contentType, err := scrape(col.metricsURL())
	if err != nil {
		t.Fatalf("scrape exporter: %v", err)
	}
	checkContentType(t, contentType)
	runPromtool(t, body)
	samples, err := parseExposition(body, exporterContentType)
	if err != nil {
		t.Fatalf("exporter exposition does not parse: %v\nbody:\n%s", err, truncate(body))
	}
	if diff := diffCounts(samplesOf(samples, metricName), want); diff != "" {
		t.Fatalf("exporter %s differs from what was sent:\n%s", metricName, diff)
	}
}

// checkContentType requires the Prometheus text format 0.0.4 media type for
// a client that sends no Accept header.
func checkContentType(t *testing.T, contentType string) {
	t.Helper()
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "text/plain" || (params["version"] != "" && params["version"] != "0.0.4") {
		t.Errorf("exporter Content-Type = %q, want %q", contentType, exporterContentType)
	}
}

// runPromtool pipes the body (kept in a temp file for post-mortems) into
// `promtool check metrics`. Lint problems make promtool exit non-zero.
func runPromtool(t *testing.T, body []byte) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found in PATH: %v", err)
	}
	path := filepath.Join(t.TempDir(), "exporter-metrics.txt")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatalf("write exposition: %v", err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open exposition: %v", err)
	}
	defer f.Close()
	cmd := exec.Command(bin, "check", "metrics")
	cmd.Stdin = f
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool check metrics failed (%v):\n%s", err, out)
	}
}

// ---------------------------------------------------------------------------
// Internal telemetry

// outcomeKey identifies a receiver request counter by the labels we match on.
type outcomeKey struct{ outcome, transport string }

// receiverOutcomes sums otelcol_receiver_gateway_requests by outcome
// and transport, ignoring any other labels (scope, component id, ...).
func receiverOutcomes(col *collector) (map[outcomeKey]float64, error) {
	body, contentType, err := scrape(col.telemetryURL())
	if err != nil {
		return nil, err
	}
	samples, err := parseExposition(body, contentType)
	if err != nil {
		return nil, err
	}
	out := map[outcomeKey]float64{}
	for _, s := range samples {
		if s.labels.Get(model.MetricNameLabel) == telemetryName {
			out[outcomeKey{s.labels.Get("outcome"), s.labels.Get("transport")}] += s.value
		}
	}
	return out, nil
}

// sumOutcome adds up one outcome over all transports.
func sumOutcome(m map[outcomeKey]float64, outcome string) float64 {
	var total float64
	for k, v := range m {
		if k.outcome == outcome {
			total += v
		}
	}
	return total
}

// waitTelemetryOutcomes checks the counters for the requests TestBadInput
// sent. Polled because the telemetry pipeline need not be synchronous.
func waitTelemetryOutcomes(t *testing.T, col *collector) {
	t.Helper()
	eventually(t, convergeTimeout, telemetryName+" outcomes", func() (bool, string) {
		m, err := receiverOutcomes(col)
		if err != nil {
			return false, err.Error()
		}
		var problems []string
		check := func(ok bool, format string, args ...any) {
			if !ok {
				problems = append(problems, fmt.Sprintf(format, args...))
			}
		}
		check(sumOutcome(m, "malformed") >= 2, "malformed (all transports) = %v, want >= 2", sumOutcome(m, "malformed"))
		check(m[outcomeKey{"malformed", "http"}] == 2, "malformed{transport=http} = %v, want 2", m[outcomeKey{"malformed", "http"}])
		check(sumOutcome(m, "unsupported_media_type") == 1, "unsupported_media_type = %v, want 1", sumOutcome(m, "unsupported_media_type"))
		check(sumOutcome(m, "too_large") == 1, "too_large = %v, want 1", sumOutcome(m, "too_large"))
		check(sumOutcome(m, "accepted") == 1, "accepted = %v, want 1", sumOutcome(m, "accepted"))
		return len(problems) == 0, fmt.Sprintf("%s\nall (outcome, transport) values: %v", strings.Join(problems, "\n"), m)
	})
}

// ---------------------------------------------------------------------------
// Small utilities

// randomHex returns n random bytes hex-encoded (OTLP/JSON IDs, request ids).
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}

// newUUIDString returns a random (version 4) UUID.
func newUUIDString() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func newUUID(t *testing.T) string {
	t.Helper()
	id := newUUIDString()
	t.Logf("Kong service.instance.id = %s", id)
	return id
}

// truncate keeps error messages readable when a body is large.
func truncate(b []byte) string {
	const max = 2048
	if len(b) > max {
		return string(b[:max]) + fmt.Sprintf("... (%d bytes)", len(b))
	}
	return string(b)
}
