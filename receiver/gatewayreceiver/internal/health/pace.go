package health

import (
	"context"
	"sync"
	"time"
)

// Gentle on the gateway by default (issue 25, item 4): a poll's requests
// are spread evenly over its interval, a steady rate rather than a burst of
// max_concurrency requests. The admin API is served by the same workers as
// the proxy: a burst of 16 concurrent requests, each encoding a page of
// JSON, queues proxy requests behind it; the same requests one at a time
// at a steady rate leave the workers idle between them.
//
// A poll starts every interval. The gateway's poll function says how many
// requests it is about to make (Kong: one per upstream, once the list is
// read); the pacer spaces their starts evenly over what is left of
// spreadFraction of the interval. Requests before the first Expect (Kong's
// list pages) keep the previous poll's spacing. With request_rate set, the
// starts are 1/request_rate apart instead, however long the poll takes. A request whose slot has passed (the
// API answered slowly) starts at once but never takes the slots of the
// requests behind it: the pacer never catches up in a burst.

// spreadFraction of the interval is what a poll's requests are spread
// over: the rest is the margin in which the last answers arrive, so a poll
// ends within its interval.
const spreadFraction = 0.9

// pacer hands out request start times for one poller.
type pacer struct {
	mu sync.Mutex
	// gap is the time between two request starts; 0: none.
	gap time.Duration
	// next is the earliest start of the next request.
	next time.Time
	// end is when this poll's requests should all have started.
	end time.Time
	// fixed is 1/request_rate; 0: spread over the interval.
	fixed time.Duration
}

// begin starts a poll at now that should have sent its requests within
// spread; until expect says how many there are, the last poll's spacing
// holds.
func (p *pacer) begin(now time.Time, spread time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.end = now.Add(spread)
	if p.fixed > 0 {
		p.gap = p.fixed
	}
}

// expect spreads n more requests over what is left of the poll's spread,
// from now.
func (p *pacer) expect(now time.Time, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fixed > 0 {
		return
	}
	p.gap = 0
	if left := p.end.Sub(now); left > 0 && n > 0 {
		p.gap = left / time.Duration(n)
	}
}

// wait blocks until the caller's request may start, or ctx ends.
//
// Concurrency: callers take slots in the order they call wait, under mu;
// each waits for its own slot outside the lock.
func (p *pacer) wait(ctx context.Context) error {
	p.mu.Lock()
	now := time.Now()
	at := p.next
	if at.Before(now) {
		// Behind (a slow answer): start now, and the next one a full gap
		// later, so lost slots are never made up in a burst.
		at = now
	}
	p.next = at.Add(p.gap)
	p.mu.Unlock()
	d := at.Sub(now)
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// rate is the current spacing as requests per second (0: unpaced).
func (p *pacer) rate() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gap <= 0 {
		return 0
	}
	return float64(time.Second) / float64(p.gap)
}
