package e2e

// Stand-ins for what no collector can see: the gateway process's own state
// (nginx connections, shared dicts, Lua VMs, etcd). In production these come
// from the gateway's own Prometheus plugin with its per-request metrics
// switched off (docs/dashboards.md); here a small HTTP server
// serves those families with the plugins' exact names, labels and label
// order, and Prometheus scrapes it as its own target, so every series gets
// the gateway node's address as `instance`, as a real node's would.
//
// Kong: kong/plugins/prometheus/exporter.lua (init() and metric_data(),
// Kong/kong master 22246ef2) and the prometheus library's
// kong_nginx_metric_errors_total. APISIX: apisix/plugins/prometheus/
// exporter.lua (http_init() and collect(), apache/apisix master f519a0f0)
// and nginx-lua-prometheus's apisix_nginx_metric_errors_total.

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// gatewayNode serves one gateway node's node-local families.
type gatewayNode struct {
	addr    string // host:port, the node's `instance` in Prometheus
	scrapes atomic.Int64
	render  func(n int64) string // the exposition at the n-th scrape
}

// startGatewayNode listens on a loopback port and serves render's output on
// path (Kong's Status API: /metrics; APISIX's export server:
// /apisix/prometheus/metrics).
func startGatewayNode(t *testing.T, path string, render func(n int64) string) *gatewayNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gatewayNode{addr: ln.Addr().String(), render: render}
	mux := http.NewServeMux()
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		n := g.scrapes.Add(1)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte(g.render(n)))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return g
}

