package gateway

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kong's home: span detection and mapping (docs/gateways.md §1a), the
// http-log ingest path (kong_httplog.go, kong_ai.go; §1d), upstream health
// (kong_health.go; §1b), the Admin API poller below, and the opentelemetry
// plugin's pushed metrics (kong_metrics.go, kong_claims.go; §1e) under the
// Prometheus plugin's names (kong_prom.go; §1c).

// Kong's span names and attributes (§1a).
const (
	kongScope       = "kong-internal"
	kongBalancer    = "kong.balancer"
	kongBalancerOld = "balancer try #" // Kong 3.0–3.2
	attrNetPeerIP   = "net.peer.ip"
	attrNetPeerPort = "net.peer.port"
	attrNetPeerName = "net.peer.name"
	attrPeerService = "peer.service" // Enterprise only
	attrTryCount    = "try_count"
)

var kongGateway = Gateway{
	Name:     "kong",
	Scope:    kongScope,
	MapRoot:  mapKongRoot,
	MapChild: kongBalancerTry,
	Log: &LogSpec{
		Path: "/kong/http-log", Format: "kong_http_log",
		MediaTypes: []string{"application/json"},
		Decode:     DecodeKongHTTPLog,
	},
	HealthStates: []HealthState{HealthHealthy, HealthUnhealthy, HealthDNSError, HealthChecksOff, HealthUnknown},
	Poller:       &PollerSpec{Poll: pollKong, MaxConcurrency: 4, Interval: kongPollInterval, Paged: true, MaxResponseBodySize: kongMaxResponseBody},
	Metrics:      &kongMetrics,
}

// kongPollInterval is the Kong poller's default interval. A poll is one
// request per upstream, spread over the interval: at 10k upstreams every
// 30s that is ~370 requests/s, which moved a co-located proxy's p99 from
// 1.6 to 4.9 ms in bench/health TestGatewayCost, where every 10s (~1,100
// requests/s) moved it to 14.7 ms.
const kongPollInterval = 30 * time.Second

// mapKongRoot: Kong's root carries no route or service entity (§1a); the
// balancer spans add target, upstream and response source.
func mapKongRoot(e *Event, _ attrs) {
	e.Source = SourceGateway // until a successful balancer try says otherwise
}

// kongBalancerTry applies one balancer try (§1a): `kong.balancer` (≥ 3.3) or
// `balancer try #N` (3.0–3.2), numbers as doubles. The highest try is the
// one that answered (lastTry holds the highest seen); a failed try carries
// http.status_code and status ERROR.
func kongBalancerTry(e *Event, s *spanRec, a attrs, lastTry *float64) {
	if s.name != kongBalancer && !strings.HasPrefix(s.name, kongBalancerOld) {
		return
	}
	try := 0.0
	if v, ok := a.get(akTryCount); ok {
		try = v.number()
	}
	if try < *lastTry {
		return
	}
	*lastTry = try
	e.Target = a.str(akNetPeerIP)
	e.TargetPort = 0
	if v, ok := a.get(akNetPeerPort); ok {
		if p := v.number(); p > 0 && p < 65536 {
			e.TargetPort = int64(p)
		}
	}
	e.Upstream = a.str(akNetPeerName)
	if svc := a.str(akPeerService); svc != "" {
		e.ServiceName = svc
	}
	e.UpstreamMS = s.durationMS()
	if s.status == statusCodeError {
		e.Source = SourceGateway
	} else {
		e.Source = SourceUpstream
	}
}

// maxKongPages bounds one paginated walk even when every `next` is new: at
// Kong's largest page size it is 100M entities.
const maxKongPages = 100_000

// pollKong lists the upstreams of a Kong Admin API (following `next`), keeps
// this shard's, then fetches GET /upstreams/{id}/health (also paginated) for
// each with at most max_concurrency requests in flight, recording each
// upstream's targets as soon as they arrive (§1b).
//
// Faults: if the list fails, nothing is recorded and the poll is not
// complete (nothing swept). An upstream whose health fails keeps its rows
// unconfirmed (they turn unknown after stale_after); a 404 means it was
// deleted since the list, so its rows are swept. A connection error or
// timeout abandons the remaining fetches at once rather than waiting out a
// timeout per upstream.
func pollKong(ctx context.Context, s PollSession) (bool, error) {
	size := strconv.Itoa(s.PageSize())
	var ups []KongUpstream
	err := walkKongPages(ctx, s, "/upstreams?size="+size, func(body []byte) (string, error) {
		page, err := DecodeKongUpstreams(body)
		for _, u := range page.Upstreams {
			if u.Name == "" {
				u.Name = u.ID
			}
			if s.InShard(u.Name) {
				ups = append(ups, u)
			}
		}
		return page.Next, err
	})
	if err != nil {
		return false, err
	}
	// One health request per upstream (more for one of over a page of
	// targets): spread over the rest of the interval.
	s.Expect(len(ups))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan KongUpstream)
	var (
		mu       sync.Mutex
		firstErr error
		aborted  bool
		wg       sync.WaitGroup
	)
	for range min(s.MaxConcurrency(), max(len(ups), 1)) {
		wg.Go(func() {
			var obs []TargetHealth
			for u := range work {
				var err error
				obs, err = kongUpstreamHealth(ctx, s, obs[:0], u, size)
				switch {
				case err == nil:
					s.Apply(obs)
				case IsNotFound(err):
					// Deleted since the list: the sweep removes its rows.
				default:
					s.Keep(u.Name)
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					if s.Fatal(err) {
						aborted = true
						cancel()
					}
					mu.Unlock()
				}
				clear(obs)
			}
		})
	}
feed:
	for _, u := range ups {
		select {
		case work <- u:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	// Every listed upstream was fetched or kept: what was not seen is gone.
	return !aborted && ctx.Err() == nil, firstErr
}

// kongUpstreamHealth fetches every page of one upstream's health.
func kongUpstreamHealth(ctx context.Context, s PollSession, dst []TargetHealth, u KongUpstream, size string) ([]TargetHealth, error) {
	err := walkKongPages(ctx, s, "/upstreams/"+url.PathEscape(u.ID)+"/health?size="+size, func(body []byte) (string, error) {
		var next string
		var err error
		dst, next, err = DecodeKongHealth(dst, u.Name, body)
		return next, err
	})
	return dst, err
}

// walkKongPages fetches first, hands each body to page and follows the
// `next` reference it returns until there is none. A `next` that was
// already fetched in this walk (Kong pointing back at an earlier page) is an
// ErrPaginationLoop, as is a walk longer than maxKongPages.
func walkKongPages(ctx context.Context, s PollSession, first string, page func([]byte) (string, error)) error {
	var seen []string // pages are few: a linear scan beats a map
	for ref := first; ref != ""; {
		if slices.Contains(seen, ref) || len(seen) >= maxKongPages {
			return fmt.Errorf("%w: next page %q after %d pages was already fetched", ErrPaginationLoop, ref, len(seen))
		}
		seen = append(seen, ref)
		body, err := s.Get(ctx, ref)
		if err != nil {
			return err
		}
		if ref, err = page(body); err != nil {
			return err
		}
	}
	return nil
}
