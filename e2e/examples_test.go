package e2e

// The example configurations (examples/*.yaml) as users run them: the built
// collector started on each file with only its ports moved to free ones (and
// the environment the file reads), fed its gateway's traffic and scraped by
// a real Prometheus; the series its gateway's dashboard queries are checked
// for exact counts.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// endpointPort matches an `endpoint: host:port` setting (not a URL: a
// remote-write endpoint the example leaves out of its pipeline is never
// dialled, and keeps its text).
var endpointPort = regexp.MustCompile(`(endpoint: *)([A-Za-z0-9.\-]+):([0-9]+)\b`)

// example is one examples/<name>.yaml, its ports moved.
type example struct {
	name   string
	config string      // the file with its ports substituted
	ports  map[int]int // the file's port → the one the test uses
	env    []string    // NAME=value for the file's ${env:…}
}

// loadExample reads examples/<name>.yaml and moves every endpoint port to a
// free one. Nothing else may change: the substituted file, its ports put
// back, must be the file byte for byte.
func loadExample(t *testing.T, name string) *example {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if strings.Contains(text, "telemetry:") {
		t.Fatalf("examples/%s.yaml sets service.telemetry: the harness moves the collector's own metrics port", name)
	}
	ex := &example{name: name, ports: map[int]int{}}
	for _, m := range endpointPort.FindAllStringSubmatch(text, -1) {
		p, _ := strconv.Atoi(m[3])
		if _, ok := ex.ports[p]; !ok {
			ex.ports[p] = freePorts(t, 1)[0]
		}
	}
	move := func(to map[int]int) func(string) string {
		return func(s string) string {
			m := endpointPort.FindStringSubmatch(s)
			p, _ := strconv.Atoi(m[3])
			return m[1] + m[2] + ":" + strconv.Itoa(to[p])
		}
	}
	ex.config = endpointPort.ReplaceAllStringFunc(text, move(ex.ports))
	back := map[int]int{}
	for orig, moved := range ex.ports {
		back[moved] = orig
	}
	if endpointPort.ReplaceAllStringFunc(ex.config, move(back)) != text {
		t.Fatalf("examples/%s.yaml: the harness changed more than its ports", name)
	}
	return ex
}

// addr is the loopback address of the file's port p, moved.
func (ex *example) addr(t *testing.T, p int) string {
	t.Helper()
	moved, ok := ex.ports[p]
	if !ok {
		t.Fatalf("examples/%s.yaml has no endpoint on port %d (ports %v): the test no longer matches it", ex.name, p, ex.ports)
	}
	return hostPort(moved)
}

// envValue is the value of NAME in ex.env.
func (ex *example) envValue(t *testing.T, name string) string {
	t.Helper()
	for _, kv := range ex.env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	t.Fatalf("examples/%s.yaml: no %s in the test's environment for it", ex.name, name)
	return ""
}

// stored leaves out the labels with an empty value, which Prometheus
// stores as absent.
func stored(m map[string]string) map[string]string {
	for k, v := range m {
		if v == "" {
			delete(m, k)
		}
	}
	return m
}

// collectorLabel is the collector label of the example's series: the host
// name and the receiver's HTTP port (the default identity).
func (ex *example) collectorLabel(t *testing.T) string {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return host + ":" + strconv.Itoa(ex.ports[14318])
}

// start runs the collector on the example with ex.env added to the test's
// environment, through env(1) so that parallel examples do not share one. The collector's own telemetry, left at its default by every
// example (localhost:8888, which any collector on the machine may hold),
// is served on a free port instead.
func (ex *example) start(t *testing.T) *process {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, ex.name+".yaml")
	if err := os.WriteFile(path, []byte(ex.config), 0o600); err != nil {
		t.Fatal(err)
	}
	envBin, err := exec.LookPath("env")
	if err != nil {
		t.Fatal(err)
	}
	telemetry := "yaml:service::telemetry::metrics::readers: [{pull: {exporter: {prometheus: {host: 127.0.0.1, port: " +
		strconv.Itoa(freePorts(t, 1)[0]) + ", without_units: true, without_type_suffix: true, without_scope_info: true}}}}]"
	args := append(append(ex.env, otelcolBin), "--config", path, "--config", telemetry)
	return startProcess(t, "otelcol-"+ex.name, filepath.Join(dir, "otelcol.log"), envBin, args...)
}

// exampleCheck is a query and exactly the series Prometheus must return.
type exampleCheck struct {
	query string
	want  seriesCounts
}

