package e2e

// The gateways' official Grafana dashboards, unmodified (testdata/dashboards),
// against the collector: Kong's (grafana.com 7424) and APISIX's (11719).
//
// Each run starts the built collector with the gateway's naming profile, a
// stand-in for the gateway's own Prometheus plugin with per-request metrics
// off (gatewaynodes_test.go: nginx, shared dicts, Lua VMs, etcd) and a real
// Prometheus scraping both. Traffic flows the whole time, as on a live
// dashboard. Every panel's PromQL, with the dashboard's template variables
// in "All" mode (`.*`) and 1m for Grafana's intervals, is then evaluated
// through Prometheus's HTTP API; a panel has data when each of its queries
// returns at least one series with a finite value. Panels that repeat by a
// variable are evaluated once per value of that variable, as Grafana draws
// them.
//
// Fed access logs, every panel must have data. Fed spans, the panels spans
// cannot fill are listed, with why, and the test holds that exact list.
//
// Per node: with the receiver's node_label: instance (and honor_labels), the
// per-request series carry the reporting gateway node as `instance`, so
// `$instance` can pick one node. These runs feed inputs that name their node
// (Kong: spans, service.instance.id; Kong's http-log names no node. APISIX:
// http-logger's server.hostname), the node being a node stand-in's scrape
// address, each node a different amount; they set `$instance` to the first
// value of the dashboard's instance variable and want the same panels filled
// as in "All" mode, the panels that ignore `$instance` listed exactly, and
// the per-request counts of one node to be that node's requests only.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
)

// ---------------------------------------------------------------------------
// Dashboards: panels and their queries

type grafanaTarget struct {
	RefID string `json:"refId"`
	Expr  string `json:"expr"`
	Hide  bool   `json:"hide"`
}

type grafanaPanel struct {
	Type    string          `json:"type"`
	Title   string          `json:"title"`
	Repeat  string          `json:"repeat"`
	Targets []grafanaTarget `json:"targets"`
	Panels  []grafanaPanel  `json:"panels"` // a collapsed row's panels
}

type grafanaDashboard struct {
	Title      string         `json:"title"`
	Panels     []grafanaPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Query json.RawMessage `json:"query"` // a string, or {"query": …} in newer Grafana
		} `json:"list"`
	} `json:"templating"`
}

// dashPanel is one panel that queries Prometheus.
type dashPanel struct {
	row, title, kind string
	repeat           string // variable the panel repeats by ("" for none)
	repeatQuery      string // that variable's query: label_values(metric, label)
	targets          []grafanaTarget
}

func (p dashPanel) name() string {
	if p.title != "" {
		return p.title
	}
	return fmt.Sprintf("(untitled %s in row %q)", p.kind, p.row)
}

// loadDashboard reads a dashboard's panels with queries, in order, with the
// row each sits in (collapsed rows hold their panels, open rows precede
// them), and its template variables' queries by name.
func loadDashboard(t *testing.T, file string) (string, []dashPanel, map[string]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "dashboards", file))
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	queries := map[string]string{}
	for _, v := range d.Templating.List {
		var q string
		if json.Unmarshal(v.Query, &q) != nil {
			var o struct{ Query string }
			_ = json.Unmarshal(v.Query, &o)
			q = o.Query
		}
		queries[v.Name] = q
	}
	var out []dashPanel
	var walk func(ps []grafanaPanel, row string)
	walk = func(ps []grafanaPanel, row string) {
		for _, p := range ps {
			if p.Type == "row" {
				row = p.Title
				walk(p.Panels, row)
				continue
			}
			var ts []grafanaTarget
			for _, tg := range p.Targets {
				if tg.Expr != "" && !tg.Hide {
					ts = append(ts, tg)
				}
			}
			if len(ts) == 0 {
				continue
			}
			out = append(out, dashPanel{row: row, title: p.Title, kind: p.Type, repeat: p.Repeat, repeatQuery: queries[p.Repeat], targets: ts})
		}
	}
	walk(d.Panels, "")
	return d.Title, out, queries
}

