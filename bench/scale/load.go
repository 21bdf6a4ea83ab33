package scale

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/otelgateway/otelgateway/bench/kongload"
)

// Sender posts bodies over Conns keep-alive loopback connections, each
// posting its next body as soon as its last was answered: a fleet of
// gateway nodes sending as fast as the collector takes it.
type Sender struct {
	url    string
	conns  int
	client *http.Client
}

// NewSender posts to addr's /v1/traces over conns connections.
func NewSender(addr string, conns int) *Sender {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, DisableCompression: true}
	return &Sender{url: "http://" + addr + "/v1/traces", conns: conns, client: &http.Client{Transport: tr, Timeout: 5 * time.Minute}}
}

// Close drops the idle connections.
func (s *Sender) Close() { s.client.CloseIdleConnections() }

// Post posts every body of bodies, rounds times over, and returns the wall
// time it took; the first refusal ends it.
func (s *Sender) Post(ctx context.Context, bodies [][]byte, rounds int) (time.Duration, error) {
	total := len(bodies) * rounds
	var next atomic.Int64
	var first error
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range s.conns {
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= total || ctx.Err() != nil {
					return
				}
				if err := s.post(ctx, bodies[k%len(bodies)]); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					next.Store(int64(total)) // stop the others
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), first
}

func (s *Sender) post(ctx context.Context, body []byte) error {
	return kongload.Post(ctx, s.client, s.url, body)
}

// Probe posts one small export after another on its own connection and
// keeps each post's start and end: how long ingest stalls while something
// else (a flush, a scrape) runs.
type Probe struct {
	s      *Sender
	body   []byte
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	posts []span
	err   error
}

type span struct{ start, end int64 } // Unix ns

// StartProbe starts posting ProbeBody to addr.
func StartProbe(addr string) *Probe {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Probe{s: NewSender(addr, 1), body: ProbeBody(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			t0 := time.Now().UnixNano()
			err := p.s.post(ctx, p.body)
			t1 := time.Now().UnixNano()
			p.mu.Lock()
			if err != nil && ctx.Err() == nil && p.err == nil {
				p.err = err
			}
			p.posts = append(p.posts, span{t0, t1})
			p.mu.Unlock()
			// One post per millisecond at most: a probe, not a load.
			if d := time.Millisecond - time.Duration(t1-t0); d > 0 {
				time.Sleep(d)
			}
		}
	}()
	return p
}

// Stop stops the probe and returns its first error.
func (p *Probe) Stop() error {
	p.cancel()
	<-p.done
	p.s.Close()
	return p.err
}

// Longest is the longest post that overlapped [from, to] (Unix ns), and
// how many posts did.
func (p *Probe) Longest(from, to int64) (time.Duration, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var longest int64
	n := 0
	for _, s := range p.posts {
		if s.end >= from && s.start <= to {
			longest = max(longest, s.end-s.start)
			n++
		}
	}
	return time.Duration(longest), n
}

// Requests is the number of probe posts answered so far.
func (p *Probe) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.posts)
}