// exampleRun is how one example is run.
type exampleRun struct {
	exporterPort int                         // the file's promstream port
	env          func(t *testing.T) []string // NAME=value for the file's ${env:…}
	// send sends the gateway's traffic; generators that keep account add
	// their requests to sent.
	send func(t *testing.T, ex *example, sent expectedCounts)
	// checks are the queries and their series once target (the exporter)
	// is scraped as job <example name>.
	checks func(t *testing.T, ex *example, target string, sent expectedCounts) []exampleCheck
	// lines the exporter must write exactly: what Prometheus does not keep
	// (label order, empty labels).
	lines func(t *testing.T, ex *example) []string
	// dashboard (testdata/dashboards) and the families the gateway node
	// serves itself (nodes: its exposition): every other family the
	// dashboard queries must be queried by a check.
	dashboard string
	nodes     func() string
}

// receiverScope is the otel_scope_name of the receiver's series, which an
// exporter without compatibility or without_scope_info writes.
const receiverScope = "github.com/otelgateway/otelgateway/receiver/gatewayreceiver"

var exampleRuns = map[string]exampleRun{
	"kong": {
		exporterPort: 9542,
		env:          func(t *testing.T) []string { return []string{"KONG_ADMIN_URL=" + fakeKongHealthAdmin(t)} },
		send:         func(t *testing.T, ex *example, _ expectedCounts) { sendKongSample(t, ex.addr(t, 14318)) },
		checks:       kongExampleChecks,
		lines: func(t *testing.T, ex *example) []string {
			// Kong's label order, consumer="" written.
			return []string{`kong_http_requests_total{service="example_service",route="orders",code="503",source="service",workspace="default",consumer="",collector="` +
				ex.collectorLabel(t) + `"} 1`}
		},
		dashboard: kongDashboard,
		nodes:     func() string { return kongNodeMetrics("0a4d4c6e-81d3-4b7a-9f5e-1f2d3c4b5a60", 1301)(0) },
	},
	"apisix": {
		exporterPort: 9542,
		send:         func(t *testing.T, ex *example, _ expectedCounts) { sendAPISIXSample(t, ex.addr(t, 14318)) },
		checks:       apisixExampleChecks,
		lines: func(t *testing.T, ex *example) []string {
			return []string{`apisix_http_status{code="502",route="http-logger-route",matched_uri="",matched_host="",service="",consumer="",node="3.213.1.197",` +
				`request_type="traditional_http",request_llm_model="",llm_model="",response_source="upstream",collector="` + ex.collectorLabel(t) + `"} 1`}
		},
		dashboard: apisixDashboard,
		nodes:     func() string { return apisixNodeMetrics("apisix-0")(0) },
	},
	"envoy": {
		exporterPort: 9464,
		send:         func(t *testing.T, ex *example, sent expectedCounts) { sendEnvoy(t, ex.addr(t, 14317), sent) },
		checks:       otelExampleChecks("gateway_upstream", "fake_cluster"), // dimensions: [upstream]
	},
	"traefik": {
		exporterPort: 9464,
		send:         func(t *testing.T, ex *example, sent expectedCounts) { sendTraefik(t, ex.addr(t, 14318), sent) },
		checks:       otelExampleChecks(),
	},
	"otelcol-fleet": {
		exporterPort: 9464,
		env:          func(t *testing.T) []string { return []string{"STORAGE_DIR=" + t.TempDir()} },
		send: func(t *testing.T, ex *example, sent expectedCounts) {
			tp := newHTTPTracerProvider(t, ex.addr(t, 14318), kongResource(newUUID(t)))
			tracer := tp.Tracer("kong-internal", trace.WithInstrumentationVersion("0.1.0"))
			for _, r := range kongRequests {
				emitKong(tracer, r, sent)
			}
			shutdownProvider(t, tp)
		},
		checks: otelExampleChecks(),
	},
}

// otelExampleChecks: under the receiver's otel names, each request the
// traffic generator added to sent is one count of gateway_requests_total
// and one observation of http_server_request_duration_seconds, with the
// example's collector label, the receiver's scope and the labels kv
// (name, value, …) beside the generator's.
func otelExampleChecks(kv ...string) func(t *testing.T, ex *example, target string, sent expectedCounts) []exampleCheck {
	return func(t *testing.T, ex *example, target string, sent expectedCounts) []exampleCheck {
		want := expectedCounts{}
		for _, s := range sent {
			want.add(labelsWith(s.labels, append([]string{"collector", ex.collectorLabel(t), "otel_scope_name", receiverScope}, kv...)...), int(s.value))
		}
		return []exampleCheck{
			{"gateway_requests_total", want.stored(target)},
			{"http_server_request_duration_seconds_count", want.stored(target)},
		}
	}
}