var (
	grafanaBuiltin  = regexp.MustCompile(`\$\{?(__[a-z_]+)\}?`)
	grafanaVariable = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]`)
	labelValuesCall = regexp.MustCompile(`^label_values\(\s*([^,]+?)\s*,\s*(\w+)\s*\)$`)
)

// substitute does what Grafana does to a query before sending it: its
// interval variables become 1m (what $__rate_interval is with a 15s scrape
// interval and a 1m-wide view), the dashboard's variables the given value,
// or ".*" (the variables' allValue, "All" mode).
func substitute(expr string, vars map[string]string) (string, error) {
	var err error
	expr = grafanaBuiltin.ReplaceAllStringFunc(expr, func(m string) string {
		switch name := grafanaBuiltin.FindStringSubmatch(m)[1]; name {
		case "__rate_interval", "__interval", "__range":
			return "1m"
		default:
			err = fmt.Errorf("unknown Grafana variable %s", m)
			return m
		}
	})
	expr = grafanaVariable.ReplaceAllStringFunc(expr, func(m string) string {
		s := grafanaVariable.FindStringSubmatch(m)
		name := s[1] + s[2] + s[3]
		if v, ok := vars[name]; ok {
			return v
		}
		return ".*"
	})
	if err == nil && strings.Contains(expr, "$") {
		err = fmt.Errorf("unsubstituted variable left in %q", expr)
	}
	return expr, err
}

// ---------------------------------------------------------------------------
// Evaluation

// panelResult is one panel evaluated: series per query (summed over the
// repeat values) and what had no data.
type panelResult struct {
	panel   dashPanel
	series  []int
	repeats []string // values of the repeat variable, when the panel repeats
	missing []string // "A: <expr>: why" for each query without data
}

func (r panelResult) ok() bool { return len(r.missing) == 0 }

// labelValues answers Grafana's label_values(metric, label) through the
// Prometheus API, sorted.
func labelValues(p *promServer, query string) ([]string, error) {
	m := labelValuesCall.FindStringSubmatch(query)
	if m == nil {
		return nil, fmt.Errorf("cannot evaluate variable query %q", query)
	}
	status, body, err := httpGet("http://" + p.addr + "/api/v1/label/" + m[2] + "/values?match[]=" + url.QueryEscape(m[1]))
	if err != nil {
		return nil, err
	}
	var resp struct {
		Status string   `json:"status"`
		Data   []string `json:"data"`
	}
	if err := json.Unmarshal(body, &resp); err != nil || resp.Status != "success" {
		return nil, fmt.Errorf("label values %q: status %d: %s", query, status, truncate(body))
	}
	sort.Strings(resp.Data)
	return resp.Data, nil
}

// evalPanels evaluates every panel with the variables in set at the given
// values (one value each, as Grafana writes a single selection) and the
// others in "All" mode. A panel repeating by a variable in set is drawn once,
// for that value.
func evalPanels(p *promServer, panels []dashPanel, set map[string]string) []panelResult {
	out := make([]panelResult, 0, len(panels))
	fixed := map[string]string{}
	for k, v := range set {
		fixed[k] = grafanaRegexEscape(v)
	}
	for _, pl := range panels {
		r := panelResult{panel: pl, series: make([]int, len(pl.targets))}
		varsList := []map[string]string{fixed}
		if v, ok := set[pl.repeat]; ok && pl.repeat != "" {
			r.repeats = []string{v}
		} else if pl.repeat != "" {
			values, err := labelValues(p, pl.repeatQuery)
			if err == nil && len(values) == 0 {
				err = fmt.Errorf("no values, so Grafana draws no panel")
			}
			if err != nil {
				r.missing = append(r.missing, fmt.Sprintf("$%s = %s: %v", pl.repeat, pl.repeatQuery, err))
				out = append(out, r)
				continue
			}
			r.repeats = values
			varsList = varsList[:0]
			for _, v := range values {
				vars := map[string]string{pl.repeat: grafanaRegexEscape(v)}
				for k, fv := range fixed {
					vars[k] = fv
				}
				varsList = append(varsList, vars)
			}
		}
		for i, tg := range pl.targets {
			for _, vars := range varsList {
				q, err := substitute(tg.Expr, vars)
				var finite, n int
				if err == nil {
					var v []float64
					v, err = promValues(p, q)
					n = len(v)
					r.series[i] += n
					for _, x := range v {
						if !math.IsNaN(x) && !math.IsInf(x, 0) {
							finite++
						}
					}
				}
				switch {
				case err != nil:
					r.missing = append(r.missing, fmt.Sprintf("%s: %s: %v", tg.RefID, oneLine(q), err))
				case n == 0:
					r.missing = append(r.missing, fmt.Sprintf("%s: %s: no series", tg.RefID, oneLine(q)))
				case finite == 0:
					r.missing = append(r.missing, fmt.Sprintf("%s: %s: %d series, none with a finite value", tg.RefID, oneLine(q), n))
				}
			}
		}
		out = append(out, r)
	}
	return out
}

// grafanaRegexEscape is how Grafana writes one value of a multi-value
// variable into a Prometheus query: regex-escaped, and the escapes doubled
// for the PromQL string literal (127\\.0\\.0\\.1).
func grafanaRegexEscape(v string) string {
	return strings.ReplaceAll(regexp.QuoteMeta(v), `\`, `\\`)
}

// promScalarsAt runs one-sample queries at one evaluation time, 2s ago: a
// scrape that started by then (scrape_timeout 1s) is stored whole, so the
// answers come from the same scrapes even while new ones land.
func promScalarsAt(p *promServer, queries ...string) ([]float64, error) {
	at := fmt.Sprintf("%.3f", float64(time.Now().Add(-2*time.Second).UnixMilli())/1000)
	out := make([]float64, len(queries))
	for i, q := range queries {
		status, body, err := httpGet("http://" + p.addr + "/api/v1/query?time=" + at + "&query=" + url.QueryEscape(q))
		if err != nil {
			return nil, err
		}
		var resp promQueryResponse
		if err := json.Unmarshal(body, &resp); err != nil || resp.Status != "success" || len(resp.Data.Result) != 1 {
			return nil, fmt.Errorf("%s at %s: status %d: %s", q, at, status, truncate(body))
		}
		out[i] = float64(resp.Data.Result[0].Value)
	}
	return out, nil
}

// promValues runs an instant query and returns its sample values.
func promValues(p *promServer, q string) ([]float64, error) {
	v, err := promQuery(p, q)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(v))
	for i, s := range v {
		out[i] = float64(s.Value)
	}
	return out, nil
}

var spaces = regexp.MustCompile(`\s+`)

func oneLine(s string) string { return strings.TrimSpace(spaces.ReplaceAllString(s, " ")) }

// panelTable renders results as the test prints them; partial names the
// panels whose data covers only part of the traffic, allNodes (per-node
// runs) those that ignore the selected node; mode is "" or the variables
// set, as the header shows them.
func panelTable(title, input, mode string, rs []panelResult, partial map[string]partialPanel, allNodes map[string]string) string {
	var sb strings.Builder
	filled := 0
	for _, r := range rs {
		if r.ok() {
			filled++
		}
	}
	fmt.Fprintf(&sb, "%s, fed %s%s: %d/%d panels with data\n", title, input, mode, filled, len(rs))
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "row\tpanel\tseries\tper query\t")
	for _, r := range rs {
		total := 0
		var per []string
		for i, n := range r.series {
			total += n
			per = append(per, fmt.Sprintf("%s=%d", r.panel.targets[i].RefID, n))
		}
		name := r.panel.name()
		if len(r.repeats) > 0 {
			name += fmt.Sprintf(" ×%d ($%s)", len(r.repeats), r.panel.repeat)
		}
		var marks []string
		if !r.ok() {
			marks = append(marks, "NO DATA")
		} else if _, ok := partial[r.panel.name()]; ok {
			marks = append(marks, "PARTIAL")
		}
		if _, ok := allNodes[r.panel.name()]; ok {
			marks = append(marks, "ALL NODES")
		}
		mark := strings.Join(marks, ", ")
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.panel.row, name, total, strings.Join(per, " "), mark)
	}
	_ = tw.Flush()
	return sb.String()
}

// ---------------------------------------------------------------------------
// Traffic: waves of gateway-shaped requests, sent the whole time

// feed sends wave i of a gateway's traffic.
type feed func(i int) error

// runFeed sends a wave every 250ms until stopped (at most maxWaves) and
// returns the stop function, which reports the first error.
func runFeed(t *testing.T, f feed) func() error {
	t.Helper()
	const maxWaves = 720 // 3 minutes: a bound, never reached by a passing run
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		var first error
		for i := 0; i < maxWaves; i++ {
			if err := f(i); err != nil && first == nil {
				first = fmt.Errorf("wave %d: %w", i, err)
			}
			select {
			case <-stop:
				done <- first
				return
			case <-tick.C:
			}
		}
		done <- first
	}()
	var once sync.Once
	var err error
	stopFn := func() error {
		once.Do(func() {
			close(stop)
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { _ = stopFn() })
	return stopFn
}

// postLogs posts one access-log batch and wants every entry accepted.
func postLogs(u, contentType string, body []byte, entries int) error {
	resp, err := httpClient.Post(u, contentType, strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var got struct{ Accepted, Rejected int }
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 || got.Accepted != entries {
		return fmt.Errorf("POST %s: status %d, %+v (%v), want %d accepted", u, resp.StatusCode, got, err, entries)
	}
	return nil
}

// kongRequest is one request through Kong: route and service names, the
// answer, and Kong's latencies (proxyMS -1: no upstream answered).
type kongRequest struct {
	route, path, service, host, consumer, method, source string
	status, reqSize, respSize                            int
	kongMS, proxyMS                                      int
}

// kongWave is one wave of Kong traffic: three services, four routes, two
// consumers, answers from the upstream and from Kong itself: a key-auth 401
// (never proxied: latencies.proxy -1) and a 502 after the upstream refused
// the connection (proxied: Kong sets KONG_WAITING_TIME on its error path,
// kong/init.lua).
func kongWave(i int) []kongRequest {
	v := func(base, spread, step int) int { return base + (i*step)%spread }
	return []kongRequest{
		{"orders", "/orders", "orders-service", "orders.internal", "alice", "GET", "upstream", 200, v(180, 40, 7), v(2400, 900, 37), v(1, 6, 1), v(30, 400, 13)},
		{"orders", "/orders", "orders-service", "orders.internal", "", "POST", "upstream", 201, v(900, 300, 11), v(350, 50, 3), v(2, 8, 3), v(60, 700, 29)},
		{"orders", "/orders", "orders-service", "orders.internal", "bob", "GET", "kong", 502, v(170, 30, 5), 320, v(1, 3, 1), v(2, 10, 1)},
		{"users", "/users", "users-service", "users.internal", "bob", "GET", "upstream", 200, v(150, 20, 3), v(1200, 600, 17), v(1, 9, 2), v(20, 150, 7)},
		{"users-by-id", "/users/~", "users-service", "users.internal", "alice", "GET", "upstream", 404, 160, 210, v(1, 4, 1), v(8, 40, 3)},
		{"login", "/login", "auth-service", "auth.internal", "", "POST", "kong", 401, v(300, 60, 9), 96, v(1, 3, 1), -1},
	}
}

// json is the request as Kong's http-log serializes it (docs/gateways.md
// §1d, Kong 3.9).
func (k kongRequest) json(i int) map[string]any {
	started := time.Now().UnixMilli()
	requestMS := k.kongMS + max(k.proxyMS, 0) + 1
	e := map[string]any{
		"request": map[string]any{"method": k.method, "uri": k.path, "url": "http://gw.example.com:8000" + k.path,
			"querystring": map[string]any{}, "headers": map[string]any{"host": "gw.example.com", "accept": "*/*"}, "size": k.reqSize},
		"response":     map[string]any{"status": k.status, "size": k.respSize, "headers": map[string]any{"content-type": "application/json"}},
		"route":        map[string]any{"id": "id-" + k.route, "name": k.route, "paths": []string{k.path}, "protocols": []string{"http", "https"}},
		"service":      map[string]any{"id": "id-" + k.service, "name": k.service, "host": k.host, "port": 8080, "protocol": "http"},
		"latencies":    map[string]any{"kong": k.kongMS, "proxy": k.proxyMS, "request": requestMS, "receive": 0},
		"upstream_uri": k.path, "upstream_status": "", "source": k.source, "workspace": "0dc6f45b-8f8d-40d2-a504-473544ee190b",
		"workspace_name": "default", "client_ip": "192.168.65.1", "started_at": started,
	}
	if k.consumer != "" {
		e["consumer"] = map[string]any{"id": "id-" + k.consumer, "username": k.consumer}
	}
	if k.proxyMS >= 0 {
		e["tries"] = []any{map[string]any{"ip": "10.0.1.11", "port": 8080, "balancer_start": started, "balancer_latency": 0}}
		e["upstream_status"] = fmt.Sprint(k.status)
	}
	return e
}

// kongLogFeed posts each wave as one http-log batch (queue.max_batch_size >
// 1), plus a request no route matched every fourth wave (Kong's plugin
// counts nothing for it, nor does the collector).
func kongLogFeed(col *collector) feed {
	return func(i int) error {
		var batch []any
		for _, r := range kongWave(i) {
			batch = append(batch, r.json(i))
		}
		if i%4 == 0 {
			nr := kongRequest{path: "/nowhere", method: "GET", source: "kong", status: 404, reqSize: 120, respSize: 140, kongMS: 0, proxyMS: -1}.json(i)
			delete(nr, "route")
			delete(nr, "service")
			batch = append(batch, nr)
		}
		body, _ := json.Marshal(batch)
		return postLogs("http://"+col.httpAddr+"/kong/http-log", "application/json", body, len(batch))
	}
}

// kongSpanFeed sends each wave as Kong ≥ 3.4 traces over OTLP/HTTP
// protobuf: root `kong` (SERVER) with http.route (the route's first path),
// `kong.router`, and `kong.balancer` (CLIENT) for the upstream try, whose
// net.peer.name is the service host. Spans carry no sizes and no consumer.
func kongSpanFeed(t *testing.T, col *collector) feed {
	return kongSpanFeedFrom(t, col, kongResource(newUUIDString()))
}

// kongSpanFeedFrom is kongSpanFeed from one Kong node: res is its resource.
func kongSpanFeedFrom(t *testing.T, col *collector, res *resource.Resource) feed {
	tp := newHTTPTracerProvider(t, col.httpAddr, res)
	tracer := tp.Tracer("kong-internal", trace.WithInstrumentationVersion("0.1.0"))
	return func(i int) error {
		now := time.Now()
		for _, r := range kongWave(i) {
			total := time.Duration(r.kongMS+max(r.proxyMS, 0)+1) * time.Millisecond
			start := now.Add(-total)
			ctx, root := tracer.Start(context.Background(), "kong", trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start),
				trace.WithAttributes(
					attribute.String("http.method", r.method), attribute.String("http.url", "http://gw.example.com"+r.path),
					attribute.String("http.host", "gw.example.com"), attribute.String("http.scheme", "http"),
					attribute.String("http.flavor", "1.1"), attribute.String("http.client_ip", "192.168.65.1"),
					attribute.String("net.peer.ip", "192.168.65.1"), attribute.String("kong.request.id", randomHex(16))))
			_, router := tracer.Start(ctx, "kong.router", trace.WithTimestamp(start))
			router.End(trace.WithTimestamp(start.Add(time.Duration(r.kongMS) * time.Millisecond / 2)))
			if r.proxyMS >= 0 {
				bStart := start.Add(time.Duration(r.kongMS) * time.Millisecond)
				_, b := tracer.Start(ctx, "kong.balancer", trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(bStart),
					trace.WithAttributes(attribute.Float64("try_count", 1), attribute.String("net.peer.ip", "10.0.1.11"),
						attribute.Float64("net.peer.port", 8080), attribute.String("net.peer.name", r.host)))
				if r.status == 502 {
					b.SetAttributes(attribute.Int("http.status_code", 502))
					b.SetStatus(codes.Error, "")
				}
				b.End(trace.WithTimestamp(bStart.Add(time.Duration(r.proxyMS) * time.Millisecond)))
			}
			root.SetAttributes(attribute.Int("http.status_code", r.status), attribute.String("http.route", r.path))
			root.End(trace.WithTimestamp(now))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return tp.ForceFlush(ctx)
	}
}

// apisixRequest is one request through APISIX (ids as the prometheus plugin
// labels them without prefer_name). upstreamMS -1: APISIX answered itself.
type apisixRequest struct {
	routeID, routeName, uri, serviceID, serviceName, consumer, method, node string
	status, reqSize, respSize                                               int
	latencyMS, upstreamMS                                                   float64
}

// apisixWave: three routes on two services and one without a service, two
// consumers, two upstream nodes, a key-auth 401 answered by APISIX and, every
// fourth wave, a request no route matched.
func apisixWave(i int) []apisixRequest {
	v := func(base, spread, step int) float64 { return float64(base+(i*step)%spread) + 0.25 }
	n := func(base, spread, step int) int { return base + (i*step)%spread }
	return []apisixRequest{
		{"r-orders", "orders", "/orders/*", "s-orders", "orders-service", "alice", "GET", "10.0.1.11", 200, n(180, 40, 7), n(2400, 900, 37), v(40, 400, 13), v(35, 380, 13)},
		{"r-orders", "orders", "/orders/*", "s-orders", "orders-service", "", "POST", "10.0.1.12", 201, n(900, 300, 11), n(350, 50, 3), v(70, 700, 29), v(62, 650, 29)},
		{"r-orders", "orders", "/orders/*", "s-orders", "orders-service", "bob", "GET", "10.0.1.12", 502, n(170, 30, 5), 320, v(3000, 50, 1), v(2998, 50, 1)},
		{"r-users", "users", "/users/*", "s-users", "users-service", "bob", "GET", "10.0.2.21", 200, n(150, 20, 3), n(1200, 600, 17), v(25, 150, 7), v(22, 140, 7)},
		{"r-status", "status", "/status", "", "", "", "GET", "10.0.3.31", 200, 140, 90, v(3, 10, 1), v(2, 8, 1)},
		{"r-login", "login", "/login", "s-users", "users-service", "", "POST", "", 401, n(300, 60, 9), 96, v(1, 3, 1), -1},
	}
}

// json is the request in http-logger's default log format (docs/gateways.md
// §2d, APISIX 3.18).
func (a apisixRequest) json(hostname string) map[string]any {
	path := strings.TrimSuffix(a.uri, "/*")
	e := map[string]any{
		"request": map[string]any{"method": a.method, "uri": path + "/42", "url": "http://gw.example.com:9080" + path + "/42",
			"querystring": map[string]any{}, "headers": map[string]any{"host": "gw.example.com"}, "size": a.reqSize},
		"response":   map[string]any{"status": a.status, "size": a.respSize, "headers": map[string]any{"server": "APISIX/3.18.0"}},
		"server":     map[string]any{"hostname": hostname, "version": "3.18.0"},
		"route_id":   a.routeID,
		"service_id": a.serviceID,
		"client_ip":  "192.168.65.1", "start_time": time.Now().UnixMilli(),
		"latency": a.latencyMS,
	}
	if a.upstreamMS >= 0 {
		e["upstream"] = a.node + ":8080"
		e["upstream_latency"] = a.upstreamMS
		e["apisix_latency"] = max(0, a.latencyMS-a.upstreamMS)
	} else {
		e["apisix_latency"] = a.latencyMS
	}
	if a.consumer != "" {
		e["consumer"] = map[string]any{"username": a.consumer}
	}
	return e
}

// apisixLogFeed posts each wave as one http-logger batch (batch_max_size >
// 1, concat_method json).
func apisixLogFeed(col *collector) feed {
	return apisixLogFeedFrom(col, "apisix-0")
}

// apisixLogFeedFrom is apisixLogFeed from one APISIX node: hostname is its
// server.hostname.
func apisixLogFeedFrom(col *collector, hostname string) feed {
	return func(i int) error {
		batch := apisixLogBatch(i, hostname)
		body, _ := json.Marshal(batch)
		return postLogs("http://"+col.httpAddr+"/apisix/http-logger", "application/json", body, len(batch))
	}
}

// apisixLogBatch is wave i as http-logger entries.
func apisixLogBatch(i int, hostname string) []any {
	var batch []any
	for _, r := range apisixWave(i) {
		batch = append(batch, r.json(hostname))
	}
	if i%4 == 0 { // a route miss, logged by a global-rule http-logger
		miss := apisixRequest{routeID: "no-matched", serviceID: "gw.example.com", method: "GET", uri: "/nowhere", status: 404, reqSize: 120, respSize: 230, latencyMS: 0.5, upstreamMS: -1}.json(hostname)
		batch = append(batch, miss)
	}
	return batch
}

// apisixSpanFeed sends each wave as APISIX ≥ 3.17 root spans (scope
// opentelemetry-lua, docs/gateways.md §2a): route and service ids and
// names, http.route, the client status and apisix.response_source. Spans
// carry no sizes, no consumer, no upstream node and no upstream time.
func apisixSpanFeed(t *testing.T, col *collector) feed {
	tp := newHTTPTracerProvider(t, col.httpAddr, apisixResource())
	tracer := tp.Tracer("opentelemetry-lua")
	return func(i int) error {
		now := time.Now()
		for _, r := range apisixWave(i) {
			src := "upstream"
			if r.upstreamMS < 0 {
				src = "apisix"
			}
			attrs := []attribute.KeyValue{
				attribute.String("net.host.name", "gw.example.com"), attribute.String("http.method", r.method),
				attribute.String("http.request.method", r.method), attribute.String("http.scheme", "http"),
				attribute.String("http.target", strings.TrimSuffix(r.uri, "/*")+"/42"), attribute.String("http.user_agent", "curl/8.5.0"),
				attribute.String("apisix.route_id", r.routeID), attribute.String("apisix.route_name", r.routeName),
				attribute.String("http.route", r.uri),
				attribute.Int("http.status_code", r.status), attribute.Int("http.response.status_code", r.status),
				attribute.String("apisix.response_source", src),
			}
			if r.serviceID != "" {
				attrs = append(attrs, attribute.String("apisix.service_id", r.serviceID), attribute.String("apisix.service_name", r.serviceName))
			}
			start := now.Add(-time.Duration(r.latencyMS * float64(time.Millisecond)))
			_, span := tracer.Start(context.Background(), r.method+" "+r.uri, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithTimestamp(start), trace.WithAttributes(attrs...))
			if r.status >= 500 {
				span.SetStatus(codes.Error, fmt.Sprintf("%s error: %d", src, r.status))
			}
			span.End(trace.WithTimestamp(now))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return tp.ForceFlush(ctx)
	}
}

// perNodeFeed sends wave i from each reporting node, reporter j's feed
// j+1 times, so no two nodes send the same amount; requests(i) is the
// number of requests in wave i.
func perNodeFeed(s *dashboardStack, feeds []feed, requests func(i int) int) feed {
	return func(i int) error {
		for j, f := range feeds {
			for range j + 1 {
				if err := f(i); err != nil {
					return err
				}
				s.sent[s.reporters[j]].Add(int64(requests(i)))
			}
		}
		return nil
	}
}

// kongNodeSpanFeed: each Kong node sends its spans with its scrape address
// as service.instance.id, which node_label keeps as `instance`.
func kongNodeSpanFeed(t *testing.T, s *dashboardStack) feed {
	var feeds []feed
	for _, node := range s.reporters {
		feeds = append(feeds, kongSpanFeedFrom(t, s.col, kongResource(node)))
	}
	return perNodeFeed(s, feeds, func(i int) int { return len(kongWave(i)) })
}

// apisixNodeLogFeed: each APISIX node logs with its scrape address as
// server.hostname, which node_label keeps as `instance`.
func apisixNodeLogFeed(t *testing.T, s *dashboardStack) feed {
	var feeds []feed
	for _, node := range s.reporters {
		feeds = append(feeds, apisixLogFeedFrom(s.col, node))
	}
	return perNodeFeed(s, feeds, func(i int) int { return len(apisixLogBatch(i, "")) })
}

// ---------------------------------------------------------------------------
// The runs

// dashboardStack is a collector with a gateway's profile, the gateway's node
// stand-ins and a Prometheus scraping both, as docs/dashboards.md sets
// them up.
type dashboardStack struct {
	col   *collector
	prom  *promServer
	nodes []*gatewayNode
	// Per-node runs: the gateway nodes that report requests (their node
	// identity in the input) and how many requests each has sent so far.
	reporters []string
	sent      map[string]*atomic.Int64
}

// withNodeLabel turns on the receiver's node_label: instance.
func withNodeLabel(cfg string) string {
	return strings.Replace(cfg, "    flush_interval: 1s\n", "    flush_interval: 1s\n    node_label: instance\n", 1)
}

// setReporters names the per-node runs' reporting nodes.
func (s *dashboardStack) setReporters(nodes ...string) {
	s.reporters = nodes
	s.sent = map[string]*atomic.Int64{}
	for _, n := range nodes {
		s.sent[n] = new(atomic.Int64)
	}
}

// startKongStack: two Kong nodes (their Status API /metrics) and the
// collector polling Kong's Admin API for upstream health, with the node's
// address as the poller's instance.
func startKongStack(t *testing.T) *dashboardStack {
	t.Helper()
	return startKongStackWith(t, false)
}

// startKongNodeStack is startKongStack with node_label: instance, both Kong
// nodes reporting.
func startKongNodeStack(t *testing.T) *dashboardStack {
	t.Helper()
	s := startKongStackWith(t, true)
	s.setReporters(s.nodes[0].addr, s.nodes[1].addr)
	return s
}

func startKongStackWith(t *testing.T, nodeLabel bool) *dashboardStack {
	t.Helper()
	nodes := []*gatewayNode{
		startGatewayNode(t, "/metrics", kongNodeMetrics("0a4d4c6e-81d3-4b7a-9f5e-1f2d3c4b5a60", 1301)),
		startGatewayNode(t, "/metrics", kongNodeMetrics("7c9e2f10-5b6a-4e3d-8c1b-2a3f4e5d6c70", 1298)),
	}
	health := `    health:
      kong:
        - endpoint: ` + fakeKongHealthAdmin(t) + `
          instance: ` + nodes[0].addr + `
          interval: 1s
