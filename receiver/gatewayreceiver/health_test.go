package gatewayreceiver

import (
	"context"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/health"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
)

// healthHarness is a receiver whose health part is built but not started:
// tests run polls and emissions by hand, one at a time.
type healthHarness struct {
	r    *gatewayReceiver
	h    *health.Manual
	sink *consumertest.MetricsSink
	tel  *componenttest.Telemetry
	logs *observer.ObservedLogs
}

func newHealthHarness(t testing.TB, mutate func(*HealthConfig)) *healthHarness {
	t.Helper()
	return newHealthHarnessOn(t, componenttest.NewNopHost(), mutate)
}

// newHealthHarnessOn is newHealthHarness on a host (one with extensions).
func newHealthHarnessOn(t testing.TB, host component.Host, mutate func(*HealthConfig)) *healthHarness {
	t.Helper()
	cfg := createDefaultConfig()
	cfg.CollectorLabel = "" // exact series; see identity_test.go
	cfg.Protocols.GRPC = configoptional.None[configgrpc.ServerConfig]()
	cfg.Protocols.HTTP.Get().NetAddr.Endpoint = testutil.FreeAddr(t)
	hc := defaultHealthConfig()
	if mutate != nil {
		mutate(&hc)
	}
	cfg.Health = configoptional.Some(hc)
	hh := &healthHarness{sink: new(consumertest.MetricsSink), tel: componenttest.NewTelemetry()}
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = hh.tel.NewTelemetrySettings()
	core, logs := observer.New(zap.InfoLevel)
	set.Logger = zap.New(core)
	hh.logs = logs
	r, err := newReceiver(cfg, set, hh.sink)
	if err != nil {
		t.Fatal(err)
	}
	h, err := health.NewManual(context.Background(), host, health.Settings{
		Config: cfg.Health.Get(), Naming: health.NamingOf(cfg.healthProfile()), Next: hh.sink,
		Telemetry: r.telemetry, TelemetrySettings: set.TelemetrySettings, Logger: set.Logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	hh.r, hh.h = r, h
	t.Cleanup(func() {
		h.Close()
		_ = hh.tel.Shutdown(context.Background())
	})
	return hh
}

// pollAndEmit runs one poll of poller i and emits the queued changes.
func (hh *healthHarness) pollAndEmit(i int) {
	hh.h.Poll(i)
	hh.h.Emit(false)
}

// seriesState replays every batch the sink received in order, as the
// exporter would store it: a point sets its series, a point with no
// recorded value removes it. Keys read `name{a="x",b="y"}@instance`, with
// attributes sorted.
func seriesState(all []pmetric.Metrics) map[string]int64 {
	out := map[string]int64{}
	for _, md := range all {
		forEachPoint(md, func(key string, dp pmetric.NumberDataPoint) {
			if dp.Flags().NoRecordedValue() {
				delete(out, key)
				return
			}
			out[key] = dp.IntValue()
		})
	}
	return out
}

func forEachPoint(md pmetric.Metrics, f func(string, pmetric.NumberDataPoint)) {
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		inst, _ := rm.Resource().Attributes().Get("service.instance.id")
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				dps := m.Gauge().DataPoints()
				for l := 0; l < dps.Len(); l++ {
					dp := dps.At(l)
					f(seriesKey(m.Name(), dp, inst.AsString()), dp)
				}
			}
		}
	}
}

func seriesKey(name string, dp pmetric.NumberDataPoint, instance string) string {
	var parts []string
	for k, v := range dp.Attributes().All() {
		parts = append(parts, k+"="+strconv.Quote(v.AsString()))
	}
	sort.Strings(parts)
	return name + "{" + strings.Join(parts, ",") + "}@" + instance
}

// pointsIn counts the points of one batch.
func pointsIn(md pmetric.Metrics) int {
	n := 0
	forEachPoint(md, func(string, pmetric.NumberDataPoint) { n++ })
	return n
}

