package gatewayreceiver

import (
	"strconv"
	"testing"
	"time"

	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// BenchmarkSnapshot builds the full 20k-target snapshot (10k upstreams × 2
// targets of one Kong poller) in each profile.
//
//	go test -run '^$' -bench Snapshot -benchmem -count 6 ./receiver/gatewayreceiver | benchstat -
func BenchmarkSnapshot(b *testing.B) {
	for _, profile := range []HealthProfile{ProfileOTel, ProfileKong, ProfileAPISIX} {
		b.Run(string(profile), func(b *testing.B) {
			hh := newHealthHarness(b, func(c *HealthConfig) { c.Profile = profile })
			obs := make([]gateway.TargetHealth, 0, 2)
			for u := range 10_000 {
				name := "upstream-" + strconv.Itoa(u)
				obs = obs[:0]
				for j := range 2 {
					ip := "10.0." + strconv.Itoa(u/250) + "." + strconv.Itoa(u%250*2+j)
					obs = append(obs, gateway.TargetHealth{Upstream: name, Target: ip + ":8000", IP: ip, Port: "8000", State: gateway.HealthHealthy})
				}
				hh.h.ApplyPoll("kong-0", gateway.KindKong, 1, time.Now(), obs)
			}
			b.ReportAllocs()
			for b.Loop() {
				hh.h.Emit(true)
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
		c.Pollers = pollersOf("kong", kongPoller(srv.URL, func(p *PollerConfig) { p.PageSize = 0; p.MaxConcurrency = 16 }))
	})
	hh.pollAndEmit(0)
	b.ReportAllocs()
	for b.Loop() {
		hh.pollAndEmit(0)
	}
}
