package e2e

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestExporterServesEveryFormat scrapes the built collector's exporter the
// way each kind of scraper does (Prometheus 3's default Accept header,
// protobuf-first, text 1.0.0, gzip) and checks that Prometheus's own parser
// reads the same counts from every body.
func TestExporterServesEveryFormat(t *testing.T) {
	col := startCollector(t)
	want := expectedCounts{}
	postJSON(t, col.tracesURL(), otlpJSON(service("formats"),
		jsonSpan{method: "GET", route: "/f", status: map[string]any{"intValue": "200"}},
		jsonSpan{method: "GET", route: "/f", status: map[string]any{"intValue": "200"}}))
	want.add(map[string]string{
		"job": "formats", "http_route": "/f", "http_request_method": "GET", "http_response_status_code": "200",
	}, 2)
	waitExporterCounts(t, col, want.exported(), "the formats request on the exporter")

	cases := []struct {
		name, accept, encoding, contentType string
	}{
		{"Prometheus 3 default", "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1",
			"", "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=allow-utf-8"},
		{"protobuf first", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,application/openmetrics-text;version=1.0.0;q=0.5",
			"", "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited; escaping=underscores"},
		{"text 1.0.0", "text/plain;version=1.0.0;escaping=allow-utf-8", "", "text/plain; version=1.0.0; charset=utf-8; escaping=allow-utf-8"},
		{"gzip", "", "gzip", "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, contentType, err := scrapeWith(col.metricsURL(), c.accept, c.encoding)
			if err != nil {
				t.Fatal(err)
			}
			if contentType != c.contentType {
				t.Fatalf("Content-Type = %q, want %q", contentType, c.contentType)
			}
			samples, err := parseExposition(body, contentType)
			if err != nil {
				t.Fatal(err)
			}
			if diff := diffCounts(samplesOf(samples, metricName), want.exported()); diff != "" {
				t.Fatalf("%s body disagrees with what was sent:\n%s", c.name, diff)
			}
		})
	}
}

// scrapeWith GETs u with the given Accept and Accept-Encoding headers and
// returns the (decompressed) body and its Content-Type.
func scrapeWith(u, accept, encoding string) ([]byte, string, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return nil, "", err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if encoding != "" {
		// Setting it ourselves turns off the transport's transparent gzip,
		// so the test sees what the exporter really sent.
		req.Header.Set("Accept-Encoding", encoding)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	var r io.Reader = resp.Body
	if encoding != "" {
		if got := resp.Header.Get("Content-Encoding"); !strings.EqualFold(got, encoding) {
			return nil, "", fmt.Errorf("Content-Encoding = %q, want %q", got, encoding)
		}
		gz, err := gzip.NewReader(resp.Body)
		if err != nil {
			return nil, "", err
		}
		r = gz
	}
	body, err := io.ReadAll(r)
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("GET %s: status %d", u, resp.StatusCode)
	}
	return body, resp.Header.Get("Content-Type"), nil
}