func checkSeries(t *testing.T, got, want map[string]int64) {
	t.Helper()
	var diff []string
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			diff = append(diff, "want "+k+" "+strconv.FormatInt(v, 10)+", got "+strconv.FormatInt(g, 10)+" (present "+strconv.FormatBool(ok)+")")
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			diff = append(diff, "unexpected "+k+" "+strconv.FormatInt(v, 10))
		}
	}
	sort.Strings(diff)
	if len(diff) > 0 {
		t.Fatalf("%d series differ:\n%s", len(diff), strings.Join(diff, "\n"))
	}
}

// kongSeries is the four series Kong prints for one target address.
func kongSeries(want map[string]int64, instance, upstream, target, address, state string) {
	for _, s := range []string{"healthchecks_off", "healthy", "unhealthy", "dns_error"} {
		v := int64(0)
		if s == state {
			v = 1
		}
		want[`kong_upstream_target_health{address="`+address+`",state="`+s+`",subsystem="http",target="`+target+`",upstream="`+upstream+`"}@`+instance] = v
	}
}

// startFakeKong serves a fake Kong on loopback; Cleanup releases slow
// requests and closes it.
func startFakeKong(t testing.TB, f *testutil.FakeKong) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(func() {
		f.Release()
		srv.Close()
	})
	return srv
}

// smallKong has the cases of §1b/§1c: a DNS_ERROR target, a target with two
// addresses in different states, health checks off, across pages.
func smallKong() *testutil.FakeKong {
	f := testutil.NewFakeKong(0, 0)
	f.AddUpstream("billing", []testutil.FakeTarget{
		{Target: "api.internal:8080", Addresses: []testutil.FakeAddress{{IP: "10.0.0.1", Port: 8080, Health: "HEALTHY"}, {IP: "10.0.0.2", Port: 8080, Health: "UNHEALTHY"}}},
		{Target: "some-random-dns:80", DNSError: true},
		{Target: "10.0.0.9:80", Addresses: []testutil.FakeAddress{{IP: "10.0.0.9", Port: 80, Health: "HEALTHY"}}},
	})
	f.AddUpstream("search", []testutil.FakeTarget{
		{Target: "10.0.1.1:9200", Addresses: []testutil.FakeAddress{{IP: "10.0.1.1", Port: 9200, Health: "HEALTHCHECKS_OFF"}}},
	})
	f.AddUpstream("mock-upstream", []testutil.FakeTarget{
		{Target: "10.0.2.1:80", Addresses: []testutil.FakeAddress{{IP: "10.0.2.1", Port: 80, Health: "UNHEALTHY"}}},
	})
	return f
}

func kongPoller(endpoint string, mutate func(*PollerConfig)) PollerConfig {
	p := PollerConfig{Instance: "kong-1", PageSize: 2}
	p.Endpoint = endpoint
	p.Timeout = 2 * time.Second
	if mutate != nil {
		mutate(&p)
	}
	return p
}

func smallKongWant() map[string]int64 {
	want := map[string]int64{}
	kongSeries(want, "kong-1", "billing", "api.internal:8080", "10.0.0.1:8080", "healthy")
	kongSeries(want, "kong-1", "billing", "api.internal:8080", "10.0.0.2:8080", "unhealthy")
	kongSeries(want, "kong-1", "billing", "some-random-dns:80", "", "dns_error")
	kongSeries(want, "kong-1", "billing", "10.0.0.9:80", "10.0.0.9:80", "healthy")
	kongSeries(want, "kong-1", "search", "10.0.1.1:9200", "10.0.1.1:9200", "healthchecks_off")
	kongSeries(want, "kong-1", "mock-upstream", "10.0.2.1:80", "10.0.2.1:80", "unhealthy")
	return want
}

// pollersOf is a health section's poller lists with one gateway's list.
func pollersOf(gateway string, list ...PollerConfig) map[string][]PollerConfig {
	return map[string][]PollerConfig{gateway: list}
}
