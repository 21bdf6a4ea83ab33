package health

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// Manual drives a Health by hand, for tests of what the receiver's naming
// profiles make of the health state: pollers are built but never run on
// their own, and polls, expiry and emissions happen only when asked, one at
// a time, on the caller's goroutine; polls are unpaced unless Pace is
// called. It is not part of the running receiver.
type Manual struct {
	h *Health
	// synthetic pollers of ApplyPoll, one per instance.
	owners map[string]*poller
}

// NewManual builds a Health and its pollers without starting anything.
func NewManual(ctx context.Context, host component.Host, set Settings) (*Manual, error) {
	h, err := New(set)
	if err != nil {
		return nil, err
	}
	if err := h.buildPollers(ctx, host); err != nil {
		return nil, err
	}
	return &Manual{h: h, owners: make(map[string]*poller)}, nil
}

// Close closes the pollers' idle connections.
func (m *Manual) Close() { m.h.closeClients() }

// Config is the health section in use.
func (m *Manual) Config() *Config { return m.h.cfg }

// Pace makes the polls paced as in a running receiver (pace.go); without
// it Poll runs a poll's requests as fast as max_concurrency allows.
func (m *Manual) Pace() { m.h.pacePollers() }

// Poll runs one poll of poller i.
func (m *Manual) Poll(i int) { m.h.pollers[i].poll(context.Background()) }

// PollerBackoff is poller i's consecutive failures and its next delay.
func (m *Manual) PollerBackoff(i int) (failures int, next time.Duration) {
	p := m.h.pollers[i]
	return p.failures, p.nextDelay()
}

// Emit sends the queued changes (all: the whole state).
func (m *Manual) Emit(all bool) { m.h.em.emit(context.Background(), all) }

// ExpireStale marks unknown the polled rows not confirmed since
// now - staleAfter.
func (m *Manual) ExpireStale(now time.Time, staleAfter time.Duration) {
	m.h.table.expireStale(now, staleAfter)
}

// ExpirePushed applies the push lifetime (push.stale_after, push.expiry) at
// now.
func (m *Manual) ExpirePushed(now time.Time) {
	p := m.h.cfg.Push.Get()
	m.h.table.expirePushed(now, p.StaleAfter, p.Expiry)
}

// PushOutcome is what became of one pushed event.
type PushOutcome = pushOutcome

// The outcomes of ApplyEvent.
const (
	PushApplied    = pushApplied
	PushOutOfOrder = pushOutOfOrder
	PushOverLimit  = pushOverLimit
	PushClockSkew  = pushClockSkew
)

// ApplyEvent applies one pushed event received at now.
func (m *Manual) ApplyEvent(ev *gateway.HealthEvent, now time.Time) PushOutcome {
	p := m.h.cfg.Push.Get()
	return m.h.table.applyEvent(ev, now, p.MaxTargets, p.MaxClockSkew)
}

// ApplyPoll records a poll of generation gen made at now by a poller of
// the instance (one synthetic poller per instance).
func (m *Manual) ApplyPoll(instance string, kind gateway.Kind, gen uint64, now time.Time, obs []gateway.TargetHealth) {
	p := m.owners[instance]
	if p == nil {
		p = &poller{instance: instance, gkind: kind}
		m.owners[instance] = p
	}
	m.h.table.applyPoll(p, gen, now, obs)
}

// Rows is the number of rows, and of rows only pushes keep.
func (m *Manual) Rows() (rows, pushed int) {
	m.h.table.mu.Lock()
	defer m.h.table.mu.Unlock()
	return len(m.h.table.entries), m.h.table.pushed
}

// PushHandler is the push endpoint.
func (m *Manual) PushHandler() http.Handler { return http.HandlerFunc(m.h.handlePush) }