// family writes one metric family in the text format: HELP, TYPE, samples.
func family(sb *strings.Builder, name, typ, help string, samples ...string) {
	fmt.Fprintf(sb, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	for _, s := range samples {
		sb.WriteString(name)
		sb.WriteString(s)
		sb.WriteByte('\n')
	}
}

// kongSharedDicts are the lua_shared_dicts of Kong's nginx template
// (kong/templates/nginx_kong.lua) with their default sizes, plus the
// prometheus plugin's own.
var kongSharedDicts = []struct {
	name string
	size int64
}{
	{"kong", 5 << 20}, {"kong_cluster_events", 5 << 20}, {"kong_core_db_cache", 128 << 20},
	{"kong_core_db_cache_miss", 12 << 20}, {"kong_db_cache", 128 << 20}, {"kong_db_cache_miss", 12 << 20},
	{"kong_healthchecks", 5 << 20}, {"kong_locks", 8 << 20}, {"kong_rate_limiting_counters", 12 << 20},
	{"kong_secrets", 5 << 20}, {"prometheus_metrics", 5 << 20},
}

// kongNodeMetrics is what a Kong 3.9 node's Status API /metrics shows with
// the prometheus plugin enabled and status_code_metrics, latency_metrics,
// bandwidth_metrics, upstream_health_metrics and ai_metrics all false: the
// families exporter.lua sets whatever the options (traditional mode, http
// subsystem only, two workers). Kong sorts the families by name.
func kongNodeMetrics(nodeID string, firstPID int) func(n int64) string {
	return func(n int64) string {
		var sb strings.Builder
		family(&sb, "kong_datastore_reachable", "gauge", "Datastore reachable from Kong, 0 is unreachable", " 1")
		var used, total []string
		for i, d := range kongSharedDicts {
			l := fmt.Sprintf(`{node_id=%q,shared_dict=%q,kong_subsystem="http"}`, nodeID, d.name)
			used = append(used, fmt.Sprintf("%s %d", l, int64(40960+4096*((int(n)+i)%16))))
			total = append(total, fmt.Sprintf("%s %d", l, d.size))
		}
		family(&sb, "kong_memory_lua_shared_dict_bytes", "gauge", "Allocated slabs in bytes in a shared_dict", used...)
		family(&sb, "kong_memory_lua_shared_dict_total_bytes", "gauge", "Total capacity in bytes of a shared_dict", total...)
		family(&sb, "kong_memory_workers_lua_vms_bytes", "gauge", "Allocated bytes in worker Lua VM",
			fmt.Sprintf(`{node_id=%q,pid="%d",kong_subsystem="http"} %d`, nodeID, firstPID, 52<<20+n*1024),
			fmt.Sprintf(`{node_id=%q,pid="%d",kong_subsystem="http"} %d`, nodeID, firstPID+1, 49<<20+n*512))
		// kong.nginx.get_statistics(): counters since start and current gauges.
		accepted := 100 + 3*n
		family(&sb, "kong_nginx_connections_total", "gauge", "Number of connections by subsystem",
			fmt.Sprintf(`{node_id=%q,subsystem="http",state="accepted"} %d`, nodeID, accepted),
			fmt.Sprintf(`{node_id=%q,subsystem="http",state="active"} %d`, nodeID, 7+n%3),
			fmt.Sprintf(`{node_id=%q,subsystem="http",state="handled"} %d`, nodeID, accepted),
			fmt.Sprintf(`{node_id=%q,subsystem="http",state="reading"} %d`, nodeID, 0),
			fmt.Sprintf(`{node_id=%q,subsystem="http",state="total"} %d`, nodeID, 4*accepted),
			fmt.Sprintf(`{node_id=%q,subsystem="http",state="waiting"} %d`, nodeID, 5+n%3),
			fmt.Sprintf(`{node_id=%q,subsystem="http",state="writing"} %d`, nodeID, 2))
		family(&sb, "kong_nginx_metric_errors_total", "counter", "Number of nginx-lua-prometheus errors", " 0")
		family(&sb, "kong_nginx_requests_total", "gauge", "Number of requests total",
			fmt.Sprintf(`{node_id=%q,subsystem="http"} %d`, nodeID, 4*accepted))
		family(&sb, "kong_nginx_timers", "gauge", "Number of nginx timers", `{state="pending"} 4`, `{state="running"} 41`)
		family(&sb, "kong_node_info", "gauge", "Kong Node metadata information", fmt.Sprintf(`{node_id=%q,version="3.9.1"} 1`, nodeID))
		return sb.String()
	}
}

// apisixSharedDicts are APISIX 3.18's default lua_shared_dicts
// (apisix/cli/config.lua, nginx_config.http.lua_shared_dict and meta), in
// the exposition's order.
var apisixSharedDicts = []struct {
	name string
	size int64
}{
	{"balancer-ewma", 10 << 20}, {"balancer-ewma-last-touched-at", 10 << 20}, {"balancer-ewma-locks", 10 << 20},
	{"internal-status", 10 << 20}, {"lrucache-lock", 10 << 20}, {"plugin-limit-conn", 10 << 20},
	{"plugin-limit-count", 10 << 20}, {"plugin-limit-req", 10 << 20}, {"prometheus-cache", 10 << 20},
	{"prometheus-metrics", 128 << 20}, {"upstream-healthcheck", 10 << 20}, {"worker-events", 10 << 20},
}

// apisixNodeMetrics is what an APISIX 3.18 node's export server
// (plugin_attr.prometheus.export_addr) shows when the prometheus plugin is
// loaded but enabled on no route, service or global rule: collect()'s node
// families only, never apisix_http_status / _latency / _bandwidth (those are
// counted in the plugin's log phase). etcd config provider.
func apisixNodeMetrics(hostname string) func(n int64) string {
	return func(n int64) string {
		var sb strings.Builder
		family(&sb, "apisix_etcd_modify_indexes", "gauge", "Etcd modify index for APISIX keys",
			`{key="consumers"} 0`, `{key="global_rules"} 0`, `{key="max_modify_index"} 41`, `{key="prev_index"} 38`,
			`{key="protos"} 0`, `{key="routes"} 41`, `{key="services"} 27`, `{key="ssls"} 0`,
			`{key="stream_routes"} 0`, `{key="upstreams"} 33`, fmt.Sprintf(`{key="x_etcd_index"} %d`, 44+n/10))
		family(&sb, "apisix_etcd_reachable", "gauge", "Config server etcd reachable from APISIX, 0 is unreachable", " 1")
		accepted := 200 + 5*n
		family(&sb, "apisix_http_requests_total", "gauge", "The total number of client requests since APISIX started",
			fmt.Sprintf(" %d", 6*accepted))
		family(&sb, "apisix_nginx_http_current_connections", "gauge", "Number of HTTP connections",
			fmt.Sprintf(`{state="accepted"} %d`, accepted), fmt.Sprintf(`{state="active"} %d`, 9+n%4),
			fmt.Sprintf(`{state="handled"} %d`, accepted), `{state="reading"} 0`,
			fmt.Sprintf(`{state="waiting"} %d`, 6+n%4), `{state="writing"} 3`)
		family(&sb, "apisix_nginx_metric_errors_total", "counter", "Number of nginx-lua-prometheus errors", " 0")
		family(&sb, "apisix_node_info", "gauge", "Info of APISIX node", fmt.Sprintf(`{hostname=%q,version="3.18.0"} 1`, hostname))
		var capacity, free []string
		for i, d := range apisixSharedDicts {
			capacity = append(capacity, fmt.Sprintf(`{name=%q} %d`, d.name, d.size))
			free = append(free, fmt.Sprintf(`{name=%q} %d`, d.name, d.size-int64(8192*(1+(int(n)+i)%32))))
		}
		family(&sb, "apisix_shared_dict_capacity_bytes", "gauge", "The capacity of each nginx shared DICT since APISIX start", capacity...)
		family(&sb, "apisix_shared_dict_free_space_bytes", "gauge", "The free space of each nginx shared DICT since APISIX start", free...)
		return sb.String()
	}
}

// fakeKongHealthAdmin is a small Kong Admin API (docs/gateways.md §1b) for the
// upstream-health panels: two upstreams, one healthy and one unhealthy
// address, and a target whose name no longer resolves (DNS_ERROR).
func fakeKongHealthAdmin(t *testing.T) string {
	t.Helper()
	const nodeID = `"node_id":"cbb297c0-14a9-46bc-ad91-1d0ef9b42df9"`
	target := func(up, name string, port int, health string, addrs ...string) string {
		var a []string
		for _, ip := range addrs {
			a = append(a, fmt.Sprintf(`{"ip":%q,"port":%d,"weight":100,"health":%q}`, ip, port, health))
		}
		list := "{}" // Kong encodes an empty Lua table as {}
		if len(a) > 0 {
			list = "[" + strings.Join(a, ",") + "]"
		}
		return fmt.Sprintf(`{"id":"t-%s-%s","target":"%s:%d","weight":100,"health":%q,"upstream":{"id":%q},"created_at":1700000000.123,"tags":null,`+
			`"data":{"host":%q,"port":%d,"dns":"A","nodeWeight":100,"weight":{"total":100,"unavailable":0,"available":100},"addresses":%s}}`,
			up, name, name, port, health, up, name, port, list)
	}
	pages := map[string]string{
		"/upstreams": `{"data":[{"id":"u-orders","name":"orders-upstream","algorithm":"round-robin","slots":10000,"tags":null},` +
			`{"id":"u-users","name":"users-upstream","algorithm":"round-robin","slots":10000,"tags":null}],"next":null,` + nodeID + `}`,
		"/upstreams/u-orders/health": `{"data":[` + target("u-orders", "orders-a.internal", 8080, "HEALTHY", "10.0.1.11") + `,` +
			target("u-orders", "orders-b.internal", 8080, "UNHEALTHY", "10.0.1.12") + `],"next":null,` + nodeID + `}`,
		"/upstreams/u-users/health": `{"data":[` + target("u-users", "users.internal", 8080, "HEALTHY", "10.0.2.21") + `,` +
			target("u-users", "users-old.internal", 8080, "DNS_ERROR") + `],"next":null,` + nodeID + `}`,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := pages[r.URL.Path]
		if !ok {
			http.Error(w, `{"message":"Not found"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = w.Write([]byte(body))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}
