package health

import (
	"strings"
	"sync"
	"time"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// rowKey identifies one row of the health table: one address of one
// target of one upstream, as one gateway instance sees it. IP and port are
// kept apart so a lookup never concatenates.
type rowKey struct {
	instance, upstream, target, ip, port string
}

// entry is one row. Its key and labels never change after insert, so
// the emitter reads them without the table lock; state, owner, seen,
// confirmed, updated, idx and the flags belong to the table lock.
type entry struct {
	key     rowKey
	address string // ip:port rendered once at insert ("" for dns_error)
	up      *upstreamRows

	state gateway.HealthState
	// owner is the poller that reported the row last; nil for a pushed row,
	// which no sweep removes: push.stale_after and push.expiry bound its
	// life instead (expirePushed).
	owner *poller
	// pushed marks a row only pushes keep, counted in table.pushed
	// against push.max_targets; a poll that reports the row takes it over.
	pushed bool
	// seen is the owner's poll generation that last listed the row (or
	// kept it, when its upstream could not be fetched); confirmed is when a
	// poll last actually reported its state.
	seen      uint64
	confirmed time.Time
	// updated is the time of the newest pushed event applied to the row, so
	// a late event cannot overwrite a newer state.
	updated time.Time
	// pushedAt is when the newest event applied to the row was received
	// (the receiver's clock, not the event's timestamp, so a pusher's clock
	// skew cannot shorten or stretch a row's life).
	pushedAt time.Time

	idx     int // position in up.entries
	dirty   bool
	removed bool
}

// upstreamRows groups the rows of one upstream of one gateway instance
// and counts them by state (the otel profile's per-upstream gauge).
type upstreamRows struct {
	gw      *gatewayRows
	name    string
	entries []*entry
	counts  [gateway.NumHealthStates]int64

	idx     int // position in gw.upstreams
	dirty   bool
	removed bool
}

// gatewayRows is one gateway instance: one resource in the emitted
// metrics (service.name = kind, service.instance.id = instance).
type gatewayRows struct {
	instance  string
	kind      gateway.Kind
	upstreams []*upstreamRows
	// out is the emitter's scratch: where this gateway's points go in the
	// batch being built. Only the emitter goroutine touches it.
	out *gatewayPoints
}

type upstreamKey struct{ instance, upstream string }

// table is the one table of (gateway instance, upstream, target,
// address) → state, fed by pollers and pushed events.
//
// Layout: maps for lookup, slices (gateway → upstreams → entries) for
// iteration in a stable order without allocating; removal swaps with the
// last element. Changed rows and upstreams are queued on dirty lists, which
// the emitter drains; a removed row stays on the list, flagged, so its
// series can be withdrawn.
//
// Concurrency: every method takes mu and holds it only for map and slice
// updates, never while metrics are built or sent.
type table struct {
	mu        sync.Mutex
	entries   map[rowKey]*entry
	upstreams map[upstreamKey]*upstreamRows
	gateways  map[string]*gatewayRows
	gwList    []*gatewayRows

	dirtyEntries   []*entry
	dirtyUpstreams []*upstreamRows
	// counts is the number of rows by state, for the receiver's telemetry.
	counts [gateway.NumHealthStates]int64
	// pushed is the number of rows only pushes keep (entry.pushed).
	pushed int
	// maxLabel cuts the names a row keeps (gateway instance, upstream,
	// target, ip, port) to this many bytes (0: none); truncated counts the
	// names cut, for the receiver's telemetry (taken by takeTruncated).
	maxLabel  int
	truncated int64
}

func newTable(maxLabel int) *table {
	return &table{
		maxLabel:  maxLabel,
		entries:   make(map[rowKey]*entry),
		upstreams: make(map[upstreamKey]*upstreamRows),
		gateways:  make(map[string]*gatewayRows),
	}
}

// gatewayLocked returns the gateway instance, creating it with kind.
func (t *table) gatewayLocked(instance string, kind gateway.Kind) *gatewayRows {
	if g := t.gateways[instance]; g != nil {
		return g
	}
	g := &gatewayRows{instance: instance, kind: kind}
	t.gateways[instance] = g
	t.gwList = append(t.gwList, g)
	return g
}

// setLocked finds or creates the row of obs under instance and sets its
// state; a change (or a new row) queues it for the emitter.
func (t *table) setLocked(instance string, kind gateway.Kind, obs *gateway.TargetHealth) *entry {
	k := rowKey{instance: instance, upstream: obs.Upstream, target: obs.Target, ip: obs.IP, port: obs.Port}
	e := t.entries[k]
	if e == nil {
		g := t.gatewayLocked(instance, kind)
		uk := upstreamKey{instance, obs.Upstream}
		u := t.upstreams[uk]
		if u == nil {
			u = &upstreamRows{gw: g, name: obs.Upstream, idx: len(g.upstreams)}
			g.upstreams = append(g.upstreams, u)
			t.upstreams[uk] = u
		}
		e = &entry{key: k, address: obs.Address(), up: u, state: obs.State, idx: len(u.entries)}
		u.entries = append(u.entries, e)
		t.entries[k] = e
		u.counts[obs.State]++
		t.counts[obs.State]++
		t.markLocked(e)
		return e
	}
	t.setStateLocked(e, obs.State)
	return e
}

func (t *table) setStateLocked(e *entry, s gateway.HealthState) {
	if e.state == s {
		return
	}
	e.up.counts[e.state]--
	t.counts[e.state]--
	e.state = s
	e.up.counts[s]++
	t.counts[s]++
	t.markLocked(e)
}

func (t *table) markLocked(e *entry) {
	if !e.dirty {
		e.dirty = true
		t.dirtyEntries = append(t.dirtyEntries, e)
	}
	if u := e.up; !u.dirty {
		u.dirty = true
		t.dirtyUpstreams = append(t.dirtyUpstreams, u)
	}
}

// removeLocked deletes a row; its series are withdrawn by the next drain.
func (t *table) removeLocked(e *entry) {
	u := e.up
	last := u.entries[len(u.entries)-1]
	u.entries[e.idx], last.idx = last, e.idx
	u.entries[len(u.entries)-1] = nil
	u.entries = u.entries[:len(u.entries)-1]
	delete(t.entries, e.key)
	if e.pushed {
		e.pushed = false
		t.pushed--
	}
	u.counts[e.state]--
	t.counts[e.state]--
	e.removed = true
	t.markLocked(e)
	if len(u.entries) > 0 {
		return
	}
	g := u.gw
	lastU := g.upstreams[len(g.upstreams)-1]
	g.upstreams[u.idx], lastU.idx = lastU, u.idx
	g.upstreams[len(g.upstreams)-1] = nil
	g.upstreams = g.upstreams[:len(g.upstreams)-1]
	delete(t.upstreams, upstreamKey{g.instance, u.name})
	u.removed = true
}

// applyPoll records what one fetch of a poller reported: every row is
// confirmed now and marked seen in generation gen. It reports whether a row
// changed or appeared.
func (t *table) applyPoll(p *poller, gen uint64, now time.Time, obs []gateway.TargetHealth) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	before := len(t.dirtyEntries)
	for i := range obs {
		t.capLocked(&obs[i])
		e := t.setLocked(p.instance, p.gkind, &obs[i])
		e.owner, e.seen, e.confirmed = p, gen, now
		if e.pushed { // a poller now reports it: the poller's from here on
			e.pushed = false
			t.pushed--
		}
	}
	return len(t.dirtyEntries) != before
}

