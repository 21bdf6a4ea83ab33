package e2e

// The deploy/ files against the built distribution: the Kubernetes ConfigMap's collector config
// and the image's default config pass the collector's own `validate`, and every panel query of
// the Grafana dashboard returns data from a real Prometheus that scrapes a collector (otel
// profile, health push on) fed Kong-shaped traffic and the faults the collector panels show.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.yaml.in/yaml/v3"
)

const (
	deployDir     = "../deploy"
	dashboardPath = deployDir + "/grafana/otelgateway.json"
)

// TestDeployConfigsValidate runs `otelcol-gateway validate` on the collector config of
// deploy/kubernetes/configmap.yaml and on the image's default deploy/config.yaml, with the
// environment they read (POD_NAME from the downward API, HOSTNAME in a container).
func TestDeployConfigsValidate(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(deployDir, "kubernetes", "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Kind string            `yaml:"kind"`
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatalf("configmap.yaml: %v", err)
	}
	if cm.Kind != "ConfigMap" || cm.Data["config.yaml"] == "" {
		t.Fatalf("configmap.yaml: want a ConfigMap with data.config.yaml, got kind %q, keys %v", cm.Kind, len(cm.Data))
	}
	dir := t.TempDir()
	k8sConfig := filepath.Join(dir, "configmap-config.yaml")
	if err := os.WriteFile(k8sConfig, []byte(cm.Data["config.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	image, err := filepath.Abs(filepath.Join(deployDir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{k8sConfig, image} {
		if out, err := validateConfig(path); err != nil {
			t.Errorf("otelcol-gateway validate --config=%s: %v\n%s", path, err, out)
		} else {
			t.Logf("validate %s: ok", filepath.Base(path))
		}
	}

	// validate really checks: the same config with a misspelt receiver option fails.
	broken := filepath.Join(dir, "broken.yaml")
	bad := strings.Replace(cm.Data["config.yaml"], "flush_interval:", "flush_intervall:", 1)
	if err := os.WriteFile(broken, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := validateConfig(broken); err == nil || !strings.Contains(string(out), "flush_intervall") {
		t.Errorf("validate accepted a config with an unknown option (err %v):\n%s", err, out)
	}
}

func validateConfig(path string) ([]byte, error) {
	cmd := exec.Command(otelcolBin, "validate", "--config="+path)
	cmd.Env = append(os.Environ(), "POD_NAME=otelgateway-0", "HOSTNAME=gw-1")
	return cmd.CombinedOutput()
}

// deployCollectorConfig is the ConfigMap's shape on loopback ports, with small limits so that the
// faults the dashboard's collector panels show really happen: limits.max_tuples 8 (events overflow),
// limits.max_streams 200 (stream overflow), a Kong admin poller on a closed port (failing polls), and
// the otlp receiver for out-of-order deltas and a type conflict. Ports: %[1]d gateway HTTP,
// %[2]d gRPC, %[3]d promstream, %[4]d telemetry, %[5]d otlp HTTP, %[6]d nothing listens, %[7]d zpages.
const deployCollectorConfig = `extensions:
  zpages:
    endpoint: 127.0.0.1:%[7]d
receivers:
  gateway:
    protocols:
      http:
        endpoint: 127.0.0.1:%[1]d
      grpc:
        endpoint: 127.0.0.1:%[2]d
    flush_interval: 1s
    collector_name: e2e-0
    limits:
      max_tuples: 8
    health:
      report_interval: 5s
      push: {}
      kong:
        - endpoint: http://127.0.0.1:%[6]d
          instance: kong-admin-down
          interval: 1s
          timeout: 1s
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%[5]d
processors:
  cumulative:
    max_stale: 5m
    limits:
      max_streams: 200
exporters:
  promstream:
    endpoint: 127.0.0.1:%[3]d
    metric_expiration: 5m
    without_scope_info: true
service:
  extensions: [zpages]
  telemetry:
    resource:
      attributes:
        - name: collector
          value: e2e-0
    metrics:
      level: detailed
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: %[4]d
                without_scope_info: true
                with_resource_constant_labels:
                  included: [collector]
  pipelines:
    metrics:
      receivers: [gateway, otlp]
      processors: [cumulative]
      exporters: [promstream]
`

// deployScrapeConfigs scrapes the exporter (honor_labels) and the telemetry endpoint, as
// deploy/prometheus/scrape-kubernetes.yml does.
const deployScrapeConfigs = `  - job_name: otelgateway
    honor_labels: true
    static_configs:
      - targets: ['%s']
  - job_name: otelgateway-telemetry
    static_configs:
      - targets: ['%s']
`

func TestDashboardPanelsReturnData(t *testing.T) {
	started := time.Now()
	panels := dashboardQueries(t)

	col := startCollectorWith(t, deployCollectorConfig, 7)
	prom := startPrometheusWith(t, fmt.Sprintf(deployScrapeConfigs, col.promAddr, col.telemetryAddr))

	// The zpages extension of the distribution serves its pages.
	zpages := "http://" + hostPort(col.ports[6]) + "/debug/servicez"
	if status, body, err := httpGet(zpages); err != nil || status != http.StatusOK || !strings.Contains(string(body), "otelcol-gateway") {
		t.Fatalf("zpages %s: status %d, err %v, body %q", zpages, status, err, truncate(body))
	}

	tp := newHTTPTracerProvider(t, col.httpAddr, kongResource(newUUID(t)))
	metricsURL := "http://" + col.otlpHTTPAddr + "/v1/metrics"

	// Two waves of everything, so every counter rises between scrapes and every rate() panel has a
	// real value, not 0 or NaN.
	for wave := 1; wave <= 2; wave++ {
		feedDeployTraffic(t, col, tp, metricsURL, wave)
		if wave == 1 {
			// Every family the panels read is in Prometheus before wave 2 adds to it.
			for _, q := range []string{
				`gateway_requests_total{otel_metric_overflow="true"}`, `gateway_bandwidth_bytes_total`,
				`gateway_upstream_target_health{state="unhealthy"} == 1`,
				`otelcol_receiver_gateway_events{outcome="overflow"}`, `otelcol_processor_cumulative_points{outcome="overflowed"}`,
				`otelcol_processor_cumulative_points{outcome="dropped"}`, `otelcol_exporter_promstream_dropped_points`,
				`otelcol_exporter_promstream_scrapes{outcome="timeout"}`, `otelcol_receiver_gateway_requests{outcome="malformed"}`,
			} {
				eventually(t, convergeTimeout, "Prometheus to hold "+q, func() (bool, string) {
					v, err := promQuery(prom, q)
					if err != nil {
						return false, err.Error()
					}
					return len(v) > 0, fmt.Sprintf("%s: no series", q)
				})
			}
			time.Sleep(2 * time.Second) // two scrapes of the wave-1 values
		}
	}
	// Wave 2 is in Prometheus before the panels are read: every panel can return data from wave 1
	// alone (a rate of 0 is finite), but the exact checks below need the rise between the waves,
	// and a loaded machine can query before the scrape after wave 2's flush (the 5xx ratio of
	// /status was then 0/0).
	eventually(t, convergeTimeout, "Prometheus to hold wave 2", func() (bool, string) {
		v, err := promScalar(prom, `sum(gateway_requests_total{job="kong", http_route="/status"})`)
		if err != nil {
			return false, err.Error()
		}
		return v == 12, fmt.Sprintf("/status requests = %v, want 12 (6 per wave)", v)
	})

	// Every panel query, template variables at "All" (.*) and $__rate_interval = 1m, must return
	// at least one series with a finite value.
	results := make([]queryResult, len(panels))
	eventually(t, convergeTimeout, "every dashboard query to return data", func() (bool, string) {
		var missing []string
		for i, p := range panels {
			v, err := promQuery(prom, p.query)
			if err != nil {
				missing = append(missing, fmt.Sprintf("%s [%s]: %v", p.panel, p.refID, err))
				continue
			}
			results[i] = summarize(v)
			if results[i].finite == 0 {
				missing = append(missing, fmt.Sprintf("%s [%s]: %d series, none finite: %s", p.panel, p.refID, len(v), p.query))
			}
		}
		return len(missing) == 0, strings.Join(missing, "\n")
	})

	// A few values the traffic fixes exactly.
	ratio := func(route string) float64 {
		v, err := promQuery(prom, `sum(rate(gateway_requests_total{job="kong", http_route="`+route+`", http_response_status_code=~"5.."}[1m])) / sum(rate(gateway_requests_total{job="kong", http_route="`+route+`"}[1m]))`)
		if err != nil || len(v) != 1 {
			return math.NaN()
		}
		return float64(v[0].Value)
	}
	if r := ratio("/status"); r != 1 {
		t.Errorf("5xx ratio of /status = %v, want 1 (every request a 503)", r)
	}
	if v, err := promQuery(prom, `max without (collector) (gateway_upstream_target_health{state!~"healthy|healthchecks_off"}) == 1`); err != nil ||
		len(v) != 1 || v[0].Metric["gateway_target"] != "api-1:8080" || v[0].Metric["state"] != "unhealthy" {
		t.Errorf("unhealthy targets = %v (%v), want api-1:8080 unhealthy only", v, err)
	}

	var sb strings.Builder
	w := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "panel\tquery\tseries\texample")
	for i, p := range panels {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", p.panel, p.refID, results[i].series, results[i].example)
	}
	_ = w.Flush()
	t.Logf("dashboard %s: %d panels, %d queries, all with data (%s since start):\n%s",
		dashboardPath, countPanels(panels), len(panels), time.Since(started).Round(time.Second), sb.String())
}

// feedDeployTraffic sends one wave: Kong spans (some 5xx, some slow), Kong http-log entries
// (they carry sizes: bandwidth), new routes beyond limits.max_tuples, health events, a malformed
// export, out-of-order deltas, a type conflict, streams beyond limits.max_streams, and timed-out scrapes.
func feedDeployTraffic(t *testing.T, col *collector, tp *sdktrace.TracerProvider, metricsURL string, wave int) {
	t.Helper()
	kong := tp.Tracer("kong-internal", trace.WithInstrumentationVersion("0.1.0"))
	type req struct {
		method, route   string
		status, count   int
		total, upstream time.Duration
	}
	for _, r := range []req{
		{"GET", "/anything", 200, 20, 80 * time.Millisecond, 60 * time.Millisecond},
		{"POST", "/anything", 201, 5, 120 * time.Millisecond, 100 * time.Millisecond},
		{"GET", "/status", 503, 6, 40 * time.Millisecond, 35 * time.Millisecond},
		{"GET", "/slow", 200, 5, 900 * time.Millisecond, 850 * time.Millisecond},
	} {
		for range r.count {
			emitTimedKongTrace(kong, r.method, r.route, r.status, r.total, r.upstream)
		}
	}

	logs := []string{
		kongHTTPLogEntry("example_route", "", 200, 139, 9982),
		kongHTTPLogEntry("example_route", "", 200, 200, 512),
		kongHTTPLogEntry("example_route", "", 502, 150, 90),
	}
	status, body := httpPost(t, "http://"+col.httpAddr+"/kong/http-log", "application/json", []byte("["+strings.Join(logs, ",")+"]"))
	if status != http.StatusOK {
		t.Fatalf("POST /kong/http-log: %d %s", status, truncate(body))
	}

	forceFlush(t, tp)

	// Six new routes beyond limits.max_tuples (8): their events go to the gateway's overflow tuple
	// (otelcol_receiver_gateway_events{outcome="overflow"}). The tuples above are held first (one
	// flush_interval earlier), so the panels' routes are never the overflowed ones.
	if wave == 1 {
		time.Sleep(1500 * time.Millisecond)
	}
	for i := range 6 {
		emitTimedKongTrace(kong, "GET", fmt.Sprintf("/extra-%d", i), 200, 20*time.Millisecond, 10*time.Millisecond)
	}
	forceFlush(t, tp)

	push := `[{"gateway":"kong-0","kind":"kong","upstream":"billing","target":"api-1:8080","address":"10.1.0.1:8080","state":"UNHEALTHY"},
{"gateway":"kong-0","kind":"kong","upstream":"billing","target":"api-2:8080","address":"10.1.0.2:8080","state":"HEALTHY"},
{"gateway":"kong-0","kind":"kong","upstream":"orders","target":"o-1:80","address":"10.2.0.1:80","state":"HEALTHY"}]`
	if status, body := httpPost(t, "http://"+col.httpAddr+"/v1/health", "application/json", []byte(push)); status != http.StatusOK {
		t.Fatalf("POST /v1/health: %d %s", status, truncate(body))
	}

	// A malformed export: outcome=malformed.
	if status, _ := httpPost(t, col.tracesURL(), "application/x-protobuf", []byte("\x0a\xff\xff\xff\xff\x0fnot a protobuf")); status != http.StatusBadRequest {
		t.Fatalf("malformed export: status %d, want 400", status)
	}

	// Through the otlp receiver: a delta point older than the stream's last (processor drops it,
	// out_of_order); a gauge and a counter that write the same sample name (exporter drops one,
	// type_conflict); 250 streams of one metric, beyond limits.max_streams (processor overflow).
	now := time.Now()
	ns := func(d time.Duration) string { return fmt.Sprint(now.Add(d).UnixNano()) }
	deltaSum := func(name, start, end string, attrs ...string) map[string]any {
		var points []any
		if len(attrs) == 0 {
			attrs = []string{""}
		}
		for _, a := range attrs {
			p := map[string]any{"startTimeUnixNano": start, "timeUnixNano": end, "asInt": "5"}
			if a != "" {
				p["attributes"] = []any{map[string]any{"key": "k", "value": map[string]any{"stringValue": a}}}
			}
			points = append(points, p)
		}
		return map[string]any{"name": name, "sum": map[string]any{"aggregationTemporality": 1, "isMonotonic": true, "dataPoints": points}}
	}
	many := make([]string, 250)
	for i := range many {
		many[i] = fmt.Sprintf("s%03d", i)
	}
	for _, metrics := range [][]any{
		{deltaSum("e2e.delta", ns(-3*time.Second), ns(0))},
		{deltaSum("e2e.delta", ns(-2*time.Second), ns(-time.Second))},
		{map[string]any{"name": "e2e.conflict", "sum": map[string]any{"aggregationTemporality": 2, "isMonotonic": true,
			"dataPoints": []any{map[string]any{"startTimeUnixNano": ns(-time.Minute), "timeUnixNano": ns(0), "asInt": fmt.Sprint(wave)}}}}},
		{map[string]any{"name": "e2e_conflict_total", "gauge": map[string]any{
			"dataPoints": []any{map[string]any{"timeUnixNano": ns(0), "asInt": "5"}}}}},
		{deltaSum("e2e.many", ns(-time.Second), ns(0), many...)},
	} {
		body, err := json.Marshal(map[string]any{"resourceMetrics": []any{map[string]any{
			"resource":     map[string]any{"attributes": stringAttrs(map[string]string{"service.name": "e2e-otlp"})},
			"scopeMetrics": []any{map[string]any{"metrics": metrics}},
		}}})
		if err != nil {
			t.Fatal(err)
		}
		if status, resp := httpPost(t, metricsURL, "application/json", body); status != http.StatusOK {
			t.Fatalf("POST OTLP metrics: %d %s", status, truncate(resp))
		}
	}

	// Scrapes whose deadline passes before the body is written: outcome=timeout.
	for range 3 {
		r, _ := http.NewRequest(http.MethodGet, col.metricsURL(), nil)
		r.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", "0.000000001")
		if resp, err := httpClient.Do(r); err == nil {
			_ = resp.Body.Close()
		}
	}
}

// emitTimedKongTrace is emitKongTrace with real durations: root `kong` lasting total, its last
// `kong.balancer` try lasting upstream (Kong's upstream time, docs/gateways.md §1a).
func emitTimedKongTrace(tracer trace.Tracer, method, route string, status int, total, upstream time.Duration) {
	end := time.Now()
	start := end.Add(-total)
	ctx, root := tracer.Start(context.Background(), "kong", trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start),
		trace.WithAttributes(
			attribute.String("http.method", method),
			attribute.String("http.url", "http://localhost"+route),
			attribute.String("http.host", "localhost"),
			attribute.String("http.scheme", "http"),
			attribute.String("http.flavor", "1.1"),
			attribute.String("kong.request.id", randomHex(16)),
		))
	_, balancer := tracer.Start(ctx, "kong.balancer", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(end.Add(-upstream)), trace.WithAttributes(
			attribute.Float64("try_count", 1),
			attribute.String("net.peer.ip", "37.16.15.184"),
			attribute.Float64("net.peer.port", 80),
			attribute.String("net.peer.name", "httpbin.konghq.com"),
		))
	if status >= 500 {
		balancer.SetAttributes(attribute.Int("http.status_code", status))
		balancer.SetStatus(codes.Error, "")
	}
	balancer.End(trace.WithTimestamp(end))
	root.SetAttributes(attribute.Int("http.status_code", status), attribute.String("http.route", route))
	root.End(trace.WithTimestamp(end))
}

// ---------------------------------------------------------------------------------------------
// The dashboard's queries

type panelQuery struct {
	panel, refID, query string
}

// templateVar matches $name, ${name} and ${name:format} in a Grafana query.
var templateVar = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)`)

// dashboardQueries reads every target of the dashboard, with the template variables replaced as
// Grafana does for "All" (allValue .*) and $__rate_interval as 1m.
func dashboardQueries(t *testing.T) []panelQuery {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Templating struct {
			List []struct {
				Name     string `json:"name"`
				Type     string `json:"type"`
				AllValue string `json:"allValue"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr  string `json:"expr"`
				RefID string `json:"refId"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	values := map[string]string{"__rate_interval": "1m", "__interval": "1m", "__range": "1m"}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			values[v.Name] = v.AllValue
		}
	}
	var out []panelQuery
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			q := templateVar.ReplaceAllStringFunc(tg.Expr, func(m string) string {
				sm := templateVar.FindStringSubmatch(m)
				name := sm[1] + sm[2]
				v, ok := values[name]
				if !ok {
					t.Fatalf("panel %q uses $%s, which the test cannot substitute", p.Title, name)
				}
				return v
			})
			out = append(out, panelQuery{panel: p.Title, refID: tg.RefID, query: q})
		}
	}
	if len(out) == 0 {
		t.Fatal("no panel queries in the dashboard")
	}
	return out
}

func countPanels(qs []panelQuery) int {
	seen := map[string]bool{}
	for _, q := range qs {
		seen[q.panel] = true
	}
	return len(seen)
}

// queryResult summarizes one query result for the table.
type queryResult struct {
	series, finite int
	example        string
}

func summarize(v model.Vector) queryResult {
	m := queryResult{series: len(v)}
	best := math.Inf(-1)
	for _, s := range v {
		f := float64(s.Value)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		m.finite++
		// The largest value is the example; ties go to the first label set in sort order.
		ex := fmt.Sprintf("%s = %.4g", s.Metric, f)
		if f > best || f == best && ex < m.example {
			best, m.example = f, ex
		}
	}
	return m
}
