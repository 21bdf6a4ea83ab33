package gateway

import (
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/kong/*.prom from the current output")

// TestKongPushThroughPipeline maps a push of Kong 3.14's opentelemetry
// plugin (testdata/kong/kong-3.14-push.json: every family Kong documents
// for its request, node, upstream-health and AI metrics, shaped as Kong's
// docs show its debug output, §1e) and serves it through the cumulative
// processor and the promstream exporter. The lines Kong's Prometheus
// plugin would print for the same requests must be there with the same
// values (§1c); the whole scrape is pinned by a golden file.
func TestKongPushThroughPipeline(t *testing.T) {
	md := readMetricsJSON(t, "testdata/kong/kong-3.14-push.json")
	out, st := mapAll(md, MapKongMetrics, nil)
	// 4 request points (one without a route), 5 latency and size
	// histograms, 4+7+2+1+2+2+2 health and node gauges, 2 AI histograms,
	// 4 token sums (one of 0), 1 cost: 3+5+20+2+3+1 mapped; 2 points (a
	// license gauge, a WebSocket count) have no family in Kong's plugin.
	wantOutcomes := map[PointOutcome]int{PointMapped: 34, PointNoRoute: 1, PointZero: 1, PointUnmapped: 2}
	for o, n := range st.Points {
		if n != wantOutcomes[PointOutcome(o)] {
			t.Errorf("%s: %d points, want %d (err %v)", PointOutcome(o), n, wantOutcomes[PointOutcome(o)], st.Err)
		}
	}
	// The latency histograms came without bounds: written with +Inf only.
	if st.Coarse != 3 {
		t.Errorf("coarse histograms %d, want the 3 latency families", st.Coarse)
	}
	p := newPromPipeline(t, "kong")
	p.push(t, out)
	got := p.scrape(t)
	golden := "testdata/kong/kong-3.14.prom"
	if *updateGolden {
		if err := os.WriteFile(golden, []byte(got), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update-golden to create it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("scrape differs from %s (regenerate with -update-golden):\n--- got\n%s\n--- want\n%s", golden, got, want)
	}
	// Kong's Prometheus plugin's lines for the same traffic (§1c, §6): the
	// requests of both methods in one series, the 401 as source kong, the
	// 404 without a route nowhere; sizes as bandwidth; ms sums.
	_, fams := parseExposition(t, got, "job", "instance")
	for _, want := range []string{
		`kong_http_requests_total{service="example-service",route="example-route",code="200",source="service",workspace="default",consumer=""} 7`,
		`kong_http_requests_total{service="example-service",route="example-route",code="401",source="kong",workspace="default",consumer=""} 1`,
		`kong_request_latency_ms_bucket{service="example-service",route="example-route",workspace="default",le="+Inf"} 8`,
		`kong_request_latency_ms_sum{service="example-service",route="example-route",workspace="default"} 835`,
		`kong_request_latency_ms_count{service="example-service",route="example-route",workspace="default"} 8`,
		`kong_kong_latency_ms_sum{service="example-service",route="example-route",workspace="default"} 21`,
		`kong_upstream_latency_ms_count{service="example-service",route="example-route",workspace="default"} 7`,
		`kong_bandwidth_bytes{service="example-service",route="example-route",direction="ingress",workspace="default",consumer=""} 1048`,
		`kong_bandwidth_bytes{service="example-service",route="example-route",direction="egress",workspace="default",consumer=""} 8032`,
		`kong_upstream_target_health{upstream="example-upstream",target="httpbin:80",address="10.0.0.7:80",state="healthy",subsystem="http"} 1`,
		`kong_upstream_target_health{upstream="example-upstream",target="httpbin:80",address="10.0.0.7:80",state="dns_error",subsystem="http"} 0`,
		`kong_nginx_connections_total{node_id="0b6f9c1e-5a57-4b8e-9a55-2f6a1d7b8c90",subsystem="http",state="total"} 105`,
		`kong_nginx_timers{state="running"} 257`,
		`kong_datastore_reachable 1`,
		`kong_memory_lua_shared_dict_bytes{node_id="0b6f9c1e-5a57-4b8e-9a55-2f6a1d7b8c90",shared_dict="kong",kong_subsystem="http"} 45056`,
		`kong_memory_lua_shared_dict_total_bytes{node_id="0b6f9c1e-5a57-4b8e-9a55-2f6a1d7b8c90",shared_dict="kong_locks",kong_subsystem="http"} 8388608`,
		`kong_memory_workers_lua_vms_bytes{node_id="0b6f9c1e-5a57-4b8e-9a55-2f6a1d7b8c90",pid="2732",kong_subsystem="http"} 67684407`,
		`kong_ai_llm_requests_total{ai_provider="openai",ai_model="gpt-4o",cache_status="",vector_db="",embeddings_provider="",embeddings_model="",workspace="default"} 2`,
		`kong_ai_llm_tokens_total{ai_provider="openai",ai_model="gpt-4o",cache_status="",vector_db="",embeddings_provider="",embeddings_model="",token_type="prompt_tokens",workspace="default"} 120`,
		`kong_ai_llm_tokens_total{ai_provider="openai",ai_model="gpt-4o",cache_status="",vector_db="",embeddings_provider="",embeddings_model="",token_type="total_tokens",workspace="default"} 200`,
		`kong_ai_llm_cost_total{ai_provider="openai",ai_model="gpt-4o",cache_status="",vector_db="",embeddings_provider="",embeddings_model="",workspace="default"} 0.0042`,
		// Pushed with bounds equal to Kong's AI buckets (in s): every
		// bucket exact.
		`kong_ai_llm_provider_latency_ms_bucket{ai_provider="openai",ai_model="gpt-4o",cache_status="",vector_db="",embeddings_provider="",embeddings_model="",workspace="default",le="1000"} 0`,
		`kong_ai_llm_provider_latency_ms_bucket{ai_provider="openai",ai_model="gpt-4o",cache_status="",vector_db="",embeddings_provider="",embeddings_model="",workspace="default",le="1500"} 1`,
		`kong_ai_llm_provider_latency_ms_bucket{ai_provider="openai",ai_model="gpt-4o",cache_status="",vector_db="",embeddings_provider="",embeddings_model="",workspace="default",le="2000"} 2`,
	} {
		w := parseSample(t, want)
		if !hasLine(fams, w) {
			t.Errorf("no line %s", want)
		}
	}
	for name, f := range fams {
		for _, l := range f.lines {
			if strings.HasSuffix(l.name, "_bucket") && strings.HasPrefix(name, "kong_") && name != "kong_ai_llm_provider_latency_ms" {
				if l.labels[len(l.labels)-1][1] != "+Inf" {
					t.Errorf("%s: a bucket Kong pushed no bound for: %s", name, l.raw)
				}
			}
			for _, kv := range l.labels {
				if kv[0] == "http_request_method" || kv[0] == "kong_route_name" {
					t.Errorf("an OTel attribute left as a label: %s", l.raw)
				}
			}
		}
	}
}

// hasLine reports whether the exposition holds w, labels in w's order.
func hasLine(fams map[string]*expoFamily, w expoLine) bool {
	for _, f := range fams {
		for _, l := range f.lines {
			if l.canonical() == w.canonical() {
				return true
			}
		}
	}
	return false
}

// kongPoint is one point of a Kong metric for the table tests.
type kongPoint struct {
	attrs []string // key, value pairs; a value "#N" is an int N
	value float64
	// histogram
	count  uint64
	sum    float64
	bounds []float64
	counts []uint64
}

func kongPush(name, unit string, typ pmetric.MetricType, delta bool, pts ...kongPoint) pmetric.ResourceMetrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.instance.id", "node-1")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(kongScope)
	m := sm.Metrics().AppendEmpty()
	m.SetName(name)
	m.SetUnit(unit)
	for _, pt := range pts {
		var attrs pcommon.Map
		switch typ {
		case pmetric.MetricTypeSum:
			s := m.Sum()
			if m.Type() != pmetric.MetricTypeSum {
				s = m.SetEmptySum()
				s.SetIsMonotonic(true)
				s.SetAggregationTemporality(temporality(delta))
			}
			p := s.DataPoints().AppendEmpty()
			if pt.value == float64(int64(pt.value)) {
				p.SetIntValue(int64(pt.value))
			} else {
				p.SetDoubleValue(pt.value)
			}
			p.SetStartTimestamp(1)
			p.SetTimestamp(2)
			attrs = p.Attributes()
		case pmetric.MetricTypeGauge:
			g := m.Gauge()
			if m.Type() != pmetric.MetricTypeGauge {
				g = m.SetEmptyGauge()
			}
			p := g.DataPoints().AppendEmpty()
			p.SetIntValue(int64(pt.value))
			p.SetTimestamp(2)
			attrs = p.Attributes()
		case pmetric.MetricTypeHistogram:
			h := m.Histogram()
			if m.Type() != pmetric.MetricTypeHistogram {
				h = m.SetEmptyHistogram()
				h.SetAggregationTemporality(temporality(delta))
			}
			p := h.DataPoints().AppendEmpty()
			p.SetCount(pt.count)
			p.SetSum(pt.sum)
			p.ExplicitBounds().FromRaw(pt.bounds)
			p.BucketCounts().FromRaw(pt.counts)
			p.SetStartTimestamp(1)
			p.SetTimestamp(2)
			attrs = p.Attributes()
		}
		for i := 0; i+1 < len(pt.attrs); i += 2 {
			if v, ok := strings.CutPrefix(pt.attrs[i+1], "#"); ok {
				n := 0
				for _, c := range v {
					n = n*10 + int(c-'0')
				}
				attrs.PutInt(pt.attrs[i], int64(n))
				continue
			}
			attrs.PutStr(pt.attrs[i], pt.attrs[i+1])
		}
	}
	return rm
}

var kongRouteAttrs = []string{"kong.service.name", "svc", "kong.route.name", "r1", "kong.workspace.name", "default"}

func with(base []string, kv ...string) []string { return append(append([]string(nil), base...), kv...) }

func TestMapKongMetrics(t *testing.T) {
	secondsAt := func(ms ...float64) []float64 {
		out := make([]float64, len(ms))
		for i, v := range ms {
			out[i] = v / 1000
		}
		return out
	}
	long := strings.Repeat("r", DefaultMaxPushLabelBytes+1)
	for _, tc := range []struct {
		name   string
		push   pmetric.ResourceMetrics
		want   []string
		count  map[PointOutcome]int
		coarse int
		err    string
	}{
		{name: "request counts of two methods are one series, in Kong's label order",
			push: kongPush("http.server.request.count", "{request}", pmetric.MetricTypeSum, false,
				kongPoint{attrs: with(kongRouteAttrs, "http.request.method", "GET", "http.response.status_code", "#200", "kong.response.source", "upstream"), value: 5},
				kongPoint{attrs: with(kongRouteAttrs, "http.request.method", "POST", "http.response.status_code", "#200", "kong.response.source", "upstream"), value: 2}),
			want: []string{"kong_http_requests_total{service=svc,route=r1,code=200,source=service,workspace=default,consumer=} 7"}},
		{name: "Kong 3.13.0.0's kong.response.status_code, and source kong",
			push: kongPush("http.server.request.count", "{request}", pmetric.MetricTypeSum, true,
				kongPoint{attrs: with(kongRouteAttrs, "kong.response.status_code", "#503", "kong.response.source", "kong", "kong.auth.consumer.name", "alice"), value: 1}),
			want: []string{"kong_http_requests_total{service=svc,route=r1,code=503,source=kong,workspace=default,consumer=alice} 1"}},
		{name: "no route: not counted, as Kong's plugin",
			push: kongPush("http.server.request.count", "{request}", pmetric.MetricTypeSum, false,
				kongPoint{attrs: []string{"http.response.status_code", "#404"}, value: 3}),
			count: map[PointOutcome]int{PointNoRoute: 1}},
		{name: "latency in s, no bounds (Kong 3.14): ms _sum and _count, +Inf only",
			push: kongPush("kong.latency.total", "s", pmetric.MetricTypeHistogram, false,
				kongPoint{attrs: kongRouteAttrs, count: 4, sum: 0.5}),
			want:   []string{"kong_request_latency_ms{service=svc,route=r1,workspace=default} count=4 bounds=[] counts=[4] sum=500"},
			coarse: 1},
		{name: "latency pushed with Kong's own buckets (in s): every bucket exact",
			push: kongPush("kong.latency.upstream", "s", pmetric.MetricTypeHistogram, false,
				kongPoint{attrs: kongRouteAttrs, count: 3, sum: 0.3, bounds: secondsAt(KongUpstreamBounds...), counts: []uint64{1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}}),
			want: []string{"kong_upstream_latency_ms{service=svc,route=r1,workspace=default} count=3 bounds=[25 50 80 100 250 400 700 1000 2000 5000 10000 30000 60000] counts=[1 0 0 1 0 0 0 0 0 0 0 0 0 1] sum=300"}},
		{name: "latency pushed with the semconv buckets: Kong's buckets that coincide are exact, the others left out",
			push: kongPush("kong.latency.upstream", "s", pmetric.MetricTypeHistogram, false,
				kongPoint{attrs: kongRouteAttrs, count: 10, sum: 2, bounds: []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10},
					counts: []uint64{1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 1}}),
			// 25, 50, 100, 250, 1000, 5000, 10000 ms coincide; 80, 400,
			// 700, 2000, 30000, 60000 do not.
			want:   []string{"kong_upstream_latency_ms{service=svc,route=r1,workspace=default} count=10 bounds=[25 50 100 250 1000 5000 10000] counts=[3 1 2 1 2 0 0 1] sum=2000"},
			coarse: 1},
		{name: "two points of one series with different buckets: only the buckets both have",
			push: kongPush("kong.latency.total", "ms", pmetric.MetricTypeHistogram, true,
				kongPoint{attrs: with(kongRouteAttrs, "kong.auth.consumer.name", "a"), count: 2, sum: 30, bounds: []float64{25, 50}, counts: []uint64{1, 1, 0}},
				kongPoint{attrs: with(kongRouteAttrs, "kong.auth.consumer.name", "b"), count: 2, sum: 90, bounds: []float64{50, 80}, counts: []uint64{1, 1, 0}}),
			want:   []string{"kong_request_latency_ms{service=svc,route=r1,workspace=default} count=4 bounds=[50] counts=[3 1] sum=120"},
			coarse: 1},
		{name: "bandwidth is a size histogram's sum; 0 is not written",
			push: kongPush("http.server.response.size", "By", pmetric.MetricTypeHistogram, false,
				kongPoint{attrs: kongRouteAttrs, count: 2, sum: 2048},
				kongPoint{attrs: with(kongRouteAttrs, "kong.route.name", "r2"), count: 1, sum: 0}),
			want:  []string{"kong_bandwidth_bytes{service=svc,route=r1,direction=egress,workspace=default,consumer=} 2048"},
			count: map[PointOutcome]int{PointZero: 1}},
		{name: "tokens: OTel's token types are Kong's, token_type before workspace",
			push: kongPush("gen_ai.client.token.usage", "{token}", pmetric.MetricTypeSum, false,
				kongPoint{attrs: []string{"gen_ai.provider.name", "openai", "gen_ai.request.model", "m", "gen_ai.token.type", "output", "kong.workspace.name", "w"}, value: 9},
				kongPoint{attrs: []string{"gen_ai.provider.name", "openai", "gen_ai.request.model", "m", "gen_ai.token.type", "reasoning", "kong.workspace.name", "w"}, value: 9}),
			want:  []string{"kong_ai_llm_tokens_total{ai_provider=openai,ai_model=m,cache_status=,vector_db=,embeddings_provider=,embeddings_model=,token_type=completion_tokens,workspace=w} 9"},
			count: map[PointOutcome]int{PointUnmapped: 1}},
		{name: "node gauges take Kong's node id from the resource",
			push: kongPush("kong.shared_dict.size", "By", pmetric.MetricTypeGauge, false,
				kongPoint{attrs: []string{"kong.shared_dict.name", "kong"}, value: 5242880}),
			want: []string{"kong_memory_lua_shared_dict_total_bytes{node_id=node-1,shared_dict=kong,kong_subsystem=http} 5242880"}},
		{name: "a metric Kong's plugin has no family for",
			push:  kongPush("kong.websocket.server.active_connections", "{request}", pmetric.MetricTypeGauge, false, kongPoint{value: 3}),
			count: map[PointOutcome]int{PointUnmapped: 1}},
		{name: "a gauge where Kong sends a counter",
			push:  kongPush("http.server.request.count", "{request}", pmetric.MetricTypeGauge, false, kongPoint{attrs: kongRouteAttrs, value: 3}),
			count: map[PointOutcome]int{PointInvalid: 1},
			err:   `metric "http.server.request.count": a gauge where Kong sends a monotonic sum`},
		{name: "a latency whose unit is no duration",
			push:  kongPush("kong.latency.total", "By", pmetric.MetricTypeHistogram, false, kongPoint{attrs: kongRouteAttrs, count: 1, sum: 1}),
			count: map[PointOutcome]int{PointInvalid: 1},
			err:   `metric "kong.latency.total": unit "By" is not a duration`},
		{name: "a route name too long drops the point",
			push:  kongPush("http.server.request.count", "{request}", pmetric.MetricTypeSum, false, kongPoint{attrs: with(kongRouteAttrs, "kong.route.name", long), value: 1}),
			count: map[PointOutcome]int{PointLabelTooLong: 1},
			err:   `metric "http.server.request.count": label route longer than 1024 bytes`},
		{name: "delta and cumulative points of one series",
			push: func() pmetric.ResourceMetrics {
				rm := kongPush("http.server.request.count", "{request}", pmetric.MetricTypeSum, false, kongPoint{attrs: kongRouteAttrs, value: 1})
				m := rm.ScopeMetrics().At(0).Metrics().AppendEmpty()
				kongPush("http.server.request.count", "{request}", pmetric.MetricTypeSum, true, kongPoint{attrs: kongRouteAttrs, value: 1}).ScopeMetrics().At(0).Metrics().At(0).CopyTo(m)
				return rm
			}(),
			want:  []string{"kong_http_requests_total{service=svc,route=r1,code=,source=kong,workspace=default,consumer=} 1"},
			count: map[PointOutcome]int{PointConflict: 1},
			err:   `metric "http.server.request.count": delta and cumulative points for one series`},
		{name: "histogram buckets that do not add up",
			push:  kongPush("kong.latency.total", "s", pmetric.MetricTypeHistogram, false, kongPoint{attrs: kongRouteAttrs, count: 5, bounds: []float64{1}, counts: []uint64{1, 1}}),
			count: map[PointOutcome]int{PointInvalid: 1},
			err:   `metric "kong.latency.total": bucket_counts add up to 2, count is 5`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := pmetric.NewMetrics()
			var st MetricsStats
			MapKongMetrics(out, tc.push, nil, &st)
			got := seriesOf(out)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("series\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			for o := range pointOutcomes {
				if o != PointMapped && st.Points[o] != tc.count[PointOutcome(o)] {
					t.Errorf("%s: %d points, want %d", PointOutcome(o), st.Points[o], tc.count[PointOutcome(o)])
				}
			}
			if st.Coarse != tc.coarse {
				t.Errorf("coarse %d, want %d", st.Coarse, tc.coarse)
			}
			switch {
			case tc.err == "" && st.Err != nil:
				t.Errorf("err %v", st.Err)
			case tc.err != "" && (st.Err == nil || st.Err.Error() != tc.err):
				t.Errorf("err %v, want %s", st.Err, tc.err)
			}
		})
	}
}

// TestKongFamiliesOfRules: every rule names a family with as many labels as
// the family has, and no label name twice.
func TestKongFamiliesOfRules(t *testing.T) {
	for name, r := range kongRules {
		fam := KongFamilies[r.fam]
		if len(r.labels) != len(fam.Labels) {
			t.Errorf("%s → %s: %d label sources for %d labels", name, fam.Name, len(r.labels), len(fam.Labels))
		}
		if r.route >= 0 && fam.Labels[r.route] != "route" {
			t.Errorf("%s: route index %d is label %s", name, r.route, fam.Labels[r.route])
		}
		if len(fam.Labels) > kongMaxLabels || len(fam.Bounds) > kongMaxBounds {
			t.Errorf("%s: over the fixed sizes", fam.Name)
		}
		if (r.take == takeHistogram) != (fam.Type == KongHistogram) {
			t.Errorf("%s → %s: take %d for type %d", name, fam.Name, r.take, fam.Type)
		}
	}
}

func TestKongClaims(t *testing.T) {
	now := time.Unix(1700000000, 0)
	reqs := KongFamilySet(0).With(KongHTTPRequests)
	lat := KongFamilySet(0).With(KongRequestLatency)
	var nilClaims *KongClaims
	if nilClaims.Superseded("n1", reqs, now) != 0 {
		t.Fatal("a nil table supersedes")
	}
	c := NewKongClaims(3*time.Minute, 2)
	if c.Superseded("n1", reqs|lat, now) != 0 {
		t.Fatal("claims before any push")
	}
	push := kongPush("http.server.request.count", "{request}", pmetric.MetricTypeSum, false, kongPoint{attrs: kongRouteAttrs, value: 1})
	set := KongPushedFamilies(push)
	if set != reqs {
		t.Fatalf("pushed families %b, want requests only", set)
	}
	c.Claim("n1", set, now)
	for _, tc := range []struct {
		name string
		node string
		want KongFamilySet
		at   time.Time
		got  KongFamilySet
	}{
		{name: "the pushing node's spans: requests superseded, latency still counted", node: "n1", want: reqs | lat, at: now.Add(time.Minute), got: reqs},
		{name: "another node's spans: nothing superseded", node: "n2", want: reqs | lat, at: now.Add(time.Minute), got: 0},
		{name: "log entries (no node): superseded by any node's push", node: "", want: reqs | lat, at: now.Add(time.Minute), got: reqs},
		{name: "after the ttl without a push, spans count again", node: "n1", want: reqs, at: now.Add(4 * time.Minute), got: 0},
		{name: "logs too", node: "", want: reqs, at: now.Add(4 * time.Minute), got: 0},
	} {
		if got := c.Superseded(tc.node, tc.want, tc.at); got != tc.got {
			t.Errorf("%s: %b, want %b", tc.name, got, tc.got)
		}
	}
	// Past maxNodes, a new node's claim is receiver-wide: every unknown
	// node is superseded (bounded memory over exactness, documented).
	c.Claim("n2", lat, now)
	c.Claim("n3", lat, now)
	if got := c.Superseded("n9", lat, now); got != lat {
		t.Errorf("unknown node with a full table: %b, want %b", got, lat)
	}
	// Expired nodes make room.
	later := now.Add(10 * time.Minute)
	c.Claim("n4", lat, later)
	if got := c.Superseded("n9", lat, later); got != 0 {
		t.Errorf("after the sweep an unknown node is superseded: %b", got)
	}
}
