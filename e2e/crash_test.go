package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCrashRestart kills a collector with SIGKILL under load and starts it
// again on the same file_storage directory, with the processor's checkpoint
// every 10s (its default) and the receiver's flush every 1s:
//
//   - receiver and processor storage: the receiver replays the windows it
//     flushed since the processor's last checkpoint, so what is lost is at
//     most the requests acknowledged in the last flush window before the
//     kill (asserted), nothing is counted twice (asserted), and Prometheus
//     sees no counter reset (asserted);
//   - processor storage only (for comparison, logged): the windows flushed
//     since the processor's last checkpoint are lost too, up to 10s of
//     traffic, and the counters step back ("lost" is then acknowledged
//     minus the counters' last values).
//
// Traffic: one Kong export of 10 requests every 20ms (500 requests/s), to
// the one collector; an export refused while it is down is retried until
// acknowledged, as a gateway's exporter would.
func TestCrashRestart(t *testing.T) {
	rows := []string{fmt.Sprintf("%-34s %6s %6s %6s %6s %8s %6s", "scenario", "sent", "acked", "served", "lost", "≤ bound", "resets")}
	for _, c := range []struct {
		name            string
		receiverStorage bool
	}{{"receiver and processor storage", true}, {"processor storage only", false}} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			rows = append(rows, crashRestart(t, c.name, c.receiverStorage))
		})
	}
	t.Logf("SIGKILL under 500 requests/s, flush_interval 1s, processor checkpoint_interval 10s:\n%s", strings.Join(rows, "\n"))
}

func crashRestart(t *testing.T, name string, receiverStorage bool) string {
	const total, perPost, flush = 9000, 10, time.Second
	m := newFleetMember(t, fleetOpts{name: "crash", storageDir: t.TempDir(), receiverStorage: receiverStorage,
		checkpointInterval: 10 * time.Second}, freePorts(t, 4))
	m.launch(t)
	m.waitReady(t)
	prom := startPrometheusWith(t, fmt.Sprintf(plainScrapeConfig, m.col.promAddr))

	d := newTrafficDriver([]trafficTarget{{m.name, m.col.tracesURL()}}, perPost)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := d.run(total, 20*time.Millisecond, total+1, nil, 0); err != nil {
			t.Error(err)
		}
	}()
	// Past the processor's first checkpoint (10s after start, about 5,000
	// requests in) and well into the next interval, so that checkpoint
	// lacks several flushed windows.
	d.waitAcked(t, 5500, done)
	time.Sleep(3 * time.Second)
	p := m.col.proc
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-p.done
	m.launch(t)
	m.waitReady(t)
	<-done
	if d.lost > 0 {
		t.Fatalf("%d traces were never acknowledged", d.lost)
	}
	acked := d.ackedTotal(m.name)
	// Two flushes after the last acknowledgement: everything since the
	// restart is in /metrics.
	time.Sleep(2*flush + 500*time.Millisecond)
	counts, err := exporterCounts(m.col)
	if err != nil {
		t.Fatal(err)
	}
	served := 0.0
	for _, v := range counts {
		served += v
	}
	lost := acked - int(served)
	// The open window at the kill: requests acknowledged since the last
	// flush, at most one flush interval (and a little scheduling slack).
	bound := d.ackedBetween(killed.Add(-flush-250*time.Millisecond), killed)
	var resets float64
	eventually(t, convergeTimeout, "Prometheus to scrape the restarted collector", func() (bool, string) {
		v, err := promQuery(prom, `sum(gateway_requests_total)`)
		if err != nil || len(v) != 1 {
			return false, fmt.Sprint(v, err)
		}
		r, err := promQuery(prom, `sum(resets(gateway_requests_total[10m]))`)
		if err != nil || len(r) != 1 {
			return false, fmt.Sprint(r, err)
		}
		resets = float64(r[0].Value)
		return float64(v[0].Value) == served, fmt.Sprintf("Prometheus holds %v, /metrics %v", v[0].Value, served)
	})
	restored := m.logLines("Restored the receiver's checkpoint")
	t.Logf("%s: acked %d, served %.0f, lost %d (bound %d acknowledged in the last flush window), resets %.0f; receiver restore: %v",
		name, acked, served, lost, bound, resets, restored)
	if receiverStorage {
		if lost < 0 {
			t.Errorf("served %.0f of %d acknowledged: %d counted twice", served, acked, -lost)
		}
		if lost > bound {
			t.Errorf("lost %d acknowledged requests, more than the %d acknowledged in the last flush window before the kill", lost, bound)
		}
		if resets != 0 {
			t.Errorf("Prometheus saw %.0f counter resets, want 0", resets)
		}
		if len(restored) != 1 {
			t.Errorf("the restarted receiver logged %d checkpoint restores, want 1", len(restored))
		}
	}
	return fmt.Sprintf("%-34s %6d %6d %6.0f %6d %8d %6.0f", name, total, acked, served, lost, bound, resets)
}
