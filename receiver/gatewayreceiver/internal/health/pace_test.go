package health

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// paceRun starts n requests through p from workers goroutines, each
// request lasting took (fake time), and returns every start's offset from
// the run's start, sorted, and the most requests that were in flight at
// once.
func paceRun(t *testing.T, p *pacer, n, workers int, took time.Duration) ([]time.Duration, int) {
	t.Helper()
	start := time.Now()
	var (
		mu               sync.Mutex
		starts           []time.Duration
		inFlight, peak   int
		work             = make(chan struct{})
		wg               sync.WaitGroup
		ctx, cancelAfter = context.WithCancel(context.Background())
	)
	defer cancelAfter()
	for range workers {
		wg.Go(func() {
			for range work {
				if err := p.wait(ctx); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				starts = append(starts, time.Since(start))
				inFlight++
				peak = max(peak, inFlight)
				mu.Unlock()
				time.Sleep(took)
				mu.Lock()
				inFlight--
				mu.Unlock()
			}
		})
	}
	for range n {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	slices.Sort(starts)
	return starts, peak
}

func ms(d ...time.Duration) []time.Duration {
	for i := range d {
		d[i] *= time.Millisecond
	}
	return d
}

// The requests a poll expects start evenly over its spread, one at a time
// when answers are quick, however many workers wait.
func TestPacerSpreadsRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &pacer{}
		p.begin(time.Now(), 900*time.Millisecond)
		p.expect(time.Now(), 10)
		starts, peak := paceRun(t, p, 10, 16, time.Millisecond)
		if want := ms(0, 90, 180, 270, 360, 450, 540, 630, 720, 810); !slices.Equal(starts, want) {
			t.Errorf("starts %v, want %v", starts, want)
		}
		if peak != 1 {
			t.Errorf("peak in flight %d, want 1", peak)
		}
		if r := p.rate(); r < 11.1 || r > 11.2 {
			t.Errorf("rate %v/s, want 11.1", r)
		}
	})
}

// Slow answers: more in flight, up to the workers, and a request whose slot
// has passed starts at once but the next keeps a full gap: never a burst.
func TestPacerNeverCatchesUpInABurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &pacer{}
		p.begin(time.Now(), time.Second)
		p.expect(time.Now(), 10) // 100 ms apart
		starts, peak := paceRun(t, p, 6, 1, 250*time.Millisecond)
		if want := ms(0, 250, 500, 750, 1000, 1250); !slices.Equal(starts, want) {
			t.Errorf("one worker, 250 ms answers: starts %v, want %v", starts, want)
		}
		if peak != 1 {
			t.Errorf("peak %d, want 1", peak)
		}

		p = &pacer{}
		p.begin(time.Now(), time.Second)
		p.expect(time.Now(), 10)
		starts, peak = paceRun(t, p, 10, 4, 250*time.Millisecond)
		for i := 1; i < len(starts); i++ {
			if d := starts[i] - starts[i-1]; d < 100*time.Millisecond {
				t.Errorf("starts %v and %v only %v apart", starts[i-1], starts[i], d)
			}
		}
		if peak != 3 {
			t.Errorf("four workers, 250 ms answers 100 ms apart: peak %d in flight, want 3", peak)
		}
	})
}

// request_rate sets the rate, whatever the spread would give.
func TestPacerFixedRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &pacer{fixed: 500 * time.Millisecond}
		p.begin(time.Now(), time.Second)
		p.expect(time.Now(), 100) // 9 ms apart by the spread
		starts, _ := paceRun(t, p, 4, 4, time.Millisecond)
		if want := ms(0, 500, 1000, 1500); !slices.Equal(starts, want) {
			t.Errorf("starts %v, want %v", starts, want)
		}
		p = &pacer{fixed: time.Millisecond}
		p.begin(time.Now(), time.Hour)
		p.expect(time.Now(), 4) // 15 minutes apart by the spread
		if starts, _ := paceRun(t, p, 4, 1, 0); !slices.Equal(starts, ms(0, 1, 2, 3)) {
			t.Errorf("starts %v, want 1 ms apart", starts)
		}
	})
}

// Past the spread's end the requests left start at once (the API was
// slow: the poll overran its interval).
func TestPacerPastTheSpread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &pacer{}
		p.begin(time.Now(), time.Second)
		time.Sleep(2 * time.Second)
		p.expect(time.Now(), 5)
		if starts, _ := paceRun(t, p, 5, 1, 0); starts[4] != 0 {
			t.Errorf("starts %v, want all at once", starts)
		}
	})
}

func TestPacerWaitEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &pacer{}
		p.begin(time.Now(), time.Hour)
		p.expect(time.Now(), 2)
		if err := p.wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		if err := p.wait(ctx); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Errorf("wait for a slot 30 min away: %v after %v, want the context's deadline after 1s", err, time.Since(start))
		}
	})
}