// labelsWith is base with the label pairs kv (name, value, …) added.
func labelsWith(base map[string]string, kv ...string) map[string]string {
	out := make(map[string]string, len(base)+len(kv)/2)
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// kongExampleChecks: sendKongSample's requests without per_consumer (one
// consumer, ""), and the upstream health of fakeKongHealthAdmin.
func kongExampleChecks(t *testing.T, ex *example, target string, _ expectedCounts) []exampleCheck {
	base := map[string]string{"job": "kong", "workspace": "default", "collector": ex.collectorLabel(t)}
	orders := labelsWith(base, "service", "example_service", "route", "orders")
	anything := labelsWith(base, "service", "httpbin.konghq.com", "route", "/anything")
	requests, bandwidth, latency := expectedCounts{}, expectedCounts{}, expectedCounts{}
	requests.add(labelsWith(orders, "code", "200", "source", "service"), 2)
	requests.add(labelsWith(orders, "code", "503", "source", "service"), 1)
	requests.add(labelsWith(anything, "code", "200", "source", "service"), 4)
	// Kong's spans carry no sizes: the http-log entries only.
	bandwidth.add(labelsWith(orders, "direction", "egress"), 2*9982+50)
	bandwidth.add(labelsWith(orders, "direction", "ingress"), 2*139+100)
	latency.add(labelsWith(orders, "le", "+Inf"), 3)
	latency.add(labelsWith(anything, "le", "+Inf"), 4)
	// The poller's instance: the Admin API's host:port.
	admin := map[string]string{"job": "kong", "subsystem": "http", "collector": ex.collectorLabel(t), "instance": ex.envValue(t, "KONG_ADMIN_URL")[len("http://"):]}
	health := expectedCounts{}
	for _, tg := range [][4]string{
		{"orders-upstream", "orders-a.internal:8080", "10.0.1.11:8080", "healthy"},
		{"orders-upstream", "orders-b.internal:8080", "10.0.1.12:8080", "unhealthy"},
		{"users-upstream", "users.internal:8080", "10.0.2.21:8080", "healthy"},
		{"users-upstream", "users-old.internal:8080", "", "dns_error"}, // no address
	} {
		health.add(stored(labelsWith(admin, "upstream", tg[0], "target", tg[1], "address", tg[2], "state", tg[3])), 1)
	}
	return []exampleCheck{
		{"kong_http_requests_total", requests.stored(target)},
		{"kong_bandwidth_bytes", bandwidth.stored(target)},
		{`kong_request_latency_ms_bucket{le="+Inf"}`, latency.stored(target)},
		{`kong_upstream_latency_ms_bucket{le="+Inf"}`, latency.stored(target)},
		{`kong_kong_latency_ms_bucket{le="+Inf"}`, latency.stored(target)},
		{`kong_upstream_target_health == 1`, health.stored(target)},
	}
}

// apisixExampleChecks: sendAPISIXSample's requests.
func apisixExampleChecks(t *testing.T, ex *example, target string, _ expectedCounts) []exampleCheck {
	base := map[string]string{"job": "apisix", "request_type": "traditional_http", "collector": ex.collectorLabel(t)}
	logged := labelsWith(base, "route", "http-logger-route", "node", "3.213.1.197")
	// matched_host is the route's host pattern, which spans do not carry.
	spans := labelsWith(base, "route", "api")
	status, bandwidth, latency := expectedCounts{}, expectedCounts{}, expectedCounts{}
	for _, s := range []struct {
		lbls map[string]string
		code string
		n    int
	}{{logged, "200", 2}, {logged, "502", 1}, {labelsWith(spans, "matched_uri", "/api/*"), "200", 5}} {
		status.add(labelsWith(s.lbls, "code", s.code, "response_source", "upstream"), s.n)
	}
	// APISIX's spans carry no sizes: the http-logger entries only.
	bandwidth.add(labelsWith(logged, "type", "egress"), 3*617)
	bandwidth.add(labelsWith(logged, "type", "ingress"), 3*85)
	for _, typ := range []string{"request", "upstream", "apisix"} {
		latency.add(labelsWith(logged, "type", typ, "le", "+Inf"), 3)
	}
	// Spans carry no upstream time, and these were proxied: request only.
	latency.add(labelsWith(spans, "type", "request", "le", "+Inf"), 5)
	return []exampleCheck{
		{"apisix_http_status", status.stored(target)},
		{"apisix_bandwidth", bandwidth.stored(target)},
		{`apisix_http_latency_bucket{le="+Inf"}`, latency.stored(target)},
	}
}

// dashboardFamilies are the metric names prefix_* that the dashboard's
// panels query, less the families the gateway node serves itself (nodes,
// an exposition), sorted.
func dashboardFamilies(t *testing.T, dashboard, prefix, nodes string) []string {
	t.Helper()
	_, panels, _ := loadDashboard(t, dashboard)
	node := map[string]bool{}
	for l := range strings.SplitSeq(nodes, "\n") {
		if f := strings.Fields(l); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			node[f[2]] = true
		}
	}
	name := regexp.MustCompile(`\b` + prefix + `_\w+`)
	seen := map[string]bool{}
	var out []string
	for _, p := range panels {
		for _, tg := range p.targets {
			for _, m := range name.FindAllString(tg.Expr, -1) {
				if !node[m] && !seen[m] {
					seen[m] = true
					out = append(out, m)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// exposedLine fails unless the exporter at target writes line exactly.
func exposedLine(t *testing.T, target, line string) {
	t.Helper()
	body, _, err := scrape("http://" + target + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.SplitSeq(string(body), "\n") {
		if l == line {
			return
		}
	}
	t.Errorf("no line\n  %s\nin\n%s", line, body)
}

// TestExamples runs every examples/*.yaml, each on its own collector with
// its own Prometheus (job = the example's name, honor_labels as the files
// say), in parallel: the receiver's default flush (5s) dominates.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples/*.yaml (%v)", err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	for name := range exampleRuns {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+name+" ") {
			t.Errorf("exampleRuns has %s, examples/ has no %s.yaml", name, name)
		}
	}
	for _, name := range names {
		run, ok := exampleRuns[name]
		if !ok {
			t.Errorf("examples/%s.yaml is not run: add it to exampleRuns", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runExample(t, name, run)
		})
	}
}

func runExample(t *testing.T, name string, run exampleRun) {
	ex := loadExample(t, name)
	target := ex.addr(t, run.exporterPort)
	if run.env != nil {
		ex.env = run.env(t)
	}
	// Prometheus first: its cleanup runs last, so it keeps scraping while
	// the collector stops, and the exporter's shutdown_grace ends at its
	// next scrape.
	prom := startPrometheusWith(t, fmt.Sprintf("  - job_name: %s\n    honor_labels: true\n    static_configs: [{targets: ['%s']}]\n", name, target))
	proc := ex.start(t)
	waitHTTP200(t, proc, "http://"+target+"/metrics")
	sent := expectedCounts{}
	run.send(t, ex, sent)
	checks := run.checks(t, ex, target, sent)
	for _, c := range checks {
		if len(c.want) == 0 {
			t.Fatalf("%s: the check wants no series: it could pass on a collector that serves nothing", c.query)
		}
	}
	if run.dashboard != "" {
		// The dashboard's own families, each under a check: a name the
		// example no longer serves (compatibility dropped:
		// kong_bandwidth_bytes becomes kong_bandwidth_bytes_total) then
		// fails its check.
		for _, f := range dashboardFamilies(t, run.dashboard, name, run.nodes()) {
			covered := false
			for _, c := range checks {
				covered = covered || regexp.MustCompile(`\b`+f+`\b`).MatchString(c.query)
			}
			if !covered {
				t.Errorf("%s queries %s, which the collector serves: no check queries it", run.dashboard, f)
			}
		}
	}
	// Every check in one wait, so that a failure shows them all.
	eventually(t, convergeTimeout, "Prometheus: the series of examples/"+name+".yaml", func() (bool, string) {
		var diffs []string
		for _, c := range checks {
			v, err := promQuery(prom, c.query)
			if err != nil {
				return false, err.Error()
			}
			if d := diffCounts(vectorCounts(v), c.want); d != "" {
				diffs = append(diffs, c.query+":\n"+d)
			}
		}
		return len(diffs) == 0, strings.Join(diffs, "\n")
	})
	if run.lines != nil {
		for _, l := range run.lines(t, ex) {
			exposedLine(t, target, l)
		}
	}
}
