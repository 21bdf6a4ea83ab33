package gatewayreceiver // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver"

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// maxPages bounds one paginated walk even when every `next` is new: at
// Kong's largest page size it is 100M entities.
const maxPages = 100_000

// pollKong lists the upstreams of a Kong Admin API (following `next`), keeps
// this shard's, then fetches GET /upstreams/{id}/health (also paginated) for
// each with at most max_concurrency requests in flight, recording each
// upstream's targets as soon as they arrive (gateway-formats.md §1b).
//
// Faults: if the list fails, nothing is recorded and nothing swept. An
// upstream whose health fails keeps its rows unconfirmed (they turn unknown
// after stale_after); a 404 means it was deleted since the list, so its
// rows are swept. A connection error or timeout abandons the remaining
// fetches at once rather than waiting out a timeout per upstream.
func (p *poller) pollKong(ctx context.Context, gen uint64) error {
	size := strconv.Itoa(p.cfg.pageSize())
	var ups []gateway.KongUpstream
	err := p.walkPages(ctx, "/upstreams?size="+size, func(body []byte) (string, error) {
		page, err := gateway.DecodeKongUpstreams(body)
		for _, u := range page.Upstreams {
			if u.Name == "" {
				u.Name = u.ID
			}
			if p.inShard(u.Name) {
				ups = append(ups, u)
			}
		}
		return page.Next, err
	})
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan gateway.KongUpstream)
	var (
		mu       sync.Mutex
		firstErr error
		aborted  bool
		wg       sync.WaitGroup
	)
	for range min(p.cfg.maxConcurrency(pollKong), max(len(ups), 1)) {
		wg.Go(func() {
			var obs []gateway.TargetHealth
			for u := range work {
				var err error
				obs, err = p.kongUpstreamHealth(ctx, obs[:0], u, size)
				switch {
				case err == nil:
					if p.h.table.applyPoll(p, gen, time.Now(), obs) {
						p.h.notify()
					}
				case isNotFound(err):
					// Deleted since the list: the sweep removes its rows.
				default:
					p.h.table.keepUpstream(p, gen, u.Name)
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					if fatal(err) {
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
	if !aborted && ctx.Err() == nil {
		// Every listed upstream was fetched or kept: what was not seen is gone.
		p.h.table.sweep(p, gen)
	}
	return firstErr
}

// kongUpstreamHealth fetches every page of one upstream's health.
func (p *poller) kongUpstreamHealth(ctx context.Context, dst []gateway.TargetHealth, u gateway.KongUpstream, size string) ([]gateway.TargetHealth, error) {
	err := p.walkPages(ctx, "/upstreams/"+url.PathEscape(u.ID)+"/health?size="+size, func(body []byte) (string, error) {
		var next string
		var err error
		dst, next, err = gateway.DecodeKongHealth(dst, u.Name, body)
		return next, err
	})
	return dst, err
}

// walkPages fetches first, hands each body to page and follows the `next`
// reference it returns until there is none. A `next` that was already
// fetched in this walk (Kong pointing back at an earlier page) is a
// pagination_loop error, as is a walk longer than maxPages.
func (p *poller) walkPages(ctx context.Context, first string, page func([]byte) (string, error)) error {
	var seen []string // pages are few: a linear scan beats a map
	for ref := first; ref != ""; {
		if slices.Contains(seen, ref) || len(seen) >= maxPages {
			return &pollError{outcomePaginationLoop, errors.New("pagination loop: next page " + strconv.Quote(ref) + " after " + strconv.Itoa(len(seen)) + " pages was already fetched")}
		}
		seen = append(seen, ref)
		body, err := p.get(ctx, ref)
		if err != nil {
			return err
		}
		if ref, err = page(body); err != nil {
			return err
		}
	}
	return nil
}
