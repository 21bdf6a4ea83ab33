package health

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// Poll outcomes, the `outcome` attribute of
// otelcol_receiver_gateway_health_polls: a bounded set, one constant each.
const (
	outcomeSuccess        = "success"
	outcomeConnection     = "connection_error"
	outcomeTimeout        = "timeout"
	outcomeHTTPStatus     = "http_status"
	outcomeMalformed      = "malformed"
	outcomePaginationLoop = "pagination_loop"
	// outcomeForeignOrigin: a redirect or a `next` page that leaves the
	// endpoint's origin, refused (origin.go).
	outcomeForeignOrigin = "foreign_origin"
	// outcomeTooLarge: an answer larger than max_response_body_size,
	// refused (body.go).
	outcomeTooLarge = "too_large"
)

var pollOutcomes = [...]string{outcomeSuccess, outcomeConnection, outcomeTimeout, outcomeHTTPStatus, outcomeMalformed, outcomePaginationLoop,
	outcomeForeignOrigin, outcomeTooLarge}

// pollError is a failed fetch with the outcome it is counted under.
type pollError struct {
	outcome string
	err     error
}

func (e *pollError) Error() string { return e.err.Error() }
func (e *pollError) Unwrap() error { return e.err }

// outcomeOf classifies a fetch error (nil is a success).
func outcomeOf(err error) string {
	var pe *pollError
	var ne net.Error
	switch {
	case err == nil:
		return outcomeSuccess
	case errors.As(err, &pe):
		return pe.outcome
	case errors.Is(err, gateway.ErrPaginationLoop):
		return outcomePaginationLoop
	case errors.Is(err, gateway.ErrMalformed):
		return outcomeMalformed
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return outcomeTimeout
	}
	return outcomeConnection
}

// fatal reports whether a fetch error says the admin API as a whole is
// unreachable (rather than one upstream's answer being bad): the rest of
// the poll is abandoned instead of timing out request by request.
func fatal(err error) bool {
	o := outcomeOf(err)
	return o == outcomeConnection || o == outcomeTimeout
}

// poller polls one admin API on its own goroutine. A poll starts every
// interval and spreads its requests over it (pace.go). Polls never overlap:
// one that runs past its interval delays the next, so a slow API slows its
// own poller only. After a failure the next poll waits 2, 4, then 8
// intervals from the failure's end (backoffMaxMultiplier).
//
// Written by hand rather than on scraperhelper's controller: the
// controller runs every scraper of a receiver in one loop (a slow admin API
// would delay the others), has no backoff, and hands pmetric straight to
// the next consumer, while pollers here feed one state table shared with
// pushed events. Its habits are kept: poll at once on start, cancel with the
// component, a timeout per request through confighttp.
type poller struct {
	spec     *gateway.PollerSpec
	gkind    gateway.Kind
	name     string // "kong[0]", for logs
	instance string
	cfg      PollerConfig
	base     *url.URL
	client   *http.Client
	h        *Health
	logger   *zap.Logger
	maxConc  int
	// origin is the endpoint's: the only one requests may go to.
	origin origin
	// maxBody bounds one answer's body (max_response_body_size).
	maxBody int64
	// pace spaces the requests of a poll (pace.go); nil for a poller
	// driven by hand (Manual), whose polls run unpaced.
	pace *pacer

	// Loop state, owned by the poller's goroutine.
	gen         uint64
	failures    int
	lastOutcome string
	// took is how long the last poll ran; overran marks a poll that ran
	// past its interval (logged once per streak).
	took    time.Duration
	overran bool
	// requests counts the current poll's requests (for the overrun log).
	requests atomic.Int64

	attrs    attribute.Set
	outcomes map[string]attribute.Set
}

func (p *poller) run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		p.poll(ctx)
		timer.Reset(p.nextDelay())
	}
}

// nextDelay is the wait before the next poll: what is left of the
// interval after a successful poll (none when it overran), a backoff of
// whole intervals after a failure.
func (p *poller) nextDelay() time.Duration {
	iv := p.cfg.interval(p.spec)
	if p.failures == 0 {
		return max(iv-p.took, 0)
	}
	mult := 1 << min(p.failures, 3) // 2, 4, 8 intervals
	return time.Duration(min(mult, backoffMaxMultiplier)) * iv
}

// poll runs one poll, records its telemetry, logs a change of outcome once
// and, after a failure, lets rows that have gone unconfirmed too long turn
// unknown.
func (p *poller) poll(ctx context.Context) {
	p.gen++
	start := time.Now()
	p.requests.Store(0)
	if p.pace != nil {
		p.pace.begin(start, time.Duration(spreadFraction*float64(p.cfg.interval(p.spec))))
	}
	complete, err := p.spec.Poll(ctx, session{p: p, gen: p.gen})
	if complete && ctx.Err() == nil {
		p.h.table.sweep(p, p.gen)
	}
	if ctx.Err() != nil {
		return // shutting down: neither count nor log the cut-short poll
	}
	end := time.Now()
	p.took = end.Sub(start)
	p.logOverrun()
	outcome := outcomeOf(err)
	tel := p.h.tel
	tel.ReceiverGatewayHealthPolls.Add(ctx, 1, metric.WithAttributeSet(p.outcomes[outcome]))
	tel.ReceiverGatewayHealthPollDuration.Record(ctx, end.Sub(start).Seconds(), metric.WithAttributeSet(p.attrs))
	if err == nil {
		p.failures = 0
		tel.ReceiverGatewayHealthLastSuccess.Record(ctx, end.Unix(), metric.WithAttributeSet(p.attrs))
	} else {
		p.failures++
		p.h.table.expireStale(end, p.h.cfg.StaleAfter)
	}
	if outcome != p.lastOutcome {
		switch {
		case err != nil:
			p.logger.Warn("Health poll failed; logged again only when the outcome changes",
				zap.String("outcome", outcome), zap.Error(err), zap.Duration("next_poll_in", p.nextDelay()))
		case p.lastOutcome != "":
			p.logger.Info("Health poll succeeds again", zap.String("previous_outcome", p.lastOutcome))
		}
		p.lastOutcome = outcome
	}
	p.h.notify()
}

