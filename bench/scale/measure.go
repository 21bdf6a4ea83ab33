package scale

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Case is one row of the scale table.
type Case struct {
	Profile       string
	Tuples        int
	FlushInterval time.Duration
	// MinSpans: the measured ingest posts whole passes until at least this
	// many spans, the same at every size, so every row's ingest figure is
	// over as much work.
	MinSpans int
	Conns    int // sender connections
	// Profiles is where to save the child's profiles ("": nowhere): its
	// heap after the scrapes, its mutex contention (on, fraction 1 in 10)
	// after the full flush and after the scrapes.
	Profiles string
	// TraceFlush > 0 saves an execution trace of that long (into
	// Profiles), from a second before the full flush's tick: what the
	// probe's longest post waited for.
	TraceFlush time.Duration
}

// Result is what one case measured.
type Result struct {
	Case
	Requests      int64 // posted, probe left out
	IdleRSS       int64 // the child before any request
	RSS, PeakRSS  int64 // after the scrapes; the peak over the whole case
	HeapInuse     uint64
	ColdSpans     int64
	ColdWall      time.Duration // the first pass: every tuple new
	ColdCPU       time.Duration
	Spans         int64 // the measured passes: every tuple known
	Wall          time.Duration
	CPU           time.Duration
	IngestFlushed bool // a flush ran during the measured passes
	Flush         Flush
	FlushCPU      time.Duration // the child's CPU over the flush (probe posts included)
	// Longest probe posts: before the flush (quiet), during the flush,
	// during the plain and the gzip scrape.
	Quiet, PauseFlush, PausePlain, PauseGzip time.Duration
	ProbesFlush                              int
	Plain, Gzip                              Scrape
	PlainCPU, GzipCPU                        time.Duration
	Exact                                    bool
}

// counterOf is the profile's requests counter as served.
func counterOf(profile string) string {
	if profile == "kong" {
		return "kong_http_requests_total"
	}
	return "gateway_requests_total"
}

// Run measures one case: a child collector, one cold pass (every tuple
// new), then, right after the flush of that pass, the measured passes
// (every tuple known); the flush of those with the probe running, then a
// plain and a gzip scrape with the probe running; memory last.
func Run(ctx context.Context, c Case, w *Workload, logf func(string, ...any)) (Result, error) {
	r := Result{Case: c}
	child, err := StartChild(ChildConfig{Profile: c.Profile, Tuples: c.Tuples, FlushInterval: c.FlushInterval, MutexProfile: c.Profiles != ""})
	if err != nil {
		return r, err
	}
	defer func() { _ = child.Stop() }()
	r, err = run(ctx, c, w, child, logf)
	if err != nil {
		time.Sleep(100 * time.Millisecond) // a child that died: let Wait see it
		if how := child.Exited(); how != "" {
			err = fmt.Errorf("%w (%s)", err, how)
		}
	}
	return r, err
}

