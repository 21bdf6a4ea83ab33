package gatewayreceiver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelgateway/otelgateway/internal/metadatacheck"
	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/health"
)

// registerAcme registers a fifth gateway for one test: one value, written
// only here, with a scope, an access log, health states and a poller. The
// receiver must accept it in `detect`, under `health`, as a pushed `kind`,
// and serve its log path, with no other change.
func registerAcme(t *testing.T) gateway.Kind {
	g := &gateway.Gateway{
		Name:  "acme",
		Scope: "acme-gateway",
		Log: &gateway.LogSpec{Path: "/acme/log", Format: "acme_log", MediaTypes: []string{jsonContentType},
			Decode: func(body []byte, fn func(*gateway.Event)) (int, []gateway.EntryError, error) {
				var entries []struct{ Route string }
				if err := json.Unmarshal(body, &entries); err != nil {
					return 0, nil, err
				}
				var e gateway.Event
				for _, en := range entries {
					e.Reset()
					e.Route, e.Method, e.StatusCode = en.Route, "GET", 200
					fn(&e)
				}
				return len(entries), nil, nil
			}},
		HealthStates: []gateway.HealthState{gateway.HealthHealthy, gateway.HealthUnhealthy, gateway.HealthUnknown},
		Poller: &gateway.PollerSpec{MaxConcurrency: 1, Poll: func(ctx context.Context, s gateway.PollSession) (bool, error) {
			body, err := s.Get(ctx, "/status")
			if err != nil {
				return false, err
			}
			s.Apply([]gateway.TargetHealth{{Upstream: "u", Target: string(body), IP: "10.0.0.1", Port: "80", State: gateway.HealthHealthy}})
			return true, nil
		}},
	}
	kind := gateway.Register(g)
	t.Cleanup(func() { gateway.Unregister(kind) })
	return kind
}

func TestFifthGatewayConfig(t *testing.T) {
	registerAcme(t)
	runConfigCases(t, []configCase{
		{file: "fifth_gateway.yaml", check: func(t *testing.T, c *Config) {
			if c.Detect != "acme" || c.Health.Get().Pollers["acme"][0].Instance != "acme-0" {
				t.Errorf("config: detect %q, pollers %+v", c.Detect, c.Health.Get().Pollers)
			}
		}},
		{file: "bad_detect.yaml", wantError: `detect must be one of auto, kong, apisix, envoy, semconv, traefik, acme, got "lighttpd"`},
		{file: "health_unknown_gateway.yaml", wantError: `health: "traefik" is neither a health setting nor a gateway with a poller (kong, apisix, envoy, acme)`},
	})
}

func TestFifthGatewayEndToEnd(t *testing.T) {
	registerAcme(t)
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/status" {
			_, _ = w.Write([]byte("t:80"))
			return
		}
		http.NotFound(w, r)
	}))
	defer admin.Close()
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) {
		hc := defaultHealthConfig()
		var p PollerConfig
		p.Endpoint, p.Instance = admin.URL, "acme-0"
		hc.Pollers = pollersOf("acme", p)
		c.Health = configoptional.Some(hc)
	})

	// Spans with its scope are counted (the gateway package's test checks
	// they map as acme's).
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "edge")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("acme-gateway")
	s := ss.Spans().AppendEmpty()
	s.SetKind(ptrace.SpanKindServer)
	s.SetSpanID(pcommon.SpanID{1})
	s.Attributes().PutStr("http.route", "/pets")
	s.Attributes().PutStr("http.request.method", "GET")
	s.Attributes().PutInt("http.response.status_code", 200)
	if code, body := post(t, h.httpAddr, pbContentType, protoBody(t, td)); code != http.StatusOK {
		t.Fatalf("export: %d %s", code, body)
	}
	// Its log path is served.
	if code, body := postHealth(t, "http://"+h.httpAddr+"/acme/log", jsonContentType, `[{"route":"/pets"}]`); code != http.StatusOK || body != `{"accepted":1,"rejected":0}` {
		t.Fatalf("log: %d %s", code, body)
	}
	if got := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_events", attribute.String("outcome", "counted")); got != 2 {
		t.Errorf("events counted = %d, want 2 (one span, one log entry)", got)
	}
	if got := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_log_entries", attribute.String("format", "acme_log"), attribute.String("outcome", "accepted")); got != 1 {
		t.Errorf("acme_log entries accepted = %d, want 1", got)
	}
	// A pushed event may name it.
	if code, body := postHealth(t, "http://"+h.httpAddr+health.DefaultPushPath, jsonContentType,
		`{"gateway":"acme-1","kind":"acme","upstream":"u","target":"p:80","address":"10.0.0.2:80","state":"unhealthy"}`); code != http.StatusOK {
		t.Fatalf("push: %d %s", code, body)
	}
	// Its poller ran: the polled and the pushed rows are acme's, with its
	// three states each.
	defer func() {
		if t.Failed() {
			t.Logf("series: %v", seriesState(sink.AllMetrics()))
		}
	}()
	waitFor(t, func() bool {
		st := seriesState(sink.AllMetrics())
		return st[`gateway.upstream.target.health{gateway.target.address="10.0.0.1:80",gateway.target="t:80",gateway.upstream.name="u",state="healthy"}@acme-0`] == 1 &&
			st[`gateway.upstream.target.health{gateway.target.address="10.0.0.2:80",gateway.target="p:80",gateway.upstream.name="u",state="unhealthy"}@acme-1`] == 1
	})
	// One-hot over acme's own three states, not every state.
	n := 0
	for k := range seriesState(sink.AllMetrics()) {
		if strings.HasPrefix(k, "gateway.upstream.target.health{") {
			n++
		}
	}
	if n != 6 {
		t.Errorf("%d target health series, want 2 targets × acme's 3 states", n)
	}
}

// builtinGateways is how many gateways the registry has without a test's.
var builtinGateways = len(gateway.Gateways())

// metadata.yaml lists the telemetry values every gateway brings: its log
// format and its poller's name. A new gateway whose home is added without
// them fails here.
func TestMetadataListsEveryGateway(t *testing.T) {
	md := metadatacheck.Read(t, "metadata.yaml")
	var formats []string
	for _, l := range gateway.Logs() {
		formats = append(formats, l.Format)
	}
	if got := md.Attributes["log_format"].Enum; !slices.Equal(got, formats) {
		t.Errorf("metadata.yaml log_format enum %v, the registry's log formats %v", got, formats)
	}
	if got, want := md.Attributes["gateway"].Enum, gateway.PollerNames(); !slices.Equal(got, want) {
		t.Errorf("metadata.yaml gateway enum %v, the registry's pollers %v", got, want)
	}
}
