package promstreamexporter

import (
	"sync"
	"time"
)

// maxScrapers bounds the scrapers remembered: a client opening connection
// after connection cannot grow the map; the least recently seen is
// forgotten first. Real deployments have one to a few scrapers per
// collector (an HA pair, a shard job per Prometheus).
const maxScrapers = 64

// scrapers remembers who reads whole scrapes, so that the shutdown wait
// covers every Prometheus that scrapes this collector regularly (an HA
// pair), not only the first to come: with only "the first whole scrape",
// the second server of a pair missed the last window on every restart.
//
// A scraper is its connection (the remote address, host and port):
// Prometheus keeps one keep-alive connection per target (prometheus/common's
// HTTP client: keep-alives on, idle connections kept 5m), so two servers of
// a pair, even on one host, are two scrapers, and one server is one from
// scrape to scrape. A client that connects anew for every scrape is never
// regular (one scrape per address) and is not waited for: the first whole
// scrape still ends the wait then, as before.
type scrapers struct {
	mu sync.Mutex
	by map[string]*scraper
}

// scraper is what is known of one connection's whole scrapes: when the
// last two began, and the highest generation one of them read.
type scraper struct {
	prev, last time.Time
	gen        uint64
}

// completed records that a whole scrape from addr, begun at began,
// completed having read every batch up to generation gen.
func (s *scrapers) completed(addr string, gen uint64, began time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = make(map[string]*scraper)
	}
	sc := s.by[addr]
	if sc == nil {
		if len(s.by) >= maxScrapers {
			s.forgetOldest()
		}
		sc = &scraper{}
		s.by[addr] = sc
	}
	sc.prev, sc.last = sc.last, began
	sc.gen = max(sc.gen, gen)
}

// forgetOldest drops the scraper seen least recently; the caller holds mu.
func (s *scrapers) forgetOldest() {
	var oldest string
	var at time.Time
	for addr, sc := range s.by {
		if oldest == "" || sc.last.Before(at) {
			oldest, at = addr, sc.last
		}
	}
	delete(s.by, oldest)
}

// regular returns the scrapers expected to scrape again within grace of
// now: at least two whole scrapes, the last no more than two of their own
// intervals ago (one missed scrape is allowed), the next due before now +
// grace. Those are the ones the shutdown wait waits for.
func (s *scrapers) regular(now time.Time, grace time.Duration) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for addr, sc := range s.by {
		if sc.prev.IsZero() {
			continue
		}
		interval := sc.last.Sub(sc.prev)
		if interval <= 0 || now.Sub(sc.last) > 2*interval || sc.last.Add(interval).After(now.Add(grace)) {
			continue
		}
		out = append(out, addr)
	}
	return out
}

// unread counts the scrapers of addrs that have not read generation gen
// (a scraper forgotten since counts as unread: it may still come).
func (s *scrapers) unread(addrs []string, gen uint64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, addr := range addrs {
		if sc := s.by[addr]; sc == nil || sc.gen < gen {
			n++
		}
	}
	return n
}
