package scale

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

var (
	coresSlot   = flag.Duration("cores-slot", 8*time.Second, "TestCores: measured time per slot")
	coresSlots  = flag.Int("cores-slots", 4, "TestCores: slots per GOMAXPROCS setting, interleaved")
	coresTuples = flag.Int("cores-tuples", 20_000, "TestCores: tuples of the workload (every one known before the slots)")
	coresConns  = flag.Int("cores-conns", 4, "TestCores: sender connections")
	coresProf   = flag.String("cores-profiles", "", "TestCores: directory for the mutex and block profiles of a GOMAXPROCS=2 slot (none if empty)")
)

// minCoresRatio: issue 28 item 6, ingest at GOMAXPROCS=2 ≥ 1.8 × at 1.
const minCoresRatio = 1.8

// coreSlot is one measured slot of one child.
type coreSlot struct {
	spans int64
	wall  time.Duration
	cpu   time.Duration
}

// TestCores measures the receiver's ingest alone (otel profile, flushes
// dropped) under GOMAXPROCS=1 and 2, two children side by side, slots
// interleaved, several connections posting at once (make bench-cores).
func TestCores(t *testing.T) {
	ctx := context.Background()
	w := NewWorkload(*coresTuples)
	procs := []int{1, 2}
	children := map[int]*Child{}
	senders := map[int]*Sender{}
	for _, p := range procs {
		c, err := StartChild(ChildConfig{Profile: "otel", Tuples: *coresTuples, FlushInterval: 5 * time.Second, ReceiverOnly: true},
			fmt.Sprintf("GOMAXPROCS=%d", p))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Stop() })
		s := NewSender(c.Receiver, *coresConns)
		t.Cleanup(s.Close)
		if _, err := s.Post(ctx, w.Bodies, 1); err != nil { // every tuple known
			t.Fatal(err)
		}
		children[p], senders[p] = c, s
	}
	slots := map[int][]coreSlot{}
	for range *coresSlots {
		for _, p := range procs {
			sl, err := measureSlot(ctx, children[p], senders[p], w, *coresSlot)
			if err != nil {
				t.Fatal(err)
			}
			slots[p] = append(slots[p], sl)
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\nbench/scale TestCores: the receiver alone (otel profile, %d tuples known, flushes dropped), %d connections posting\n", *coresTuples, *coresConns)
	fmt.Fprintln(tw, "GOMAXPROCS\tslot\tspans/s\tCPU ns/span\tcores busy\t")
	best := map[int]float64{}
	median := map[int]float64{}
	for _, p := range procs {
		var rates []float64
		for i, sl := range slots[p] {
			rate := float64(sl.spans) / sl.wall.Seconds()
			rates = append(rates, rate)
			fmt.Fprintf(tw, "%d\t%d\t%.0f\t%.0f\t%.2f\t\n", p, i+1, rate, per(sl.cpu, sl.spans), sl.cpu.Seconds()/sl.wall.Seconds())
		}
		slices.Sort(rates)
		best[p], median[p] = rates[len(rates)-1], rates[len(rates)/2]
	}
	_ = tw.Flush()
	ratio := best[2] / best[1]
	fmt.Printf("GOMAXPROCS=2 ÷ 1, spans/s: best slots %.2f, median slots %.2f (target ≥ %.1f): %s\n",
		ratio, median[2]/median[1], minCoresRatio, verdict(ratio >= minCoresRatio))
	if *coresProf != "" {
		if err := contention(ctx, t, w); err != nil {
			t.Fatal(err)
		}
	}
}

// measureSlot posts whole passes for at least d and reads the child's CPU
// over them.
func measureSlot(ctx context.Context, c *Child, s *Sender, w *Workload, d time.Duration) (coreSlot, error) {
	var sl coreSlot
	cpu0, err := c.CPU()
	if err != nil {
		return sl, err
	}
	for sl.wall < d {
		wall, err := s.Post(ctx, w.Bodies, 1)
		if err != nil {
			return sl, err
		}
		sl.wall += wall
		sl.spans += int64(w.Spans())
	}
	cpu1, err := c.CPU()
	sl.cpu = cpu1 - cpu0
	return sl, err
}

// contention runs one slot in a GOMAXPROCS=2 child with the mutex and block
// profiles on, saves them and prints their top entries.
func contention(ctx context.Context, t *testing.T, w *Workload) error {
	c, err := StartChild(ChildConfig{Profile: "otel", Tuples: *coresTuples, FlushInterval: 5 * time.Second, ReceiverOnly: true, MutexProfile: true}, "GOMAXPROCS=2")
	if err != nil {
		return err
	}
	defer func() { _ = c.Stop() }()
	s := NewSender(c.Receiver, *coresConns)
	defer s.Close()
	if _, err := s.Post(ctx, w.Bodies, 1); err != nil {
		return err
	}
	// A CPU profile over the slot: the share of ingest spent under the
	// aggregator's lock (traffic.(*Aggregator).record, Add's part under
	// it, and Take's) bounds how far a second core can help.
	if err := os.MkdirAll(*coresProf, 0o755); err != nil {
		return err
	}
	cpuPath := filepath.Join(*coresProf, "cpu.pb.gz")
	cpuDone := make(chan error, 1)
	go func() {
		cpuDone <- c.Profile(fmt.Sprintf("profile?seconds=%d", int(coresSlot.Seconds())), cpuPath)
	}()
	sl, err := measureSlot(ctx, c, s, w, *coresSlot)
	if err != nil {
		return err
	}
	if err := <-cpuDone; err != nil {
		return err
	}
	out, err := exec.Command("go", "tool", "pprof", "-top", "-cum", "-nodecount=40", cpuPath).CombinedOutput()
	if err != nil {
		return fmt.Errorf("go tool pprof %s: %v\n%s", cpuPath, err, out)
	}
	for line := range strings.Lines(string(out)) {
		// The total, the ingest path and the lock's holders.
		if strings.Contains(line, " total") || strings.Contains(line, "handleTraces ") || strings.Contains(line, "(*Aggregator).Add") ||
			strings.Contains(line, "(*Aggregator).add") || strings.Contains(line, "(*Aggregator).record") || strings.Contains(line, "(*Aggregator).prepare") ||
			strings.Contains(line, "(*Aggregator).Take") || strings.Contains(line, "CountProto") || strings.Contains(line, "gcBgMarkWorker") {
			fmt.Print(line)
		}
	}
	fmt.Printf("\nprofiled GOMAXPROCS=2 slot: %.0f spans/s, %.2f cores busy\n", float64(sl.spans)/sl.wall.Seconds(), sl.cpu.Seconds()/sl.wall.Seconds())
	for _, name := range []string{"mutex", "block"} {
		path := filepath.Join(*coresProf, name+".pb.gz")
		if err := c.Profile(name, path); err != nil {
			return err
		}
		out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=15", path).CombinedOutput()
		if err != nil {
			return fmt.Errorf("go tool pprof %s: %v\n%s", path, err, out)
		}
		fmt.Printf("\n%s profile (%s):\n%s", name, path, strings.TrimSpace(string(out))+"\n")
	}
	return nil
}
