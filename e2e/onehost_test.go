package e2e

// Three collectors on one host with the default collector identity (no
// collector_name: the host name and the receiver's port), as systemd
// instances, host-network containers or several collectors on a VM run:
// one Prometheus 2.42 scrapes all three and receives their remote writes.
// Every series stays apart, pulled and pushed alike, so the totals are
// exact, and target_info (the gateways' and the health pollers') does not
// collide. Each remote-write exporter keeps the old recipe,
// external_labels: {collector: cN}: the distribution warns that it does
// nothing, and it indeed changes nothing. A restart keeps the identity.

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// oneHostConfig is one collector's config: ports %[1]d OTLP/HTTP, %[2]d
// OTLP/gRPC, %[3]d promstream, %[4]d telemetry; %[5]s the remote-write URL,
// %[6]s the fake Kong Admin API, %[7]s the old recipe's external label.
const oneHostConfig = `receivers:
  gateway:
    protocols:
      http:
        endpoint: 127.0.0.1:%[1]d
      grpc:
        endpoint: 127.0.0.1:%[2]d
    flush_interval: 1s
    health:
      profile: kong
      report_interval: 5s
      kong:
        - endpoint: %[6]s
          instance: kong-0
          interval: 1s
processors:
  cumulative:
exporters:
  promstream:
    endpoint: 127.0.0.1:%[3]d
    without_scope_info: true
    shutdown_grace: 3s
  prometheus_remote_write:
    endpoint: %[5]s
    namespace: rw
    max_batch_request_parallelism: 1
    external_labels:
      collector: %[7]s
service:
  telemetry:
    logs:
      level: info
    metrics:
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: %[4]d
  pipelines:
    metrics:
      receivers: [gateway]
      processors: [cumulative]
      exporters: [promstream, prometheus_remote_write]
`

