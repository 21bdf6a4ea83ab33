package health

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

const (
	steadyPolls = 7
	scrapes     = 7
	snapshots   = 5
)

// TestReport measures, through the real receiver and exporter built by
// their factories, and prints one table:
//
//   - the first poll of the fake Kong (every row new, 80k series emitted
//     to the exporter) and steady polls (nothing changed);
//
//   - scrapes of the exporter's 80k-series family;
//
//   - full snapshot cycles with no changes, receiver alone and receiver →
//     exporter, with the allocations split by who made them.
//
//     go test -run TestReport -v -count 1 .
func TestReport(t *testing.T) {
	f := fakeKong(t)
	closePipeline(t)
	type row struct{ what, wall, cpu, fakeCPU, allocs, note string }
	var rows []row

	// Polls: exporter behind the receiver, no snapshot during the run.
	f0, err := f.CPU()
	if err != nil {
		t.Fatal(err)
	}
	c0, t0 := CPU(), time.Now()
	p, err := StartPipeline(Options{KongURL: f.URL, MaxConcurrency: 16, PageSize: 1000, RequestRate: unpaced, PollInterval: 500 * time.Millisecond, ReportInterval: time.Hour, Exporter: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	s1, err := p.WaitPolls(1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wall1, c1 := time.Since(t0), CPU()
	f1, _ := f.CPU()
	rows = append(rows, row{"first poll (20k rows new, 80k series emitted to the exporter)", ms(s1.Duration), ms(c1 - c0), ms(f1 - f0), "",
		fmt.Sprintf("Start → poll counted: %s", ms(wall1))})

	var walls, cpus, fcpus []time.Duration
	prev, pc, pf := s1, c1, f1
	for i := int64(2); i <= 1+steadyPolls; i++ {
		s, err := p.WaitPolls(i, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		c := CPU()
		fc, _ := f.CPU()
		walls, cpus, fcpus = append(walls, s.Duration-prev.Duration), append(cpus, c-pc), append(fcpus, fc-pf)
		prev, pc, pf = s, c, fc
	}
	rows = append(rows, row{fmt.Sprintf("steady poll, no change (median of %d)", steadyPolls), ms(Median(walls)), ms(Median(cpus)), ms(Median(fcpus)), "",
		"CPU window includes the 500 ms idle interval"})

	// Scrapes of the family the polls produced.
	var buf bytes.Buffer
	first, err := ScrapeOnce(p.MetricsAddr, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if first.Series != Upstreams*TargetsPer*4 || first.Ones != Upstreams*TargetsPer || first.OtherLines != 1 || !strings.HasPrefix(first.Other, "target_info{") {
		t.Fatalf("scrape: %d kong_upstream_target_health series (%d at 1), %d other lines (%q); want %d (%d), 1 (target_info)",
			first.Series, first.Ones, first.OtherLines, first.Other, Upstreams*TargetsPer*4, Upstreams*TargetsPer)
	}
	var sw []time.Duration
	var scrapeCPU time.Duration
	objs, _, err := MemAllocs(func() error {
		for range scrapes {
			c := CPU()
			s, err := ScrapeOnce(p.MetricsAddr, &buf)
			scrapeCPU += CPU() - c
			if err != nil {
				return err
			}
			sw = append(sw, s.Duration)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rows = append(rows, row{fmt.Sprintf("scrape of kong_upstream_target_health (median of %d)", scrapes), ms(Median(sw)), ms(scrapeCPU / scrapes), "-",
		fmt.Sprintf("%.0f", float64(objs)/scrapes),
		fmt.Sprintf("%d series, %d at 1 (+ target_info), %.1f MB; allocs and CPU include the client", first.Series, first.Ones, float64(first.Bytes)/1e6)})
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	// Snapshot cycles, back to back (report_interval 1 ms), no poll.
	var shares AllocShares
	for _, exp := range []bool{false, true} {
		p, err := StartPipeline(Options{KongURL: f.URL, MaxConcurrency: 16, PageSize: 1000, RequestRate: unpaced, PollInterval: time.Hour, ReportInterval: time.Millisecond, Exporter: exp})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.WaitPolls(1, time.Minute); err != nil {
			t.Fatal(err)
		}
		n := p.Snapshots()
		if err := p.WaitSnapshots(n+1, time.Minute); err != nil {
			t.Fatal(err)
		}
		c, t0 := CPU(), time.Now()
		objs, byts, err := MemAllocs(func() error { return p.WaitSnapshots(n+1+snapshots, time.Minute) })
		if err != nil {
			t.Fatal(err)
		}
		wall, cpu := time.Since(t0)/snapshots, (CPU()-c)/snapshots
		what, note := "snapshot, no change: receiver → dropping consumer", ""
		if exp {
			what = "snapshot, no change: receiver → promstream exporter"
			n := p.Snapshots()
			shares, err = MeasureAllocShares(func() error { return p.WaitSnapshots(n+1, time.Minute) },
				func() error { return p.WaitSnapshots(n+3, time.Minute) })
			if err != nil {
				t.Fatal(err)
			}
			shares = shares.div(2)
		}
		note = fmt.Sprintf("%.1f MB allocated per cycle", float64(byts)/snapshots/1e6)
		rows = append(rows, row{what + fmt.Sprintf(" (mean of %d)", snapshots), ms(wall), ms(cpu), "-", fmt.Sprintf("%d", objs/snapshots), note})
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}

	var out strings.Builder
	fmt.Fprintf(&out, "\n== bench/health: Kong upstream health at %d upstreams / %d targets, max_concurrency 16, loopback ==\n", Upstreams, Upstreams*TargetsPer)
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measurement\twall\tCPU (this process)\tCPU (fake Kong)\tallocs\tnote")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.what, r.wall, r.cpu, r.fakeCPU, r.allocs, r.note)
	}
	tw.Flush()
	fmt.Fprintf(&out, "\nallocations of one snapshot cycle (receiver → promstream), by owner (MemProfileRate=1, mean of 2 cycles):\n")
	tw = tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "owner\tobjects\tshare\tbytes\t")
	tot := float64(shares.Total())
	for _, r := range []struct {
		name string
		o, b int64
	}{
		{"receiver's own code", shares.Receiver, shares.ReceiverB},
		{"pdata, building the receiver's batch", shares.ReceiverPdata, shares.ReceiverPdataB},
		{"exporter's own code", shares.Exporter, shares.ExporterB},
		{"pdata, called by the exporter", shares.ExporterPdata, shares.ExporterPdataB},
		{"other (runtime, net/http, telemetry SDK, harness)", shares.Other, shares.OtherB},
	} {
		fmt.Fprintf(tw, "%s\t%d\t%.1f%%\t%d\t\n", r.name, r.o, 100*float64(r.o)/tot, r.b)
	}
	tw.Flush()
	fmt.Fprintf(&out, "(%d series = %d rows × 4 states; 2 cores shared with other work: timings are noisy)\n", Upstreams*TargetsPer*4, Upstreams*TargetsPer)
	fmt.Fprint(os.Stdout, out.String())
}

func (a AllocShares) div(n int64) AllocShares {
	return AllocShares{a.Receiver / n, a.ReceiverPdata / n, a.Exporter / n, a.ExporterPdata / n, a.Other / n,
		a.ReceiverB / n, a.ReceiverPdataB / n, a.ExporterB / n, a.ExporterPdataB / n, a.OtherB / n}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }
