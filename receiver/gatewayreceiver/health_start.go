package gatewayreceiver // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver"

import (
	"context"
	"net/url"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
)

// healthReceiver is the health half of the receiver: the state table, its
// pollers, the push endpoint's core and the emitter. It shares nothing with
// the traffic path but the HTTP server the push endpoint is mounted on.
type healthReceiver struct {
	cfg    *HealthConfig
	tel    *metadata.TelemetryBuilder
	logger *zap.Logger
	table  *healthTable
	em     *emitter

	pollers []*poller
	// wake tells the emitter the table changed; one pending signal is
	// enough, so senders never block.
	wake   chan struct{}
	cancel context.CancelFunc
	polls  sync.WaitGroup
	stop   chan struct{}
	done   chan struct{}
}

// notify wakes the emitter without ever blocking the caller.
func (h *healthReceiver) notify() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// startHealth builds the health part when the health section is configured
// and starts its pollers and emitter. It runs before the HTTP server starts,
// so the push endpoint finds its core ready.
func (r *gatewayReceiver) startHealth(ctx context.Context, host component.Host) error {
	h, err := r.buildHealth(ctx, host)
	if err != nil || h == nil {
		return err
	}
	r.health = h
	// Pollers and the emitter outlive Start's context, as scraperhelper's
	// controller does it; Shutdown cancels them.
	pollCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.cancel = cancel
	for _, p := range h.pollers {
		h.polls.Go(func() { p.run(pollCtx) })
	}
	go h.emitLoop()
	return nil
}

// buildHealth creates the table, the emitter and one poller per configured
// admin API, without starting anything (tests drive them by hand).
func (r *gatewayReceiver) buildHealth(ctx context.Context, host component.Host) (*healthReceiver, error) {
	if !r.cfg.Health.HasValue() {
		return nil, nil
	}
	cfg := r.cfg.Health.Get()
	logger := r.settings.Logger.With(zap.String("part", "health"))
	h := &healthReceiver{
		cfg:    cfg,
		tel:    r.telemetry,
		logger: logger,
		table:  newHealthTable(),
		wake:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	h.em = &emitter{profile: r.cfg.healthProfile(), table: h.table, next: r.next.ConsumeMetrics, logger: logger, tel: r.telemetry}
	for _, group := range cfg.pollerGroups() {
		for i := range group.list {
			p, err := h.newPoller(ctx, host, r, group, i)
			if err != nil {
				h.closeClients()
				return nil, err
			}
			h.pollers = append(h.pollers, p)
		}
	}
	return h, nil
}

func (h *healthReceiver) newPoller(ctx context.Context, host component.Host, r *gatewayReceiver, group pollerGroup, i int) (*poller, error) {
	cfg := group.list[i]
	base, err := url.Parse(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	maxConc := cfg.maxConcurrency(group.kind)
	cc := cfg.ClientConfig
	cc.Timeout = cfg.timeout()
	// Keep a connection per concurrent request alive between polls; the
	// transport's default of 2 idle connections per host would reconnect for
	// almost every one of Kong's per-upstream requests.
	if !cc.Keepalive.HasValue() {
		cc.Keepalive = configoptional.Some(confighttp.NewDefaultKeepaliveClientConfig())
	}
	if ka := cc.Keepalive.Get(); ka.MaxIdleConnsPerHost < maxConc {
		ka.MaxIdleConnsPerHost = maxConc
	}
	client, err := cc.ToClient(ctx, host.GetExtensions(), r.settings.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	instance := cfg.Instance
	if instance == "" {
		instance = base.Host
	}
	name := group.name + "[" + strconv.Itoa(i) + "]"
	p := &poller{
		kind: group.kind, name: name, instance: instance, cfg: cfg, base: base, client: client, h: h,
		logger:   h.logger.With(zap.String("poller", name), zap.String("instance", instance)),
		attrs:    attribute.NewSet(attribute.String("gateway", group.name), attribute.String("instance", instance)),
		outcomes: make(map[string]attribute.Set, len(pollOutcomes)),
	}
	for _, o := range pollOutcomes {
		p.outcomes[o] = attribute.NewSet(attribute.String("gateway", group.name), attribute.String("instance", instance), attribute.String("outcome", o))
	}
	switch group.kind {
	case pollKong:
		p.gkind, p.pollOnce = gateway.HealthKindKong, p.pollKong
	case pollAPISIX:
		p.gkind, p.pollOnce = gateway.HealthKindAPISIX, p.pollAPISIX
	default:
		p.gkind, p.pollOnce = gateway.HealthKindEnvoy, p.pollEnvoy
	}
	return p, nil
}

// emitLoop emits changes as soon as they are signalled and the whole state
// every report_interval, after marking rows stale. On stop it sends what is
// still queued.
func (h *healthReceiver) emitLoop() {
	defer close(h.done)
	ctx := context.Background()
	t := time.NewTicker(h.cfg.ReportInterval)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			h.em.emit(ctx, false)
			return
		case <-h.wake:
			h.em.emit(ctx, false)
		case now := <-t.C:
			h.table.expireStale(now, h.cfg.StaleAfter)
			if h.cfg.Push.HasValue() {
				push := h.cfg.Push.Get()
				h.table.expirePushed(now, push.StaleAfter, push.Expiry)
			}
			h.em.emit(ctx, true)
		}
	}
}

// shutdownHealth stops the pollers, then the emitter (which sends the last
// queued changes), and closes the pollers' idle connections.
func (r *gatewayReceiver) shutdownHealth() {
	h := r.health
	if h == nil {
		return
	}
	r.health = nil
	h.cancel()
	h.polls.Wait()
	close(h.stop)
	<-h.done
	h.closeClients()
}

func (h *healthReceiver) closeClients() {
	for _, p := range h.pollers {
		p.client.CloseIdleConnections()
	}
}

// healthProfile is health.profile, or the receiver-wide profile when the
// health section does not set its own.
func (c *Config) healthProfile() HealthProfile {
	if c.Health.HasValue() && c.Health.Get().Profile != "" {
		return c.Health.Get().Profile
	}
	return HealthProfile(c.Profile)
}