// session is one poll's PollSession: what a gateway's poll function may
// do with the poller and the table.
type session struct {
	p   *poller
	gen uint64
}

// Get waits for the request's slot (pace.go), then fetches ref.
func (s session) Get(ctx context.Context, ref string) ([]byte, error) {
	if s.p.pace != nil {
		if err := s.p.pace.wait(ctx); err != nil {
			return nil, err
		}
	}
	s.p.requests.Add(1)
	return s.p.get(ctx, ref)
}

// Expect spreads the n requests the poll is about to make over what is
// left of its interval.
func (s session) Expect(n int) {
	if s.p.pace != nil {
		s.p.pace.expect(time.Now(), n)
	}
}

// InShard reports whether this collector polls the upstream.
func (s session) InShard(upstream string) bool {
	sh := s.p.h.cfg.Shard
	return sh.Count <= 1 || xxhash.Sum64String(upstream)%uint64(sh.Count) == uint64(sh.Index)
}

// Apply records what the poll reported: every row is confirmed now and
// marked seen in this generation; a change wakes the emitter.
func (s session) Apply(obs []gateway.TargetHealth) {
	if s.p.h.table.applyPoll(s.p, s.gen, time.Now(), obs) {
		s.p.h.notify()
	}
}

func (s session) Keep(upstream string) { s.p.h.table.keepUpstream(s.p, s.gen, upstream) }
func (s session) Fatal(err error) bool { return fatal(err) }
func (s session) MaxConcurrency() int  { return s.p.maxConc }
func (s session) PageSize() int        { return s.p.cfg.pageSize() }

// get fetches a path (with query) relative to the endpoint and returns the
// body of a 200 answer. A reference that resolves to another origin (an
// absolute or scheme-relative `next`) is refused unsent (foreign_origin), as
// is a redirect to another origin. Any other status is an http_status error
// quoting the start of the body; an answer larger than
// max_response_body_size is refused (too_large) without reading the rest.
func (p *poller) get(ctx context.Context, ref string) ([]byte, error) {
	u, err := p.base.Parse(ref)
	if err != nil {
		return nil, &pollError{outcomeMalformed, errors.New("bad next page reference " + strconv.Quote(ref) + ": " + err.Error())}
	}
	if originOf(u) != p.origin {
		return nil, foreignOrigin("page reference "+strconv.Quote(ref)+", resolved to", u, p.origin)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), http.NoBody)
	if err != nil {
		return nil, err
	}
	// APISIX answers /v1/healthcheck in HTML to browsers; ask for JSON.
	req.Header.Set("Accept", "application/json")
	if p.cfg.AdminToken != "" {
		req.Header.Set("Kong-Admin-Token", string(p.cfg.AdminToken))
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	// Closing before the end drops the connection: what is left of a
	// refused answer is never read.
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		head, _ := io.ReadAll(io.LimitReader(resp.Body, statusBodyPrefix))
		return head, &pollError{outcomeHTTPStatus, &gateway.StatusError{Code: resp.StatusCode, URL: u.Redacted(), Body: head}}
	}
	if resp.ContentLength > p.maxBody {
		return nil, &pollError{outcomeTooLarge, &tooLargeError{url: u.Redacted(), poller: p.name, limit: p.maxBody, announced: resp.ContentLength}}
	}
	body, err := readBody(resp.Body, p.maxBody)
	if errors.Is(err, errTooLarge) {
		return nil, &pollError{outcomeTooLarge, &tooLargeError{url: u.Redacted(), poller: p.name, limit: p.maxBody, announced: -1}}
	}
	if err != nil {
		return nil, err
	}
	return body, nil
}

// logOverrun warns once when polls start running past their interval (the
// API answers too slowly for the requests to fit, or request_rate is too
// low for them), and says when they fit again.
func (p *poller) logOverrun() {
	iv := p.cfg.interval(p.spec)
	over := p.took > iv
	if over == p.overran {
		return
	}
	p.overran = over
	if over {
		p.logger.Warn("Health poll ran past its interval; the next starts at once. Raise interval (and stale_after), max_concurrency or request_rate; logged again only when polls fit again",
			zap.Duration("took", p.took), zap.Duration("interval", iv), zap.Int64("requests", p.requests.Load()),
			zap.Int("max_concurrency", p.maxConc), zap.Float64("request_rate", p.cfg.RequestRate))
		return
	}
	p.logger.Info("Health polls fit their interval again", zap.Duration("took", p.took), zap.Duration("interval", iv))
}
