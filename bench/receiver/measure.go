package receiver

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"syscall"
	"time"
)

// Result is one contender's row.
type Result struct {
	Key    string
	Rounds int
	Spans  int64         // spans posted in the measured rounds
	Wall   time.Duration // measured rounds, one client goroutine, posts back to back
	CPU    time.Duration // process user+sys over the same rounds: client, server, flushes, GC
	Allocs uint64        // heap objects allocated by the process over the same rounds
	Bytes  uint64        // heap bytes allocated by the process over the same rounds
	// Want and Counted are the requests posted (warm-up included) and the
	// requests the delta output reported; Counted is -1 without output.
	Want, Counted int64
}

// NsPerSpan is wall-clock nanoseconds per span.
func (r Result) NsPerSpan() float64 { return float64(r.Wall.Nanoseconds()) / float64(r.Spans) }

// CPUPerSpan is process CPU nanoseconds per span.
func (r Result) CPUPerSpan() float64 { return float64(r.CPU.Nanoseconds()) / float64(r.Spans) }

// Exact reports whether the delta output counted every request posted (true
// for a path without output).
func (r Result) Exact() bool { return r.Counted < 0 || r.Counted == r.Want }

var allocSamples = []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}

func heapAllocs() (objects, bytes uint64) {
	metrics.Read(allocSamples)
	return allocSamples[0].Value.Uint64(), allocSamples[1].Value.Uint64()
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Measure runs one contender: one warm-up round over every body (every label
// tuple is then cached: the measured rounds take the cached path), then whole
// rounds until at least d has passed, then the last window is drained and
// the path closed.
func Measure(key string, w *Workload, d time.Duration) (Result, error) {
	p, err := Start(key)
	if err != nil {
		return Result{}, err
	}
	res := Result{Key: key}
	round := func() error {
		for _, body := range w.Bodies {
			if err := p.Export(body); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
		}
		res.Want += int64(w.Requests)
		return nil
	}
	if err := round(); err != nil {
		return res, err
	}
	runtime.GC()
	a0, b0 := heapAllocs()
	c0, t0 := cpuTime(), time.Now()
	for res.Rounds == 0 || time.Since(t0) < d {
		if err := round(); err != nil {
			return res, err
		}
		res.Rounds++
	}
	res.Wall, res.CPU = time.Since(t0), cpuTime()-c0
	a1, b1 := heapAllocs()
	res.Allocs, res.Bytes = a1-a0, b1-b0
	res.Spans = int64(res.Rounds) * int64(len(w.Bodies)) * SpansPerExport
	if p.Counted() >= 0 {
		// The spanmetrics connector emits only on its ticker; ours also
		// flushes on shutdown. Wait up to three flush intervals for both.
		Drain(p, res.Want, 3*FlushEach)
	}
	err = p.Close()
	res.Counted = p.Counted()
	return res, err
}