// capLocked cuts obs's names longer than maxLabel, counting them: a name
// of megabytes, pushed or reported by an admin API, would otherwise live in
// the row, its series and every scrape.
func (t *table) capLocked(obs *gateway.TargetHealth) {
	if t.maxLabel == 0 {
		return
	}
	for _, f := range [...]*string{&obs.Upstream, &obs.Target, &obs.IP, &obs.Port} {
		t.cutLocked(f)
	}
}

// cutLocked cuts *name to maxLabel bytes when it is longer, counting it.
func (t *table) cutLocked(name *string) {
	if t.maxLabel > 0 && len(*name) > t.maxLabel {
		// A copy: the cut would otherwise keep the whole decoded name
		// alive in the row.
		*name = strings.Clone(gateway.CutLabel(*name, t.maxLabel))
		t.truncated++
	}
}

// takeTruncated returns the names cut since its last call.
func (t *table) takeTruncated() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.truncated
	t.truncated = 0
	return n
}

// keepUpstream marks the poller's rows of an upstream it could not fetch as
// seen in gen, so the sweep keeps them; they are not confirmed, so they turn
// unknown after stale_after if the fetches keep failing.
func (t *table) keepUpstream(p *poller, gen uint64, upstream string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.maxLabel > 0 {
		upstream = gateway.CutLabel(upstream, t.maxLabel) // as applyPoll keyed its rows
	}
	if u := t.upstreams[upstreamKey{p.instance, upstream}]; u != nil {
		for _, e := range u.entries {
			if e.owner == p {
				e.seen = gen
			}
		}
	}
}

// sweep removes the poller's rows that its complete poll gen did not list:
// targets (or whole upstreams) that disappeared from the gateway.
func (t *table) sweep(p *poller, gen uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.gateways[p.instance]
	if g == nil {
		return
	}
	for ui := len(g.upstreams) - 1; ui >= 0; ui-- {
		u := g.upstreams[ui]
		for ei := len(u.entries) - 1; ei >= 0; ei-- {
			if e := u.entries[ei]; e.owner == p && e.seen != gen {
				t.removeLocked(e)
			}
		}
	}
}

// expireStale marks unknown every polled row not confirmed since
// now - staleAfter. It reports whether a row changed.
func (t *table) expireStale(now time.Time, staleAfter time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	before := len(t.dirtyEntries)
	cutoff := now.Add(-staleAfter)
	for _, g := range t.gwList {
		for _, u := range g.upstreams {
			for _, e := range u.entries {
				if e.owner != nil && e.state != gateway.HealthUnknown && e.confirmed.Before(cutoff) {
					t.setStateLocked(e, gateway.HealthUnknown)
				}
			}
		}
	}
	return len(t.dirtyEntries) != before
}

