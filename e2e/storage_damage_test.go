package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// TestStorageDamage damages the file_storage files of a stopped collector
// (the cumulative processor's and the gateway receiver's checkpoints, both
// through `extensions: file_storage: {directory: ...}` as users configure
// it) and starts it again:
//
//   - truncated to half: the meta pages name pages past the new end;
//   - first 8 KiB only: the two meta pages and nothing else.
//
// Before the distribution's file_storage (extension/filestorageextension)
// the collector died at every start, of a SIGBUS or a failed page check in
// bbolt. Now it must start; each damaged file is moved aside (kept, named
// <file>.corrupt-<UTC time>), logged, and counted discarded_unreadable by
// its component; the collector counts afresh, the good traffic after the
// restart exactly; and the new files checkpoint (restored at one more
// restart).
func TestStorageDamage(t *testing.T) {
	rows := []string{fmt.Sprintf("%-18s %-22s %7s %7s  %s", "damage", "file", "bytes", "kept", "restart")}
	for _, c := range []struct {
		name string
		size func(int64) int64
	}{
		{"truncated to half", func(n int64) int64 { return n / 2 }},
		{"first 8 KiB only", func(int64) int64 { return 8 << 10 }},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			rows = append(rows, storageDamage(t, c.name, c.size)...)
		})
	}
	t.Logf("file_storage files damaged while the collector was stopped, then a start:\n%s", strings.Join(rows, "\n"))
}

// storageFiles are the component files file_storage keeps in its directory.
var storageFiles = []string{"processor_cumulative_", "receiver_gateway_"}

func storageDamage(t *testing.T, name string, size func(int64) int64) []string {
	dir := t.TempDir()
	m := newFleetMember(t, fleetOpts{name: "damage", storageDir: dir, receiverStorage: true}, freePorts(t, 4))
	m.launch(t)
	m.waitReady(t)
	// 8s of traffic: the receiver's checkpoint holds every window flushed
	// within checkpoint_replay (20s), so both files span many pages.
	sendAndCount(t, m, 1600, 50*time.Millisecond)
	m.terminate(t) // both components checkpoint at shutdown

	sizes := map[string][2]int64{}
	for _, f := range storageFiles {
		p := filepath.Join(dir, f)
		st, err := os.Stat(p)
		if err != nil {
			t.Fatalf("no checkpoint file: %v", err)
		}
		n := size(st.Size())
		if err := os.Truncate(p, n); err != nil {
			t.Fatal(err)
		}
		sizes[f] = [2]int64{st.Size(), n}
	}

	m.launch(t)
	started := waitStarted(t, m)
	if started != "" {
		t.Fatalf("the collector did not start on the damaged storage: %s", started)
	}
	// Fresh counters: exactly the traffic after the restart.
	sendAndCount(t, m, 400, 5*time.Millisecond)

	var rows []string
	for _, f := range storageFiles {
		p := filepath.Join(dir, f)
		moved, err := filepath.Glob(p + ".corrupt-*")
		if err != nil || len(moved) != 1 {
			t.Fatalf("%s: moved aside %v (%v), want one %s.corrupt-<time>", f, moved, err, f)
		}
		st, err := os.Stat(moved[0])
		if err != nil || st.Size() != sizes[f][1] {
			t.Errorf("%s: the moved-aside file is not the damaged one (%v, %v)", f, st, err)
		}
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: no new file: %v", f, err)
		}
		rows = append(rows, fmt.Sprintf("%-18s %-22s %7d %7d  started; moved to %s, discarded_unreadable 1, counted afresh",
			name, f, sizes[f][0], sizes[f][1], filepath.Base(moved[0])))
	}
	if n := len(m.logLines("Storage file is unreadable: moved aside")); n != 2 {
		t.Errorf("%d log lines of a moved-aside file, want 2: %v", n, m.logLines("moved aside"))
	}
	for _, c := range []struct{ metric, log string }{
		{"otelcol_processor_cumulative_checkpoints", "Discarding the streams' checkpoint: its storage file was unreadable"},
		{"otelcol_receiver_gateway_checkpoints", "Discarding the receiver's checkpoint: its storage file was unreadable"},
	} {
		if n, err := telemetrySum(m.col, c.metric, map[string]string{"outcome": "discarded_unreadable"}); err != nil || n != 1 {
			t.Errorf("%s{outcome=discarded_unreadable} = %v (%v), want 1", c.metric, n, err)
		}
		if n := len(m.logLines(c.log)); n != 1 {
			t.Errorf("%d lines %q, want 1", n, c.log)
		}
	}

	// The new files checkpoint: one more restart restores both.
	m.terminate(t)
	m.launch(t)
	m.waitReady(t)
	for _, metric := range []string{"otelcol_processor_cumulative_checkpoints", "otelcol_receiver_gateway_checkpoints"} {
		if n, err := telemetrySum(m.col, metric, map[string]string{"outcome": "restored"}); err != nil || n != 1 {
			t.Errorf("after a clean restart on the new files: %s{outcome=restored} = %v (%v), want 1", metric, n, err)
		}
	}
	return rows
}

// sendAndCount posts total Kong requests to m and waits until its exporter
// serves exactly them (the counters started with this run's traffic).
func sendAndCount(t *testing.T, m *fleetMember, total int, interval time.Duration) {
	t.Helper()
	d := newTrafficDriver([]trafficTarget{{m.name, m.col.tracesURL()}}, 10)
	if err := d.run(total, interval, total+1, nil, 0); err != nil {
		t.Fatal(err)
	}
	if d.lost > 0 || d.ackedTotal(m.name) != total {
		t.Fatalf("%d of %d requests acknowledged, %d lost", d.ackedTotal(m.name), total, d.lost)
	}
	want := d.expected()
	eventually(t, convergeTimeout, "the exporter to serve exactly the traffic sent", func() (bool, string) {
		got, err := exporterSeriesKeys(m.col)
		if err != nil {
			return false, err.Error()
		}
		diff := diffTotals(got, want)
		return diff == "", diff
	})
}

// exporterSeriesKeys scrapes the exporter's gateway_requests_total as seriesKey
// → value.
func exporterSeriesKeys(col *collector) (map[string]float64, error) {
	body, _, err := scrape(col.metricsURL())
	if err != nil {
		return nil, err
	}
	samples, err := parseExposition(body, exporterContentType)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range samples {
		if s.labels.Get(model.MetricNameLabel) != metricName {
			continue
		}
		out[s.labels.Get("collector")+" "+s.labels.Get("http_request_method")+" "+
			s.labels.Get("http_route")+" "+s.labels.Get("http_response_status_code")] = s.value
	}
	return out, nil
}

// waitStarted waits for the collector's /metrics; if the process exits
// first it returns how it ended (exit status and the fatal lines of its
// log), else "".
func waitStarted(t *testing.T, m *fleetMember) string {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for time.Now().Before(deadline) {
		p := m.col.proc
		if p.exited() {
			b, _ := os.ReadFile(p.logPath)
			var fatal []string
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, "unexpected fault address") || strings.Contains(l, "panic:") ||
					strings.Contains(l, "fatal error") || strings.Contains(l, "signal SIGBUS") {
					fatal = append(fatal, strings.TrimSpace(l))
				}
			}
			return fmt.Sprintf("exited (%v): %s", p.waitErr, strings.Join(slices.Compact(fatal), " | "))
		}
		if status, _, err := httpGet(m.col.metricsURL()); err == nil && status == 200 {
			return ""
		}
		time.Sleep(pollInterval)
	}
	t.Fatalf("the collector neither started nor exited within %v", readyTimeout)
	return ""
}