`
	cfg := strings.Replace(profileConfig("kong"), "    flush_interval: 1s\n", "    flush_interval: 1s\n"+health, 1)
	if nodeLabel {
		cfg = withNodeLabel(cfg)
	}
	col := startCollectorWith(t, cfg, 4)
	prom := startPrometheusWith(t, fmt.Sprintf(plainScrapeConfig, col.promAddr)+`  - job_name: kong
    static_configs:
      - targets: ['`+nodes[0].addr+`', '`+nodes[1].addr+`']
`)
	return &dashboardStack{col: col, prom: prom, nodes: nodes}
}

// startAPISIXStack: one APISIX node (its export server). APISIX's shared
// dict panel divides `on (name)`, which only one node per query can satisfy
// (see docs/dashboards.md).
func startAPISIXStack(t *testing.T) *dashboardStack {
	t.Helper()
	return startAPISIXStackWith(t, false)
}

// startAPISIXNodeStack is startAPISIXStack with node_label: instance and two
// reporting nodes: the node stand-in, and apisix-1:9091, a node whose export
// server this Prometheus does not scrape (the shared dict panel allows one
// scraped APISIX node), so its requests are there for the stand-in's
// `$instance` to leave out.
func startAPISIXNodeStack(t *testing.T) *dashboardStack {
	t.Helper()
	s := startAPISIXStackWith(t, true)
	s.setReporters(s.nodes[0].addr, "apisix-1:9091")
	return s
}

func startAPISIXStackWith(t *testing.T, nodeLabel bool) *dashboardStack {
	t.Helper()
	nodes := []*gatewayNode{startGatewayNode(t, "/apisix/prometheus/metrics", apisixNodeMetrics("apisix-0"))}
	cfg := profileConfig("apisix")
	if nodeLabel {
		cfg = withNodeLabel(cfg)
	}
	col := startCollectorWith(t, cfg, 4)
	prom := startPrometheusWith(t, fmt.Sprintf(plainScrapeConfig, col.promAddr)+`  - job_name: apisix
    metrics_path: /apisix/prometheus/metrics
    static_configs:
      - targets: ['`+nodes[0].addr+`']
