package distribution

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/otelgateway/otelgateway/bench/kongload"
)

// Senders is how many posts may be in flight at once: a fleet of gateway
// nodes, each with one export at a time (Kong's queue sends one batch at a
// time per worker).
const Senders = 8

// Load is what one step's sender achieved.
type Load struct {
	Target  int           // spans/s asked for
	Posts   int           // exports scheduled (Target × duration / SpansPerExport); those not started by 1.25 × duration are not sent
	Acked   int64         // spans in exports answered 2xx
	Refused int64         // exports answered otherwise, or failed
	Wall    time.Duration // from the first scheduled post to the last answer
	Late    time.Duration // how far behind schedule the latest post started
	Err     string        // the first refusal, for the report
}

// Rate is acknowledged spans per second of wall time.
func (l Load) Rate() float64 { return float64(l.Acked) / l.Wall.Seconds() }

// Sender posts the workload's bodies round-robin over keep-alive loopback
// connections (OTLP/HTTP protobuf).
type Sender struct {
	w      *Workload
	url    string
	client *http.Client
	next   int // next body, across steps
}

// NewSender posts to url (…/v1/traces).
func NewSender(w *Workload, url string) *Sender {
	tr := &http.Transport{MaxIdleConnsPerHost: Senders, MaxConnsPerHost: Senders, DisableCompression: true}
	return &Sender{w: w, url: url, client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// Close drops the idle connections.
func (s *Sender) Close() { s.client.CloseIdleConnections() }

// Run posts at rate spans/s for d, open loop: export k is due at start +
// k × SpansPerExport/rate, whatever happened to the exports before it. Up
// to Senders exports are in flight; when the collector answers slower than
// the schedule, posts start late and the step's wall time grows past d,
// which the achieved rate shows. No export starts after 1.25 × d: a step
// that far behind is not sustained whatever follows, and a collector at a
// third of the rate would otherwise hold it for 3 × d.
func (s *Sender) Run(ctx context.Context, rate int, d time.Duration) Load {
	posts := max(1, int(int64(rate)*int64(d/time.Millisecond)/1000/SpansPerExport))
	every := time.Duration(float64(time.Second) * SpansPerExport / float64(rate))
	l := Load{Target: rate, Posts: posts}
	var (
		next          atomic.Int64
		acked, refuse atomic.Int64
		late          atomic.Int64
		mu            sync.Mutex
		wg            sync.WaitGroup
	)
	first := s.next
	s.next += posts
	start := time.Now()
	cutoff := start.Add(d + d/4)
	for range Senders {
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= posts || ctx.Err() != nil || time.Now().After(cutoff) {
					return
				}
				due := start.Add(time.Duration(k) * every)
				if wait := time.Until(due); wait > 0 {
					time.Sleep(wait)
				} else {
					for cur := late.Load(); int64(-wait) > cur && !late.CompareAndSwap(cur, int64(-wait)); cur = late.Load() {
					}
				}
				body := s.w.Bodies[(first+k)%len(s.w.Bodies)]
				if err := s.post(ctx, body); err != nil {
					if refuse.Add(1) == 1 {
						mu.Lock()
						l.Err = err.Error()
						mu.Unlock()
					}
					continue
				}
				acked.Add(SpansPerExport)
			}
		})
	}
	wg.Wait()
	l.Wall = time.Since(start)
	l.Acked, l.Refused, l.Late = acked.Load(), refuse.Load(), time.Duration(late.Load())
	return l
}

func (s *Sender) post(ctx context.Context, body []byte) error {
	return kongload.Post(ctx, s.client, s.url, body)
}