func run(ctx context.Context, c Case, w *Workload, child *Child, logf func(string, ...any)) (Result, error) {
	r := Result{Case: c}
	var err error
	// Idle: started, its first GC cycles done, nothing received.
	time.Sleep(time.Second)
	if r.IdleRSS, _, err = child.Mem(); err != nil {
		return r, err
	}
	s := NewSender(child.Receiver, c.Conns)
	defer s.Close()

	cpu0, _ := child.CPU()
	if r.ColdWall, err = s.Post(ctx, w.Bodies, 1); err != nil {
		return r, err
	}
	cpu1, _ := child.CPU()
	r.ColdCPU, r.ColdSpans = cpu1-cpu0, int64(w.Spans())
	r.Requests = int64(w.Requests())
	coldEnd := time.Now().UnixNano()
	st, err := child.Stats()
	if err != nil {
		return r, err
	}
	coldFlush, err := child.WaitFlush(ctx, coldEnd)
	if err != nil {
		return r, err
	}
	logf("%s %d: cold pass %v, its flush %v (%d points)", c.Profile, c.Tuples, r.ColdWall.Round(time.Millisecond),
		time.Duration(coldFlush.End-coldFlush.Start).Round(time.Millisecond), coldFlush.Points)

	rounds := max(1, (c.MinSpans+w.Spans()-1)/w.Spans())
	cpu0, _ = child.CPU()
	warmStart := time.Now().UnixNano()
	if r.Wall, err = s.Post(ctx, w.Bodies, rounds); err != nil {
		return r, err
	}
	warmEnd := time.Now().UnixNano()
	cpu1, _ = child.CPU()
	r.CPU, r.Spans = cpu1-cpu0, int64(rounds*w.Spans())
	r.Requests += int64(rounds * w.Requests())
	if st, err = child.Stats(); err != nil {
		return r, err
	}
	for _, f := range st.Flushes {
		r.IngestFlushed = r.IngestFlushed || f.End >= warmStart && f.Start <= warmEnd
	}

	// The flush of the measured passes: every tuple touched. The probe
	// starts a second before its tick.
	next := tickAt(st, warmEnd) + 1
	if wait := time.Until(time.Unix(0, st.Started+int64(next)*int64(st.Interval)).Add(-time.Second)); wait > 0 {
		time.Sleep(wait)
	}
	traced := make(chan error, 1)
	if c.TraceFlush > 0 && c.Profiles != "" {
		go func() {
			traced <- saveProfile(child, c, fmt.Sprintf("trace?seconds=%d", int(c.TraceFlush.Seconds())), "during-flush")
		}()
	} else {
		traced <- nil
	}
	probe := StartProbe(child.Receiver)
	defer func() { _ = probe.Stop() }()
	quietFrom := time.Now().UnixNano()
	cpu0, _ = child.CPU()
	if r.Flush, err = child.WaitFlush(ctx, warmEnd); err != nil {
		return r, err
	}
	cpu1, _ = child.CPU()
	r.FlushCPU = cpu1 - cpu0
	r.Quiet, _ = probe.Longest(quietFrom, r.Flush.Start-int64(10*time.Millisecond))
	r.PauseFlush, r.ProbesFlush = probe.Longest(r.Flush.Start, r.Flush.End)
	if err := <-traced; err != nil {
		return r, err
	}
	if err := saveProfile(child, c, "mutex", "after-flush"); err != nil {
		return r, err
	}
	logf("%s %d: measured passes %v, full flush %v (%d points), longest probe post during it %v",
		c.Profile, c.Tuples, r.Wall.Round(time.Millisecond), time.Duration(r.Flush.End-r.Flush.Start).Round(time.Millisecond),
		r.Flush.Points, r.PauseFlush.Round(time.Millisecond))

	for _, gz := range []bool{false, true} {
		cpu0, _ = child.CPU()
		t0 := time.Now().UnixNano()
		sc, err := DoScrape(child.Metrics, gz, counterOf(c.Profile))
		if err != nil {
			return r, err
		}
		t1 := time.Now().UnixNano()
		cpu1, _ = child.CPU()
		pause, _ := probe.Longest(t0, t1)
		if gz {
			r.Gzip, r.GzipCPU, r.PauseGzip = sc, cpu1-cpu0, pause
		} else {
			r.Plain, r.PlainCPU, r.PausePlain = sc, cpu1-cpu0, pause
		}
	}
	if err := probe.Stop(); err != nil {
		return r, fmt.Errorf("probe: %w", err)
	}
	r.Exact = r.Plain.Requests == float64(r.Requests) && r.Gzip.Requests == float64(r.Requests)

	if r.RSS, r.PeakRSS, err = child.Mem(); err != nil {
		return r, err
	}
	if st, err = child.Stats(); err != nil {
		return r, err
	}
	r.HeapInuse = st.HeapInuse
	if err := saveProfile(child, c, "mutex", "after-scrapes"); err != nil {
		return r, err
	}
	if err := saveProfile(child, c, "heap", "after-scrapes"); err != nil {
		return r, err
	}
	return r, child.Stop()
}

// saveProfile saves the child's profile name, taken after phase, when the
// case keeps profiles.
func saveProfile(child *Child, c Case, name, phase string) error {
	if c.Profiles == "" {
		return nil
	}
	if err := os.MkdirAll(c.Profiles, 0o755); err != nil {
		return err
	}
	file := strings.ReplaceAll(strings.ReplaceAll(name, "?", "-"), "=", "")
	return child.Profile(name, filepath.Join(c.Profiles, fmt.Sprintf("%s-%s-%d-%s.pb.gz", file, c.Profile, c.Tuples, phase)))
}

// tickAt is the tick k whose interval [Started + k × Interval, +Interval)
// holds t (Unix ns).
func tickAt(s Stats, t int64) int { return int((t - s.Started) / int64(s.Interval)) }