func TestOneHostDefaultIdentity(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	kong := newFakeKongAdminN(3)
	kong.set(1, 0, "UNHEALTHY")
	kln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ksrv := &http.Server{Handler: kong, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = ksrv.Serve(kln) }()
	t.Cleanup(func() { _ = ksrv.Close() })

	ports := freePorts(t, 3*4+1)
	promAddr := hostPort(ports[12])
	rw := "http://" + promAddr + "/api/v1/write"
	var members []*fleetMember
	var targets []string
	identity := map[string]string{} // member name → its collector label value
	for i := range 3 {
		name := "c" + strconv.Itoa(i)
		p := ports[4*i : 4*i+4]
		cfg := fmt.Sprintf(oneHostConfig, p[0], p[1], p[2], p[3], rw, "http://"+kln.Addr().String(), name)
		members = append(members, newOneHostMember(t, name, cfg, p))
		targets = append(targets, "'"+hostPort(p[2])+"'")
		identity[name] = host + ":" + strconv.Itoa(p[0]) // the documented default
	}
	prom := startPrometheusOn(t, promAddr, prometheusConfig+fmt.Sprintf(`  - job_name: otelgateway
    honor_labels: true
    static_configs:
      - targets: [%s]
`, strings.Join(targets, ", ")), "--web.enable-remote-write-receiver")
	for _, m := range members {
		m.launch(t)
	}
	for _, m := range members {
		m.waitReady(t)
	}

	// The old recipe is reported, with its fix, by each collector.
	for _, m := range members {
		warned := m.logLines("external_labels.collector does nothing")
		if len(warned) != 1 {
			t.Errorf("%s: converter warnings %q, want one", m.name, warned)
		}
	}

	// Traffic: the same Kong routes to each, in different amounts.
	want := map[string]float64{}
	total := 0
	for i, m := range members {
		n := (i + 2) * len(fleetCalls) * 10 // 240, 360, 480 requests
		for first := 0; first < n; first += 60 {
			body, counts := kongExport("kong-node-0", first, 60)
			if code, resp := httpPost(t, m.col.tracesURL(), "application/x-protobuf", body); code != http.StatusOK {
				t.Fatalf("%s: export answered %d %s", m.name, code, resp)
			}
			for ci, c := range counts {
				want[seriesKey(identity[m.name], fleetCalls[ci])] += float64(c)
			}
		}
		total += n
	}

	// Pulled and pushed: every series of every collector, exact.
	for _, name := range []string{"gateway_requests_total", "rw_gateway_requests_total"} {
		eventually(t, convergeTimeout, name+" of the three collectors in Prometheus", func() (bool, string) {
			v, err := promQuery(prom, name)
			if err != nil {
				return false, err.Error()
			}
			got := map[string]float64{}
			for _, s := range v {
				k := metricSeriesKey(s.Metric)
				if _, dup := got[k]; dup {
					return false, "two series for " + k
				}
				got[k] = float64(s.Value)
			}
			diff := diffTotals(got, want)
			return diff == "", diff
		})
	}
	var sum float64
	if v, err := promQuery(prom, `sum(rw_gateway_requests_total)`); err == nil && len(v) == 1 {
		sum = float64(v[0].Value)
	}
	if sum != float64(total) {
		t.Errorf("sum(rw_gateway_requests_total) = %v, want %d", sum, total)
	}

	// target_info, pulled and pushed: one per gateway resource and
	// collector, none colliding. The Kong Admin API the three poll
	// (job="kong", instance="kong-0") has one pulled and one pushed per
	// collector; the traffic's resource is the gateway (job="kong", no
	// instance: the otel profile counts a route across nodes), which
	// promstream gives no target_info (it needs an instance, as the
	// compatibility spec says) and remote write does, one per collector.
	// The health gauges of three pollers of one Kong stay apart likewise.
	wantHealth := len(haWant(kong))
	eventually(t, convergeTimeout, "target_info and health of the three collectors", func() (bool, string) {
		var problems []string
		for _, q := range []struct{ query, want string }{
			{`count by (__name__, instance) ({__name__=~"target_info|rw_target_info", job="kong"})`,
				"rw_target_info/kong-0=3 rw_target_info=3 target_info/kong-0=3"},
			{`count by (__name__, collector, instance) ({__name__=~"target_info|rw_target_info", job="kong"}) > 1`, ""},
			{`count by (__name__) (count by (__name__, collector) ({__name__=~"target_info|rw_target_info", job="kong"}))`,
				"rw_target_info=3 target_info=3"},
			{`count by (__name__, collector) ({__name__=~"kong_upstream_target_health|rw_kong_upstream_target_health"})`,
				healthWant(identity, wantHealth)},
		} {
			v, err := promQuery(prom, q.query)
			if err != nil {
				return false, err.Error()
			}
			if got := byNameAndLabel(v); got != q.want {
				problems = append(problems, fmt.Sprintf("%s = %q, want %q", q.query, got, q.want))
			}
		}
		return len(problems) == 0, strings.Join(problems, "\n")
	})
	var table strings.Builder
	fmt.Fprintf(&table, "\n%-4s %-22s %6s %6s %12s %17s %15s\n", "", "collector (default)", "sent", "pull", "remote write", "target_info pull", "target_info rw")
	perCollector := func(q string) map[string]float64 {
		out := map[string]float64{}
		v, err := promQuery(prom, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range v {
			out[string(s.Metric["collector"])] = float64(s.Value)
		}
		return out
	}
	pull := perCollector(`sum by (collector) (gateway_requests_total)`)
	push := perCollector(`sum by (collector) (rw_gateway_requests_total)`)
	tiPull := perCollector(`count by (collector) (target_info{job="kong"})`)
	tiPush := perCollector(`count by (collector) (rw_target_info{job="kong"})`)
	for _, m := range members {
		id := identity[m.name]
		sent := sumWhere(want, id+" ")
		fmt.Fprintf(&table, "%-4s %-22s %6.0f %6.0f %12.0f %17.0f %15.0f\n", m.name, id, sent, pull[id], push[id], tiPull[id], tiPush[id])
		if pull[id] != sent || push[id] != sent || tiPull[id] != 1 || tiPush[id] != 2 {
			t.Errorf("%s (%s): sent %v, pulled %v, pushed %v, target_info %v pulled and %v pushed (want 1 and 2)", m.name, id, sent, pull[id], push[id], tiPull[id], tiPush[id])
		}
	}
	fmt.Fprintf(&table, "%-4s %-22s %6d %6.0f %12.0f", "all", "", total, sumMap(pull), sumMap(push))
	t.Log(table.String())

	// The identity survives a restart: same config, same value.
	c1 := members[1]
	c1.terminate(t)
	c1.launch(t)
	c1.waitReady(t)
	body, _ := kongExport("kong-node-0", 0, 12)
	if code, resp := httpPost(t, c1.col.tracesURL(), "application/x-protobuf", body); code != http.StatusOK {
		t.Fatalf("c1 after the restart: export answered %d %s", code, resp)
	}
	eventually(t, convergeTimeout, "c1's series after its restart", func() (bool, string) {
		got, err := exporterSampleSet(c1.col.metricsURL())
		if err != nil {
			return false, err.Error()
		}
		values := map[string]bool{}
		for l := range got {
			if strings.HasPrefix(l, "{__name__=\"gateway_requests_total\"") {
				i := strings.Index(l, `collector="`)
				if i < 0 {
					return false, "a series without the collector label: " + l
				}
				v := l[i+len(`collector="`):]
				values[v[:strings.IndexByte(v, '"')]] = true
			}
		}
		if len(values) == 0 {
			return false, "no gateway_requests_total yet"
		}
		return len(values) == 1 && values[identity["c1"]], fmt.Sprintf("collector values %v, want only %q", values, identity["c1"])
	})
}

func sumMap(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// newOneHostMember writes a collector's config; launch starts it.
func newOneHostMember(t *testing.T, name, cfg string, ports []int) *fleetMember {
	t.Helper()
	dir := t.TempDir()
	m := &fleetMember{name: name, dir: dir, cfgPath: filepath.Join(dir, "config.yaml")}
	if err := os.WriteFile(m.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	m.col = &collector{httpAddr: hostPort(ports[0]), grpcAddr: hostPort(ports[1]), promAddr: hostPort(ports[2]), telemetryAddr: hostPort(ports[3])}
	return m
}

// byNameAndLabel writes a count-by result as "name/label=value …" sorted
// (the label being collector or instance, whichever the query kept).
func byNameAndLabel(v model.Vector) string {
	var out []string
	for _, s := range v {
		k := string(s.Metric[model.MetricNameLabel])
		for _, l := range []model.LabelName{"collector", "instance"} {
			if x, ok := s.Metric[l]; ok {
				k += "/" + string(x)
			}
		}
		out = append(out, k+"="+strconv.FormatFloat(float64(s.Value), 'f', -1, 64))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// healthWant is the per-collector health series count, pulled and pushed.
func healthWant(identity map[string]string, n int) string {
	var out []string
	for _, v := range identity {
		for _, name := range []string{"kong_upstream_target_health", "rw_kong_upstream_target_health"} {
			out = append(out, name+"/"+v+"="+strconv.Itoa(n))
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// The distribution's converter refuses a tuple_expiry shorter than the
// processor's max_stale, naming the fix; validate runs it, as a start does.
func TestDistributionRefusesLossyExpiry(t *testing.T) {
	cfg := `receivers:
  gateway:
    tuple_expiry: 1m
processors:
  cumulative:
    max_stale: 10m
exporters:
  promstream:
service:
  pipelines:
    metrics:
      receivers: [gateway]
      processors: [cumulative]
      exporters: [promstream]
`
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := validateConfig(path)
	const want = "receivers::gateway: tuple_expiry (1m0s) is shorter than processors::cumulative max_stale (10m0s)"
	if err == nil || !strings.Contains(string(out), want) || !strings.Contains(string(out), "set tuple_expiry to at least 10m0s") {
		t.Fatalf("validate: %v\n%s\nwant a refusal containing %q and its fix", err, out, want)
	}
}