// pushOutcome is what became of one pushed event.
type pushOutcome uint8

const (
	pushApplied    pushOutcome = iota
	pushOutOfOrder             // older than the newest event applied to its row
	pushOverLimit              // a new row, and push.max_targets rows exist
	pushClockSkew              // its timestamp is further than push.max_clock_skew from now
)

// applyEvent records one pushed event received at now:
//   - pushClockSkew: the event's timestamp is further than maxSkew from now,
//     either way; nothing changes (an event of year 2200 would otherwise
//     make every later event about its row out of order until it expired);
//   - pushOutOfOrder: the event is older than the newest one applied to its
//     row (events may arrive out of order); nothing changes;
//   - pushOverLimit: the event is about a row that does not exist and
//     maxPushed pushed rows do; nothing changes;
//   - pushApplied: the row is created or updated; a new row is a pushed row
//     (counted against maxPushed), an existing polled row stays its
//     poller's and counts as confirmed.
//
// An event orders by its timestamp, but never later than its receive
// time: one dated ahead of the collector's clock (within maxSkew) holds
// back no event dated after it arrived. An event without a timestamp
// orders by its receive time.
func (t *table) applyEvent(ev *gateway.HealthEvent, now time.Time, maxPushed int, maxSkew time.Duration) pushOutcome {
	at := now
	if ev.HasTime {
		// Compared as instants, never through UnixNano: years 1 and 9999
		// are outside int64 nanoseconds.
		if ev.Time.Before(now.Add(-maxSkew)) || ev.Time.After(now.Add(maxSkew)) {
			return pushClockSkew
		}
		if ev.Time.Before(now) {
			at = ev.Time
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.capLocked(&ev.TargetHealth)
	t.cutLocked(&ev.Gateway)
	k := rowKey{instance: ev.Gateway, upstream: ev.Upstream, target: ev.Target, ip: ev.IP, port: ev.Port}
	existing := t.entries[k]
	switch {
	case existing != nil && at.Before(existing.updated):
		return pushOutOfOrder
	case existing == nil && t.pushed >= maxPushed:
		return pushOverLimit
	}
	e := t.setLocked(ev.Gateway, ev.Kind, &ev.TargetHealth)
	e.updated, e.pushedAt = at, now
	switch {
	case existing == nil:
		e.pushed = true
		t.pushed++
	case e.owner != nil:
		// A push about a polled row counts as a confirmation too.
		e.confirmed = now
	}
	return pushApplied
}

// expirePushed bounds the life of pushed rows: one not refreshed by an
// event since now - staleAfter becomes unknown, one not refreshed since
// now - expiry is removed (its series withdrawn). It reports whether a row
// changed.
func (t *table) expirePushed(now time.Time, staleAfter, expiry time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pushed == 0 {
		return false
	}
	before := len(t.dirtyEntries)
	staleCutoff, expiryCutoff := now.Add(-staleAfter), now.Add(-expiry)
	for gi := len(t.gwList) - 1; gi >= 0; gi-- {
		g := t.gwList[gi]
		for ui := len(g.upstreams) - 1; ui >= 0; ui-- {
			u := g.upstreams[ui]
			for ei := len(u.entries) - 1; ei >= 0; ei-- {
				e := u.entries[ei]
				switch {
				case !e.pushed:
				case e.pushedAt.Before(expiryCutoff):
					t.removeLocked(e)
				case e.state != gateway.HealthUnknown && e.pushedAt.Before(staleCutoff):
					t.setStateLocked(e, gateway.HealthUnknown)
				}
			}
		}
	}
	return len(t.dirtyEntries) != before
}

// drain appends the queued changes to rows and ups (reused buffers) and
// empties the queues. With all set it appends every live row and upstream
// too (a full snapshot), after the queued removals.
func (t *table) drain(rows []Row, ups []UpstreamRow, all bool) ([]Row, []UpstreamRow, [gateway.NumHealthStates]int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.dirtyEntries {
		e.dirty = false
		if all && !e.removed {
			continue // the full pass below emits it
		}
		rows = append(rows, Row{e: e, State: e.state, Removed: e.removed})
	}
	for _, u := range t.dirtyUpstreams {
		u.dirty = false
		if all && !u.removed {
			continue
		}
		ups = append(ups, UpstreamRow{u: u, Counts: u.counts, Removed: u.removed})
	}
	clear(t.dirtyEntries)
	clear(t.dirtyUpstreams)
	t.dirtyEntries, t.dirtyUpstreams = t.dirtyEntries[:0], t.dirtyUpstreams[:0]
	if all {
		for _, g := range t.gwList {
			for _, u := range g.upstreams {
				ups = append(ups, UpstreamRow{u: u, Counts: u.counts})
				for _, e := range u.entries {
					rows = append(rows, Row{e: e, State: e.state})
				}
			}
		}
	}
	return rows, ups, t.counts
}
