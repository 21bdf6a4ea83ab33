package gatewayreceiver

import (
	"context"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
)

// fill20k puts 10k upstreams × 2 targets into a table, as one Kong poller.
func fill20k(tb testing.TB) (*healthTable, *poller) {
	tb.Helper()
	t := newHealthTable()
	p := &poller{instance: "kong-0", gkind: gateway.HealthKindKong}
	obs := make([]gateway.TargetHealth, 0, 2)
	for u := range 10_000 {
		name := "upstream-" + strconv.Itoa(u)
		obs = obs[:0]
		for j := range 2 {
			ip := "10.0." + strconv.Itoa(u/250) + "." + strconv.Itoa(u%250*2+j)
			obs = append(obs, gateway.TargetHealth{Upstream: name, Target: ip + ":8000", IP: ip, Port: "8000", State: gateway.HealthHealthy})
		}
		t.applyPoll(p, 1, time.Now(), obs)
	}
	return t, p
}

// The steady snapshot copies 20k rows and 10k upstreams into reused
// buffers without allocating; only the pdata points themselves allocate.
func TestSnapshotDrainDoesNotAllocate(t *testing.T) {
	table, _ := fill20k(t)
	rows, ups, _ := table.drain(nil, nil, true)
	if len(rows) != 20_000 || len(ups) != 10_000 {
		t.Fatalf("drained %d rows, %d upstreams", len(rows), len(ups))
	}
	if n := testing.AllocsPerRun(5, func() { rows, ups, _ = table.drain(rows[:0], ups[:0], true) }); n != 0 {
		t.Errorf("snapshot drain allocates %v times", n)
	}
	// A poll that changes nothing allocates nothing in the table either.
	p := &poller{instance: "kong-0", gkind: gateway.HealthKindKong}
	obs := []gateway.TargetHealth{{Upstream: "upstream-7", Target: "10.0.0.14:8000", IP: "10.0.0.14", Port: "8000", State: gateway.HealthHealthy}}
	table.applyPoll(p, 2, time.Now(), obs)
	if n := testing.AllocsPerRun(100, func() { table.applyPoll(p, 2, time.Now(), obs) }); n != 0 {
		t.Errorf("unchanged applyPoll allocates %v times", n)
	}
}

// BenchmarkSnapshot builds the full 20k-target snapshot in each profile.
//
//	go test -run '^$' -bench Snapshot -benchmem -count 6 ./receiver/gatewayreceiver | benchstat -
func BenchmarkSnapshot(b *testing.B) {
	for _, profile := range []HealthProfile{ProfileOTel, ProfileKong, ProfileAPISIX} {
		b.Run(string(profile), func(b *testing.B) {
			table, _ := fill20k(b)
			tt := componenttest.NewTelemetry()
			b.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
			tel, err := metadata.NewTelemetryBuilder(tt.NewTelemetrySettings())
			if err != nil {
				b.Fatal(err)
			}
			em := &emitter{profile: profile, table: table, next: func(context.Context, pmetric.Metrics) error { return nil }, tel: tel, logger: zap.NewNop()}
			b.ReportAllocs()
			for b.Loop() {
				em.emit(context.Background(), true)
			}
		})
	}
}

// BenchmarkKongPoll is one full poll of a fake Kong Admin API with 10k
// upstreams / 20k targets on loopback at max_concurrency 16, the fake
// served from the same process.
//
//	go test -run '^$' -bench KongPoll -benchmem -count 6 ./receiver/gatewayreceiver | benchstat -
func BenchmarkKongPoll(b *testing.B) {
	f := testutil.NewFakeKong(10_000, 2)
	srv := startFakeKong(b, f)
	hh := newHealthHarness(b, func(c *HealthConfig) {
		c.Profile = ProfileKong
		c.Kong = []PollerConfig{kongPoller(srv.URL, func(p *PollerConfig) { p.PageSize = 0; p.MaxConcurrency = 16 })}
	})
	hh.pollAndEmit(0)
	b.ReportAllocs()
	for b.Loop() {
		hh.pollAndEmit(0)
	}
}