`)
	return &dashboardStack{col: col, prom: prom, nodes: nodes}
}

// dashboardRun is one dashboard fed one kind of input.
type dashboardRun struct {
	file      string
	panels    int // panels with queries in the dashboard
	input     string
	start     func(t *testing.T) *dashboardStack
	feed      func(t *testing.T, s *dashboardStack) feed
	wantEmpty map[string]string // panel → why this input cannot fill it
	partial   map[string]partialPanel
	// perNode: $instance is one node (the instance variable's first value),
	// and allNodes the panels that ignore it (panel → why).
	perNode  bool
	allNodes map[string]string
}

// partialPanel is a panel an input fills only in part: some requests are
// missing from it, or lack the label it groups by.
type partialPanel struct {
	why string
	// check proves it on the running stack and returns the figures.
	check func(p *promServer) (string, error)
}

var (
	kongDashboard   = "kong-official.json"
	apisixDashboard = "apisix-grafana-dashboard.json"
	// Kong spans carry no request or response size (docs/gateways.md §1a).
	kongSpanGaps = map[string]string{
		"Total Bandwidth":           "kong_bandwidth_bytes: Kong's spans carry no request or response size",
		"Egress per service/route":  "kong_bandwidth_bytes: Kong's spans carry no request or response size",
		"Ingress per service/route": "kong_bandwidth_bytes: Kong's spans carry no request or response size",
	}
	// APISIX spans carry no sizes and no upstream time (docs/gateways.md §2a).
	apisixSpanGaps = map[string]string{
		"Total Bandwidth":           "apisix_bandwidth: APISIX's spans carry no request or response size",
		"Ingress per service/route": "apisix_bandwidth: APISIX's spans carry no request or response size",
		"Egress per service/route":  "apisix_bandwidth: APISIX's spans carry no request or response size",
		"Upstream Latency":          `apisix_http_latency{type="upstream"}: APISIX's spans carry no upstream response time`,
	}
	// A Kong root span names no service: the collector takes it from the
	// balancer span's net.peer.name (docs/gateways.md §1a), so a request Kong
	// answered itself (a key-auth 401: no balancer try) has service "".
	kongSpanServiceCheck = func(p *promServer) (string, error) {
		v, err := promScalarsAt(p,
			`sum(kong_http_requests_total{service=""})`,
			`sum(kong_http_requests_total{service="",source="kong"})`,
			`sum(kong_request_latency_ms_count{service=""})`)
		if err != nil {
			return "", err
		}
		msg := fmt.Sprintf(`%v requests with service="", %v of them answered by Kong; %v request-latency observations with service=""`, v[0], v[1], v[2])
		if v[0] <= 0 || v[0] != v[1] || v[2] != v[0] {
			return "", fmt.Errorf(`want every Kong-answered request, and only those, under service="": %s`, msg)
		}
		return msg, nil
	}
	kongSpanPartialWhy = `requests Kong answered itself (no kong.balancer span) have service="": the root span names no service`
	kongSpanPartial    = map[string]partialPanel{
		"RPS per route/service ($service)":     {kongSpanPartialWhy, kongSpanServiceCheck},
		"RPS per route/service by status code": {kongSpanPartialWhy, kongSpanServiceCheck},
		"Kong Proxy Latency per Service":       {kongSpanPartialWhy, kongSpanServiceCheck},
		"Request Time per service":             {kongSpanPartialWhy, kongSpanServiceCheck},
	}
	// Without the upstream time, APISIX's added latency (request − upstream)
	// is known only for requests APISIX answered itself (a 401, a route
	// miss), where it is the whole request; the collector observes nothing
	// for proxied ones rather than the total (event.go GatewayMS).
	apisixSpanPartial = map[string]partialPanel{
		"APISIX Latency": {
			why: `apisix_http_latency{type="apisix"} holds only the requests APISIX answered itself: for proxied ones spans carry no upstream time to subtract`,
			check: func(p *promServer) (string, error) {
				v, err := promScalarsAt(p,
					`sum(apisix_http_latency_count{type="apisix"})`,
					`sum(apisix_http_status{response_source="apisix"})`,
					`sum(apisix_http_latency_count{type="request"})`)
				if err != nil {
					return "", err
				}
				msg := fmt.Sprintf("type=\"apisix\" observed %v requests, APISIX answered %v itself, of %v requests", v[0], v[1], v[2])
				if v[0] <= 0 || v[0] != v[1] || v[0] >= v[2] {
					return "", fmt.Errorf("want the APISIX-answered requests only: %s", msg)
				}
				return msg, nil
			},
		},
	}
)

