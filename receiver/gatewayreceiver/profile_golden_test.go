package gatewayreceiver

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter"
	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/processor/cumulativeprocessor"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/traffic"
)

var update = flag.Bool("update-golden", false, "rewrite testdata/golden/*.prom from the current output")

// pipeline is receiver → cumulative processor → promstream exporter, as a
// kong/apisix-profile collector runs them. The exporter uses the settings
// the README prescribes for these profiles.
type pipeline struct {
	r       *gatewayReceiver
	metrics string
}

func newPipeline(t *testing.T, profile string) *pipeline {
	t.Helper()
	ctx := context.Background()
	ecfg := promstreamexporter.NewFactory().CreateDefaultConfig().(*promstreamexporter.Config)
	addr := testutil.FreeAddr(t)
	ecfg.ServerConfig.NetAddr.Endpoint = addr
	ecfg.TranslationStrategy = "UnderscoreEscapingWithoutSuffixes"
	ecfg.WithoutScopeInfo = true
	exp, err := promstreamexporter.NewFactory().CreateMetrics(ctx, exportertest.NewNopSettings(component.MustNewType("promstream")), ecfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exp.Shutdown(context.Background()) })
	proc, err := cumulativeprocessor.NewFactory().CreateMetrics(ctx, processortest.NewNopSettings(component.MustNewType("cumulative")),
		cumulativeprocessor.NewFactory().CreateDefaultConfig(), exp)
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proc.Shutdown(context.Background()) })
	cfg := createDefaultConfig()
	cfg.Profile = profile
	cfg.CollectorLabel = "" // the plugins' own lines; identity_test.go adds the label
	r, err := newReceiver(cfg, receivertest.NewNopSettings(metadata.Type), proc)
	if err != nil {
		t.Fatal(err)
	}
	return &pipeline{r: r, metrics: "http://" + addr + "/metrics"}
}

func (p *pipeline) post(t *testing.T, path, body string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", jsonContentType)
	rec := httptest.NewRecorder()
	for _, f := range newLogFormats() {
		if f.spec.Path == path {
			p.r.http.handleLog(rec, req, f)
		}
	}
	if rec.Code != http.StatusOK {
		t.Fatalf("POST %s: %d %s", path, rec.Code, rec.Body)
	}
}

