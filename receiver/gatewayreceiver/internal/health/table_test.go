package health

import (
	"runtime"
	"strconv"
	"strings"
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

// TestLongNamesAreCutAndNotRetained: names longer than the table's limit
// are cut (and counted), and the row keeps a copy of the cut, not the
// decoded name it was cut from: 40 rows of 1 MiB names hold kilobytes.
func TestLongNamesAreCutAndNotRetained(t *testing.T) {
	tab := newTable(256)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 40 {
		long := strings.Repeat(strconv.Itoa(i%10), 1<<20)
		ev := gateway.HealthEvent{Gateway: long, Kind: gateway.KindKong, TargetHealth: gateway.TargetHealth{
			Upstream: long + "u", Target: long + "t", IP: "10.0.0.1", Port: "80", State: gateway.HealthHealthy}}
		if got := tab.applyEvent(&ev, time.Now(), 1000, time.Minute); got != pushApplied {
			t.Fatalf("event %d: %v", i, got)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 4<<20 {
		t.Errorf("40 rows hold %d bytes: the decoded names are retained", grown)
	}
	for k := range tab.entries {
		if len(k.instance) > 256 || len(k.upstream) > 256 || len(k.target) > 256 {
			t.Errorf("a row keeps names of %d, %d, %d bytes", len(k.instance), len(k.upstream), len(k.target))
		}
	}
	if n := tab.takeTruncated(); n != 120 {
		t.Errorf("%d names cut, want 120", n)
	}
	runtime.KeepAlive(tab)
}