// Per node, the panels whose queries ignore $instance: they show every
// node's data whichever node is selected.
var (
	kongAllNodes = map[string]string{
		"Request Time across all services":   "kong_request_latency_ms_bucket{}: the query has no instance matcher",
		"Upstream time across all services":  "kong_upstream_latency_ms_bucket{}: the query has no instance matcher",
		"Ingress per service/route":          `kong_bandwidth_bytes{direction="ingress", service=~"$service"}: filters by $service only`,
		"Healthy status":                     "kong_upstream_target_health: filters by $upstream only (upstream health is the cluster's, polled from one Admin API)",
		`(untitled table in row "Upstream")`: "kong_upstream_target_health: filters by $upstream only (upstream health is the cluster's, polled from one Admin API)",
	}
	apisixLatencyAllNodes = `apisix_http_latency: filters by $node, APISIX's upstream node, not by $instance`
	apisixAllNodes        = map[string]string{
		"Request Latency":                      apisixLatencyAllNodes,
		"APISIX Latency":                       apisixLatencyAllNodes,
		"Upstream Latency":                     apisixLatencyAllNodes,
		"Etcd modify indexes":                  "apisix_etcd_modify_indexes: the query has no instance matcher",
		"Nginx shared dict free space percent": "apisix_shared_dict_*_bytes: the query has no instance matcher",
	}
)

