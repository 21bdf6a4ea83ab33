package health

import (
	"strconv"
	"testing"
	"time"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// fill20k puts 10k upstreams × 2 targets into a table, as one Kong poller.
func fill20k(tb testing.TB) (*table, *poller) {
	tb.Helper()
	t := newTable(0)
	p := &poller{instance: "kong-0", gkind: gateway.KindKong}
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
	p := &poller{instance: "kong-0", gkind: gateway.KindKong}
	obs := []gateway.TargetHealth{{Upstream: "upstream-7", Target: "10.0.0.14:8000", IP: "10.0.0.14", Port: "8000", State: gateway.HealthHealthy}}
	table.applyPoll(p, 2, time.Now(), obs)
	if n := testing.AllocsPerRun(100, func() { table.applyPoll(p, 2, time.Now(), obs) }); n != 0 {
		t.Errorf("unchanged applyPoll allocates %v times", n)
	}
}
