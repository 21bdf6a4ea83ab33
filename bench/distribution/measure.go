package distribution

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Options is one run's settings, from TestReport's flags.
type Options struct {
	Rates       []int         // spans/s, in order; a contender stops at the first step it does not sustain
	Step        time.Duration // how long each rate is held
	ScrapeEvery time.Duration // /metrics is scraped this often while a step runs, as Prometheus would
	Settle      time.Duration // longest wait after a step for the served counts to reach the acknowledged ones
	CPU         string        // taskset CPU list of the collector ("" = not pinned)
}

// Step is one rate held against one contender.
type Step struct {
	Load
	CPU       time.Duration // collector user+sys over the step and its settling
	Waited    time.Duration // collector threads ready but waiting for a CPU over the same time
	Client    time.Duration // this process's user+sys over the step: the sender (and the scrapes' parsing)
	RSSMax    int64         // highest VmRSS sampled (every 250 ms) over the step and its settling
	HWM       int64         // VmHWM at the end of the step
	Scrapes   []Scrape      // the scrapes taken while the load ran
	Final     Scrape        // the scrape whose counts were compared (the last one taken while settling)
	Settled   time.Duration // last answer to exact counts; Settle when they never were
	Want      int64         // requests acknowledged since the start (spans / 2: one `kong` root span per request)
	Exact     bool          // Final's request counter and histogram count both equal Want
	Sustained bool          // every export acknowledged, ≥ 95 % of the rate, exact counts
	Alive     bool
	Attempt   int  // 1, or 2 when the first attempt at this rate was not sustained
	Refine    bool // the step between the last rate sustained and the first one not
}

// CPUPerSpan is the collector's CPU nanoseconds per acknowledged span.
func (s Step) CPUPerSpan() float64 { return float64(s.CPU.Nanoseconds()) / float64(max(1, s.Acked)) }

// MedianScrape is the median time of the scrapes taken under load (0 if none).
func (s Step) MedianScrape() time.Duration {
	if len(s.Scrapes) == 0 {
		return 0
	}
	d := make([]time.Duration, len(s.Scrapes))
	for i, x := range s.Scrapes {
		d[i] = x.Took
	}
	slices.Sort(d)
	return d[len(d)/2]
}

const (
	// minSustained is the share of the asked rate a step must reach.
	minSustained = 0.95
	// attempts is how often a rate is held before a contender that did not
	// sustain it is stopped.
	attempts = 2
)

// Run starts every contender, then climbs the rates: each rate is held
// with every contender still climbing, one after the other, so load from
// other jobs on a shared machine falls on all of them alike. A contender
// that does not sustain a rate twice in a row holds the rate halfway (on a
// log scale) to the last one it sustained, then is stopped. The
// counters are cumulative over the whole run, so every step compares the
// served totals with everything acknowledged so far.
func Run(cs []Contender, w *Workload, o Options) (_ map[string][]Step, err error) {
	type running struct {
		c     Contender
		p     *Process
		s     *Sender
		spans int64
		last  int // highest rate sustained so far
	}
	var rs []*running
	stop := func(r *running) {
		r.s.Close()
		if serr := r.p.Stop(); serr != nil && err == nil {
			err = fmt.Errorf("%s: %w", r.c.Key, serr)
		}
		r.p = nil
	}
	defer func() {
		for _, r := range rs {
			if r.p != nil {
				stop(r)
			}
		}
		scrapeClient.CloseIdleConnections()
	}()
	for _, c := range cs {
		p, err := Start(c, o.CPU)
		if err != nil {
			return nil, err
		}
		rs = append(rs, &running{c: c, p: p, s: NewSender(w, p.OTLP)})
	}
	steps := map[string][]Step{}
	// climb holds rate up to attempts times: on a shared machine one burst
	// of other jobs' work can sink a single step. It reports whether the
	// rate was sustained, and whether the process still runs.
	climb := func(r *running, rate int, refine bool) (sustained, alive bool) {
		for attempt := 1; attempt <= attempts; attempt++ {
			st := hold(r.p, r.c, r.s, rate, o, &r.spans)
			st.Attempt, st.Refine = attempt, refine
			steps[r.c.Key] = append(steps[r.c.Key], st)
			if st.Sustained || !st.Alive {
				return st.Sustained, st.Alive
			}
		}
		return false, true
	}
	for _, rate := range o.Rates {
		for _, r := range rs {
			if r.p == nil {
				continue
			}
			ok, alive := climb(r, rate, false)
			if ok {
				r.last = rate
				continue
			}
			// One step between the last rate sustained and this one (their
			// geometric mean), so the ladder's resolution is √2, not 2.
			if mid := int(math.Sqrt(float64(r.last)*float64(rate))) / 1000 * 1000; alive && r.last > 0 && mid > r.last && mid < rate {
				climb(r, mid, true)
			}
			stop(r)
		}
	}
	return steps, nil
}

// hold runs one step: the load, the scrapes beside it, then the wait for
// exact counts.
func hold(p *Process, c Contender, s *Sender, rate int, o Options, spans *int64) Step {
	var st Step
	pid := p.Pid()
	cpu0, _ := CPU(pid)
	wait0, _ := RunqueueWait(pid)
	self0 := selfCPU()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	wg.Go(func() { // RSS sampler
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			if rss, _, err := Memory(pid); err == nil {
				mu.Lock()
				st.RSSMax = max(st.RSSMax, rss)
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	loadDone := make(chan struct{})
	wg.Go(func() { // Prometheus-like scrapes while the load runs
		t := time.NewTicker(o.ScrapeEvery)
		defer t.Stop()
		for {
			select {
			case <-loadDone:
				return
			case <-t.C:
				if sc, err := ScrapeOnce(p.Metrics, c); err == nil {
					mu.Lock()
					st.Scrapes = append(st.Scrapes, sc)
					mu.Unlock()
				}
			}
		}
	})

	st.Load = s.Run(ctx, rate, o.Step)
	close(loadDone)
	st.Client = selfCPU() - self0
	*spans += st.Acked
	st.Want = *spans / (SpansPerExport / RequestsPerExport)
	end := time.Now()
	for {
		if sc, err := ScrapeOnce(p.Metrics, c); err == nil {
			st.Final = sc
			if sc.Requests == st.Want && sc.Counted == st.Want {
				st.Exact, st.Settled = true, time.Since(end)
				break
			}
		}
		if time.Since(end) > o.Settle || !p.Alive() {
			st.Settled = time.Since(end)
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	cpu1, _ := CPU(pid)
	wait1, _ := RunqueueWait(pid)
	st.CPU, st.Waited = cpu1-cpu0, wait1-wait0
	_, st.HWM, _ = Memory(pid)
	st.Alive = p.Alive()
	st.Sustained = st.Alive && st.Refused == 0 && st.Exact && st.Rate() >= minSustained*float64(rate)
	return st
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