func (p *pipeline) scrape(t *testing.T) []byte {
	t.Helper()
	p.r.flusher.flush(context.Background())
	resp, err := http.Get(p.metrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, got, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update-golden to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("exposition differs from %s (regenerate with -update-golden):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// sampleLine is one sample as Prometheus stores it: the name and the label
// set, empty values dropped (Prometheus treats an empty label as absent) and
// le in canonical float form (as Prometheus ≥ 3 normalises it).
var lineRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$`)
var labelRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

func storedForm(t *testing.T, line string) (series, value string) {
	t.Helper()
	m := lineRE.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("not a sample line: %q", line)
	}
	var labels []string
	for _, l := range labelRE.FindAllStringSubmatch(m[2], -1) {
		v := l[2]
		if v == "" {
			continue
		}
		if l[1] == "le" && v != "+Inf" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("le %q", v)
			}
			v = strconv.FormatFloat(f, 'g', -1, 64)
		}
		labels = append(labels, l[1]+"="+strconv.Quote(v))
	}
	sort.Strings(labels)
	return m[1] + "{" + strings.Join(labels, ",") + "}", m[3]
}

// checkSpecLines asserts that every spec-verified line (docs/gateways.md)
// is a series of the exposition, as Prometheus stores both, with the value
// given (or any value for N).
func checkSpecLines(t *testing.T, exposition []byte, spec []string, values []string) {
	t.Helper()
	stored := map[string]string{}
	for _, line := range strings.Split(string(exposition), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		s, v := storedForm(t, line)
		stored[s] = v
	}
	for i, line := range spec {
		s, _ := storedForm(t, line)
		got, ok := stored[s]
		if !ok {
			t.Errorf("spec line %q: no series %s in the exposition", line, s)
			continue
		}
		if got != values[i] {
			t.Errorf("spec line %q: value %s, want %s", line, got, values[i])
		}
	}
}

// TestKongProfileMatchesKongExposition feeds Kong's own http-log sample
// (route example_route, service example_service) three times, plus a Kong
// exit on the same route and an event without a route (not counted, as in
// Kong), through the kong profile, the cumulative processor and the
// promstream exporter; the exposition must hold the lines Kong's Prometheus
// plugin writes (docs/gateways.md §1c), with the sample's values.
func TestKongProfileMatchesKongExposition(t *testing.T) {
	p := newPipeline(t, traffic.ProfileKong)
	sample, err := os.ReadFile("testdata/kong-3.8-http-log.json")
	if err != nil {
		t.Fatal(err)
	}
	p.post(t, kongLogURLPath, "["+string(sample)+","+string(sample)+"]")
	p.post(t, kongLogURLPath, string(sample))
	exit := strings.Replace(strings.Replace(string(sample), `"source": "upstream"`, `"source": "kong"`, 1), `"status": 200`, `"status": 401`, 1)
	exit = strings.Replace(exit, `"proxy": 171`, `"proxy": -1`, 1)
	p.post(t, kongLogURLPath, exit)
	p.post(t, kongLogURLPath, `{"response":{"status":404},"request":{"method":"GET","size":10},"latencies":{"request":1,"kong":1,"proxy":-1},"source":"kong"}`)
	got := p.scrape(t)
	checkGolden(t, "kong_http_log.prom", got)
	// §1c's spec lines, with this traffic's label values and counts.
	checkSpecLines(t, got, []string{
		`kong_http_requests_total{service="example_service",route="example_route",code="200",source="service",workspace="default",consumer=""} 3`,
		`kong_http_requests_total{service="example_service",route="example_route",code="401",source="kong",workspace="default",consumer=""} 1`,
		`kong_bandwidth_bytes{service="example_service",route="example_route",direction="egress",workspace="default",consumer=""} N`,
		`kong_bandwidth_bytes{service="example_service",route="example_route",direction="ingress",workspace="default",consumer=""} N`,
		`kong_kong_latency_ms_bucket{service="example_service",route="example_route",workspace="default",le="+Inf"} N`,
		`kong_kong_latency_ms_bucket{service="example_service",route="example_route",workspace="default",le="1"} N`,
		`kong_upstream_latency_ms_bucket{service="example_service",route="example_route",workspace="default",le="+Inf"} N`,
		`kong_upstream_latency_ms_bucket{service="example_service",route="example_route",workspace="default",le="250"} N`,
		`kong_upstream_latency_ms_bucket{service="example_service",route="example_route",workspace="default",le="100"} N`,
		`kong_request_latency_ms_bucket{service="example_service",route="example_route",workspace="default",le="+Inf"} N`,
	}, []string{"3", "1", "39928", "556", "4", "4", "3", "3", "0", "4"})
}

// TestAPISIXProfileMatchesAPISIXExposition: APISIX's http-logger sample
// twice (array and NDJSON) through the apisix profile (§2c).
func TestAPISIXProfileMatchesAPISIXExposition(t *testing.T) {
	p := newPipeline(t, traffic.ProfileAPISIX)
	sample, err := os.ReadFile("testdata/apisix-3.9-http-logger.json")
	if err != nil {
		t.Fatal(err)
	}
	p.post(t, apisixLogURLPath, string(sample))
	one := strings.Join(strings.Fields(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(string(sample)), "["), "]")), "")
	p.post(t, apisixLogURLPath, one+"\n"+one)
	got := p.scrape(t)
	checkGolden(t, "apisix_http_logger.prom", got)
	checkSpecLines(t, got, []string{
		`apisix_http_status{code="200",route="http-logger-route",matched_uri="",matched_host="",service="",consumer="",node="3.213.1.197",request_type="traditional_http",request_llm_model="",llm_model="",response_source="upstream"} N`,
		`apisix_bandwidth{type="egress",route="http-logger-route",service="",consumer="",node="3.213.1.197",request_type="traditional_http",request_llm_model="",llm_model=""} 1420`,
		`apisix_http_latency_bucket{type="upstream",route="http-logger-route",service="",consumer="",node="3.213.1.197",request_type="traditional_http",request_llm_model="",llm_model="",le="2000"} N`,
		`apisix_http_latency_bucket{type="upstream",route="http-logger-route",service="",consumer="",node="3.213.1.197",request_type="traditional_http",request_llm_model="",llm_model="",le="1000"} N`,
		`apisix_http_latency_bucket{type="apisix",route="http-logger-route",service="",consumer="",node="3.213.1.197",request_type="traditional_http",request_llm_model="",llm_model="",le="100"} N`,
	}, []string{"3", "1851", "3", "0", "3"})
}

// TestKongProfileAIFromHTTPLog: an ai-proxy request logged by Kong ≥ 3.8
// (ai.proxy meta and usage, internal/gateway/kong_ai.go) feeds the kong
// profile's AI families, labelled and valued as Kong's Prometheus plugin
// labels them (docs/gateways.md §1c). The entry is posted alone and in a
// batch beside a plain entry, which adds no AI series.
//
// Provider latency is meta.llm_latency (1530 ms), what Kong observes, not
// the upstream latency (latencies.proxy, 1532 ms): both fall in the same
// bucket, so _sum tells them apart (2 × 1530).
func TestKongProfileAIFromHTTPLog(t *testing.T) {
	p := newPipeline(t, traffic.ProfileKong)
	ai, err := os.ReadFile("testdata/kong-3.8-http-log-ai-proxy.json")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := os.ReadFile("testdata/kong-3.8-http-log.json")
	if err != nil {
		t.Fatal(err)
	}
	p.post(t, kongLogURLPath, string(ai))
	p.post(t, kongLogURLPath, "["+string(ai)+","+string(plain)+"]")
	got := p.scrape(t)
	// ai_model is meta.request_model; token_type sits before workspace;
	// provider latency uses Kong's AI buckets (250 … 60000); cost and
	// total_tokens are counted too (docs/gateways.md §1c).
	const labels = `ai_provider="openai",ai_model="gpt-3.5-turbo",cache_status="",vector_db="",embeddings_provider="",embeddings_model="",workspace="default"`
	const tokenLabels = `ai_provider="openai",ai_model="gpt-3.5-turbo",cache_status="",vector_db="",embeddings_provider="",embeddings_model="",token_type="%s",workspace="default"`
	checkSpecLines(t, got, []string{
		`kong_ai_llm_requests_total{` + labels + `} N`,
		`kong_ai_llm_cost_total{` + labels + `} N`,
		`kong_ai_llm_tokens_total{` + strings.Replace(tokenLabels, "%s", "prompt_tokens", 1) + `} N`,
		`kong_ai_llm_tokens_total{` + strings.Replace(tokenLabels, "%s", "completion_tokens", 1) + `} N`,
		`kong_ai_llm_tokens_total{` + strings.Replace(tokenLabels, "%s", "total_tokens", 1) + `} N`,
		`kong_ai_llm_provider_latency_ms_bucket{` + labels + `,le="1500"} N`,
		`kong_ai_llm_provider_latency_ms_bucket{` + labels + `,le="2000"} N`,
		`kong_ai_llm_provider_latency_ms_bucket{` + labels + `,le="60000"} N`,
		`kong_ai_llm_provider_latency_ms_bucket{` + labels + `,le="+Inf"} N`,
		`kong_ai_llm_provider_latency_ms_sum{` + labels + `} N`,
		`kong_ai_llm_provider_latency_ms_count{` + labels + `} N`,
		// The requests are still counted as requests.
		`kong_http_requests_total{service="openai-service",route="openai-chat",code="200",source="service",workspace="default",consumer=""} N`,
		`kong_http_requests_total{service="example_service",route="example_route",code="200",source="service",workspace="default",consumer=""} N`,
	}, []string{"2", "0.00074", "50", "24", "74", "0", "2", "2", "2", "3060", "2", "2", "1"})
	// One AI series per family: the plain entry made none.
	for _, family := range []string{"kong_ai_llm_requests_total{", "kong_ai_llm_cost_total{", "kong_ai_llm_provider_latency_ms_count{"} {
		if n := strings.Count(string(got), "\n"+family); n != 1 {
			t.Errorf("%d %s…} series, want 1:\n%s", n, family, got)
		}
	}
	if n := strings.Count(string(got), "\nkong_ai_llm_tokens_total{"); n != 3 {
		t.Errorf("%d kong_ai_llm_tokens_total series, want 3 (prompt, completion, total):\n%s", n, got)
	}
}

// TestAPISIXProfileLLMFromHTTPLogger: an ai-proxy request logged by
// http-logger with llm_summary feeds the apisix profile's LLM families as
// APISIX's prometheus plugin (3.18) writes them (docs/gateways.md §2c):
// latency type="total" from the upstream response time of a successful
// request, prompt and completion token counters and distributions; the
// request's own families carry request_type ai_chat and the models.
func TestAPISIXProfileLLMFromHTTPLogger(t *testing.T) {
	p := newPipeline(t, traffic.ProfileAPISIX)
	ai, err := os.ReadFile("internal/gateway/testdata/apisix-http-logger-ai-proxy.json")
	if err != nil {
		t.Fatal(err)
	}
	p.post(t, apisixLogURLPath, string(ai))
	p.post(t, apisixLogURLPath, string(ai))
	got := p.scrape(t)
	const llm = `route_id="ai-proxy-openai-route",service_id="",consumer="",node="api.openai.com",request_type="ai_chat",request_llm_model="gpt-4",llm_model="gpt-4"`
	checkSpecLines(t, got, []string{
		`apisix_llm_latency_bucket{type="total",` + llm + `,le="5000"} N`,
		`apisix_llm_latency_sum{type="total",` + llm + `} N`,
		`apisix_llm_prompt_tokens{` + llm + `} N`,
		`apisix_llm_completion_tokens{` + llm + `} N`,
		`apisix_llm_prompt_tokens_dist_bucket{` + llm + `,le="50"} N`,
		`apisix_llm_completion_tokens_dist_bucket{` + llm + `,le="10"} N`,
		`apisix_http_status{code="200",route="ai-proxy-openai-route",matched_uri="",matched_host="",service="",consumer="",node="api.openai.com",request_type="ai_chat",request_llm_model="gpt-4",llm_model="gpt-4",response_source="upstream"} N`,
	}, []string{"2", "5716", "46", "16", "2", "2", "2"})
}

// TestAPISIXProfileLLMGates: what APISIX 3.18's exporter leaves out of its
// LLM families (docs/gateways.md §2c): a streamed request the provider
// refused (429, which ai-proxy still times) observes no llm_latency, neither
// total nor ttft, but its tokens count, 0 included (the prompt_tokens_dist
// le="1" bucket holds it); a client that named no model has
// request_llm_model="" beside the plugin's llm_model.
func TestAPISIXProfileLLMGates(t *testing.T) {
	p := newPipeline(t, traffic.ProfileAPISIX)
	entry := func(status int, requestModel, stream string, ttft, prompt int) string {
		return `{"response":{"status":` + strconv.Itoa(status) + `},"route_id":"ai","latency":900,"upstream_latency":800,` +
			`"upstream":"api.openai.com:443","llm_summary":{"request_model":"` + requestModel + `","model":"gpt-4o",` +
			`"stream":"` + stream + `","duration":` + strconv.Itoa(ttft) + `,"upstream_response_time":800,` +
			`"prompt_tokens":` + strconv.Itoa(prompt) + `,"completion_tokens":0}}`
	}
	p.post(t, apisixLogURLPath, entry(429, "gpt-4o", "true", 750, 0))
	p.post(t, apisixLogURLPath, entry(200, "gpt-4o", "true", 120, 12))
	p.post(t, apisixLogURLPath, entry(200, "", "false", 700, 7))
	got := p.scrape(t)
	const streamed = `route_id="ai",service_id="",consumer="",node="api.openai.com",request_type="ai_stream",request_llm_model="gpt-4o",llm_model="gpt-4o"`
	const noClient = `route_id="ai",service_id="",consumer="",node="api.openai.com",request_type="ai_chat",request_llm_model="",llm_model="gpt-4o"`
	checkSpecLines(t, got, []string{
		// The 429 observes nothing: one total and one ttft, the 200's.
		`apisix_llm_latency_count{type="total",` + streamed + `} N`,
		`apisix_llm_latency_count{type="ttft",` + streamed + `} N`,
		`apisix_llm_latency_sum{type="ttft",` + streamed + `} N`,
		// Both streamed requests' tokens: 0 and 12.
		`apisix_llm_prompt_tokens{` + streamed + `} N`,
		`apisix_llm_prompt_tokens_dist_count{` + streamed + `} N`,
		`apisix_llm_prompt_tokens_dist_bucket{` + streamed + `,le="1"} N`,
		`apisix_llm_completion_tokens{` + streamed + `} N`,
		`apisix_llm_completion_tokens_dist_count{` + streamed + `} N`,
		// Not streamed: a total, no ttft.
		`apisix_llm_latency_count{type="total",` + noClient + `} N`,
		`apisix_llm_prompt_tokens{` + noClient + `} N`,
	}, []string{"1", "1", "120", "12", "2", "1", "0", "2", "1", "7"})
	if strings.Contains(string(got), `apisix_llm_latency_count{type="ttft",`+noClient) {
		t.Errorf("a request that is not streamed observed a ttft:\n%s", got)
	}
}

// With node_label the kong profile keeps the reporting node (the spans'
// service.instance.id) under the label the dashboards filter on, after
// Kong's own labels: one node selected shows that node's requests.
func TestNodeLabelKeepsTheReportingNode(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) { c.Profile, c.NodeLabel = traffic.ProfileKong, "instance" })
	ctx := context.Background()
	for _, node := range []string{"kong-a", "kong-b", "kong-b"} {
		td := kongExport("GET", "/r", 200)
		td.ResourceSpans().At(0).Resource().Attributes().PutStr("service.instance.id", node)
		_ = h.r.ingest.traces(ctx, td)
	}
	if err := h.r.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, md := range sink.AllMetrics() {
		forEachAttrs(md.ResourceMetrics().At(0), func(name string, a map[string]any) {
			if name == "kong_http_requests_total" {
				got[a["instance"].(string)]++
			}
		})
	}
	if len(got) != 2 || got["kong-a"] != 1 || got["kong-b"] != 1 {
		t.Fatalf("series by instance %v, want one per node", got)
	}
	cfg := createDefaultConfig()
	cfg.NodeLabel = "instance"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "node_label applies to") {
		t.Errorf("node_label on the otel profile: %v", err)
	}
}