func TestDashboards(t *testing.T) {
	runs := []dashboardRun{
		{kongDashboard, 23, "Kong http-log entries", startKongStack, func(t *testing.T, s *dashboardStack) feed { return kongLogFeed(s.col) }, nil, nil, false, nil},
		{kongDashboard, 23, "Kong spans (OTLP)", startKongStack, func(t *testing.T, s *dashboardStack) feed { return kongSpanFeed(t, s.col) }, kongSpanGaps, kongSpanPartial, false, nil},
		{apisixDashboard, 17, "APISIX http-logger entries", startAPISIXStack, func(t *testing.T, s *dashboardStack) feed { return apisixLogFeed(s.col) }, nil, nil, false, nil},
		{apisixDashboard, 17, "APISIX spans (OTLP)", startAPISIXStack, func(t *testing.T, s *dashboardStack) feed { return apisixSpanFeed(t, s.col) }, apisixSpanGaps, apisixSpanPartial, false, nil},
		// Per node. Kong's http-log names no node, so Kong is fed spans.
		{kongDashboard, 23, "Kong spans (OTLP)", startKongNodeStack, kongNodeSpanFeed, kongSpanGaps, kongSpanPartial, true, kongAllNodes},
		{apisixDashboard, 17, "APISIX http-logger entries", startAPISIXNodeStack, apisixNodeLogFeed, nil, nil, true, apisixAllNodes},
	}
	for _, run := range runs {
		name := strings.TrimSuffix(run.file, ".json") + "/" + strings.Fields(run.input)[1]
		if run.perNode {
			name += "/per-node"
		}
		t.Run(name, func(t *testing.T) {
			runDashboard(t, run)
		})
	}
}

// runDashboard starts the stack, feeds it, waits until every panel the input
// can fill has data, lets the others have three more scrapes, and checks
// that exactly the expected panels are empty, printing the table.
func runDashboard(t *testing.T, run dashboardRun) {
	title, panels, variables := loadDashboard(t, run.file)
	if len(panels) != run.panels {
		t.Fatalf("%s: %d panels with queries, want %d", run.file, len(panels), run.panels)
	}
	if run.perNode {
		if got, want := panelsIgnoring(panels, "instance"), mapKeys(run.allNodes); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("%s: the panels ignoring $instance are %q, the test lists %q", run.file, got, want)
		}
	}
	for _, name := range append(append(mapKeys(run.wantEmpty), mapKeys(run.partial)...), mapKeys(run.allNodes)...) {
		found := false
		for _, p := range panels {
			found = found || p.name() == name
		}
		if !found {
			t.Fatalf("the test names panel %q, which %s has not", name, run.file)
		}
	}
	stack := run.start(t)
	stop := runFeed(t, run.feed(t, stack))

	// set: in per-node runs, $instance at the instance variable's first
	// value, once it has one.
	var set map[string]string
	choose := func() bool {
		if !run.perNode {
			return true
		}
		values, err := labelValues(stack.prom, variables["instance"])
		if err != nil || len(values) == 0 {
			return false
		}
		set = map[string]string{"instance": values[0]}
		return true
	}
	var rs []panelResult
	deadline := time.Now().Add(convergeTimeout)
	for {
		if !choose() {
			if time.Now().After(deadline) {
				t.Fatalf("$instance = %s has no values", variables["instance"])
			}
			time.Sleep(time.Second)
			continue
		}
		rs = evalPanels(stack.prom, panels, set)
		pending := 0
		for _, r := range rs {
			if _, gap := run.wantEmpty[r.panel.name()]; !r.ok() && !gap {
				pending++
			}
		}
		if pending == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	time.Sleep(3 * time.Second) // three more scrapes and flushes for the panels still empty
	choose()
	rs = evalPanels(stack.prom, panels, set)
	if err := stop(); err != nil {
		t.Errorf("traffic: %v", err)
	}

	mode := ""
	if run.perNode {
		mode = fmt.Sprintf(", node_label: instance, $instance = %s", set["instance"])
	}
	t.Logf("\n%s", panelTable(title, run.input, mode, rs, run.partial, run.allNodes))
	for _, r := range rs {
		why, gap := run.wantEmpty[r.panel.name()]
		switch {
		case !r.ok() && !gap:
			t.Errorf("panel %q (row %q) has no data:\n  %s", r.panel.name(), r.panel.row, strings.Join(r.missing, "\n  "))
		case r.ok() && gap:
			t.Errorf("panel %q has data, but %s is listed as unable to fill it (%s): update the list", r.panel.name(), run.input, why)
		case gap:
			t.Logf("as expected, %s cannot fill %q: %s", run.input, r.panel.name(), why)
		}
		if pp, ok := run.partial[r.panel.name()]; ok {
			figures, err := pp.check(stack.prom)
			if err != nil {
				t.Errorf("panel %q: %v", r.panel.name(), err)
			} else {
				t.Logf("as expected, %s fills %q only in part: %s (%s)", run.input, r.panel.name(), pp.why, figures)
			}
		}
		if why, ok := run.allNodes[r.panel.name()]; ok && r.ok() {
			t.Logf("as expected, %q shows every node's data, not only $instance's: %s", r.panel.name(), why)
		}
	}
	if run.perNode {
		checkPerNode(t, stack, panels, set["instance"])
	}
}

// panelsIgnoring names the panels with a query that does not use the
// variable and that do not repeat by it, sorted.
func panelsIgnoring(panels []dashPanel, variable string) []string {
	var out []string
	for _, p := range panels {
		if p.repeat == variable {
			continue
		}
		for _, tg := range p.targets {
			uses := false
			for _, m := range grafanaVariable.FindAllStringSubmatch(tg.Expr, -1) {
				uses = uses || m[1]+m[2]+m[3] == variable
			}
			if !uses {
				out = append(out, p.name())
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// rateCall is a rate over a range: rate(x[1m]) → x.
var rateCall = regexp.MustCompile(`\b(?:i?rate|increase)\((.+)\[[^\]]+\]\)`)

// checkPerNode holds a per-node run to what the selection means: the
// selected node is a scraped node that reports requests; the per-request
// series carry exactly the reporting nodes as `instance`, with the
// collector label beside it; and once the traffic has stopped, the "Total
// requests per second (RPS)" panel's counter (its query without the rate)
// for each node is that node's requests, the nodes having sent different
// amounts, and for All the sum.
func checkPerNode(t *testing.T, stack *dashboardStack, panels []dashPanel, selected string) {
	t.Helper()
	scraped, reports := false, false
	for _, n := range stack.nodes {
		scraped = scraped || n.addr == selected
	}
	for _, n := range stack.reporters {
		reports = reports || n == selected
	}
	if !scraped || !reports {
		t.Errorf("$instance = %q: want a scraped node stand-in that reports requests (reporters %q)", selected, stack.reporters)
	}
	var expr string
	for _, p := range panels {
		if p.name() == "Total requests per second (RPS)" {
			expr = p.targets[0].Expr
		}
	}
	counter := rateCall.ReplaceAllString(expr, "$1")
	metric := regexp.MustCompile(`\w+\{`).FindString(counter)
	if expr == "" || counter == expr || metric == "" {
		t.Fatalf("no counter in the total RPS panel's query %q", expr)
	}
	metric = strings.TrimSuffix(metric, "{")
	want := append([]string(nil), stack.reporters...)
	sort.Strings(want)
	eventually(t, 10*time.Second, "the reporting nodes as "+metric+"'s instance, the collector label beside it", func() (bool, string) {
		instances, err := labelValues(stack.prom, "label_values("+metric+", instance)")
		collectors, err2 := labelValues(stack.prom, "label_values("+metric+", collector)")
		state := fmt.Sprintf("instance %q (%v), collector %q (%v)", instances, err, collectors, err2)
		return strings.Join(instances, " ") == strings.Join(want, " ") && strings.Join(collectors, " ") == "e2e-0", state
	})
	var queries []string
	var sent []int64
	var total int64
	for _, n := range stack.reporters {
		q, err := substitute(counter, map[string]string{"instance": grafanaRegexEscape(n)})
		if err != nil {
			t.Fatal(err)
		}
		queries = append(queries, q)
		sent = append(sent, stack.sent[n].Load())
		total += sent[len(sent)-1]
	}
	all, _ := substitute(counter, nil)
	queries = append(queries, all)
	sent = append(sent, total)
	var figures []string
	eventually(t, 10*time.Second, "each node's requests in its own series", func() (bool, string) {
		got, err := promScalarsAt(stack.prom, queries...)
		if err != nil {
			return false, err.Error()
		}
		figures = figures[:0]
		ok := true
		for i, q := range queries {
			name := "All"
			if i < len(stack.reporters) {
				name = stack.reporters[i]
				if name == selected {
					name += " (selected)"
				}
			}
			figures = append(figures, fmt.Sprintf("%s: %s = %v, sent %d", name, q, got[i], sent[i]))
			ok = ok && got[i] == float64(sent[i])
		}
		return ok, strings.Join(figures, "\n")
	})
	if sent[0] == sent[1] || sent[0] == 0 {
		t.Errorf("the nodes sent %v requests: want different non-zero amounts", sent)
	}
	t.Logf("per node, the total RPS panel's counter counts each node's requests only:\n  %s", strings.Join(figures, "\n  "))
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
