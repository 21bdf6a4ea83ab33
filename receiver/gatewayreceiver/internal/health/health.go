// Package health is the gateway receiver's upstream-health part: one state
// table of (gateway instance, upstream, target, address) → state, fed by
// admin API pollers (one per configured endpoint, each gateway's poll from
// its home in the gateway package) and by pushed events, and an emitter that
// turns changes and periodic snapshots into gauges for the metrics pipeline.
//
// It shares nothing with the traffic path but the HTTP server its push
// handler is mounted on. The receiver builds it with New, starts it with
// Start and stops it with Shutdown; how its gauges are named is the
// receiver's naming profile's Naming (naming.go, NamingOf).
//
// Concurrency: pollers run on their own goroutines, pushes on the HTTP
// server's; both only take the table's lock for map and slice updates. The
// emitter runs on one goroutine, so batches leave in order.
package health // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/health"

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"

	"github.com/otelgateway/otelgateway/internal/foldlog"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
)

// Settings is what New needs.
type Settings struct {
	// Config is the health section; it must have passed Validate.
	Config *Config
	// Naming writes the gauges (the receiver's naming profile).
	Naming *Naming
	// Identity labels every gauge with the collector's identity.
	Identity Identity
	// Next receives the gauges; it must not be nil (a receiver with a
	// health section must be in a metrics pipeline).
	Next consumer.Metrics
	// Telemetry records the health part's own metrics.
	Telemetry *metadata.TelemetryBuilder
	// TelemetrySettings and Logger are the receiver's.
	TelemetrySettings component.TelemetrySettings
	Logger            *zap.Logger
	// MaxLabelBytes cuts the names a row keeps (the receiver's
	// limits.max_label_value_length; 0: none).
	MaxLabelBytes int
	// PushFolds logs pushed events refused by push.max_targets (the
	// receiver's limits.max_pushed_targets); nil: not logged.
	PushFolds *foldlog.Logger
}

// ErrNoMetricsPipeline is New's answer when there is nowhere to send the
// gauges.
var ErrNoMetricsPipeline = errors.New("the health section needs the receiver in a metrics pipeline")

// Health is the running health part.
type Health struct {
	cfg    *Config
	tel    *metadata.TelemetryBuilder
	set    component.TelemetrySettings
	logger *zap.Logger
	table  *table
	em     *emitter
	// pushFolds logs refusals by push.max_targets (Settings.PushFolds).
	pushFolds *foldlog.Logger

	pollers []*poller
	// wake tells the emitter the table changed; one pending signal is
	// enough, so senders never block.
	wake    chan struct{}
	cancel  context.CancelFunc
	polls   sync.WaitGroup
	stop    chan struct{}
	done    chan struct{}
	started bool
}

// New builds the table and the emitter; nothing runs until Start.
func New(set Settings) (*Health, error) {
	if set.Next == nil {
		return nil, ErrNoMetricsPipeline
	}
	logger := set.Logger.With(zap.String("part", "health"))
	h := &Health{
		cfg:    set.Config,
		tel:    set.Telemetry,
		set:    set.TelemetrySettings,
		logger: logger,
		table:  newTable(set.MaxLabelBytes),
		wake:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	h.pushFolds = set.PushFolds
	h.em = &emitter{naming: set.Naming, identity: set.Identity, table: h.table, next: set.Next.ConsumeMetrics, logger: logger, tel: set.Telemetry}
	return h, nil
}

// Start creates one poller per configured admin API and starts them and the
// emitter. On error nothing is left running.
func (h *Health) Start(ctx context.Context, host component.Host) error {
	if err := h.buildPollers(ctx, host); err != nil {
		return err
	}
	// Pollers and the emitter outlive Start's context, as scraperhelper's
	// controller does it; Shutdown cancels them.
	pollCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.cancel = cancel
	h.pacePollers()
	for _, p := range h.pollers {
		h.polls.Go(func() { p.run(pollCtx) })
	}
	go h.emitLoop()
	h.started = true
	return nil
}

// Shutdown stops the pollers, then the emitter (which sends the last queued
// changes), and closes the pollers' idle connections. It is safe to call
// without Start and more than once.
func (h *Health) Shutdown(context.Context) error {
	if h.started {
		h.started = false
		h.cancel()
		h.polls.Wait()
		close(h.stop)
		<-h.done
	}
	h.closeClients()
	return nil
}

// PushHandler serves the push endpoint at PushPath; nil when push is off.
func (h *Health) PushHandler() http.Handler {
	if !h.cfg.Push.HasValue() {
		return nil
	}
	return http.HandlerFunc(h.handlePush)
}

// PushPath is where PushHandler belongs on the receiver's HTTP server.
func (h *Health) PushPath() string {
	if !h.cfg.Push.HasValue() {
		return ""
	}
	return h.cfg.Push.Get().Path
}

// notify wakes the emitter without ever blocking the caller.
func (h *Health) notify() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// buildPollers creates one poller per configured admin API without starting
// them (tests drive them by hand).
func (h *Health) buildPollers(ctx context.Context, host component.Host) error {
	for _, group := range h.cfg.pollerGroups() {
		for i := range group.list {
			p, err := h.newPoller(ctx, host, group, i)
			if err != nil {
				h.closeClients()
				h.pollers = nil
				return err
			}
			h.pollers = append(h.pollers, p)
		}
	}
	return nil
}

func (h *Health) newPoller(ctx context.Context, host component.Host, group pollerGroup, i int) (*poller, error) {
	cfg := group.list[i]
	base, err := url.Parse(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	maxConc := cfg.maxConcurrency(group.spec)
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
	client, err := cc.ToClient(ctx, host.GetExtensions(), h.set)
	if err != nil {
		return nil, err
	}
	own := originOf(base)
	guardOrigin(client, own)
	instance := cfg.Instance
	if instance == "" {
		instance = base.Host
	}
	g, _ := gateway.Lookup(group.name)
	name := group.name + "[" + strconv.Itoa(i) + "]"
	p := &poller{
		spec: group.spec, gkind: g.Kind(), name: name, instance: instance, cfg: cfg, base: base, client: client, h: h,
		maxConc: maxConc, origin: own, maxBody: cfg.maxResponseBodySize(group.spec),
		logger:   h.logger.With(zap.String("poller", name), zap.String("instance", instance)),
		attrs:    attribute.NewSet(attribute.String("gateway", group.name), attribute.String("instance", instance)),
		outcomes: make(map[string]attribute.Set, len(pollOutcomes)),
	}
	for _, o := range pollOutcomes {
		p.outcomes[o] = attribute.NewSet(attribute.String("gateway", group.name), attribute.String("instance", instance), attribute.String("outcome", o))
	}
	return p, nil
}

// emitLoop emits changes as soon as they are signalled and the whole state
// every report_interval, after marking rows stale. On stop it sends what is
// still queued.
func (h *Health) emitLoop() {
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

// pacePollers gives every poller its pacer (pace.go).
func (h *Health) pacePollers() {
	for _, p := range h.pollers {
		p.pace = &pacer{}
		if r := p.cfg.RequestRate; r > 0 {
			p.pace.fixed = time.Duration(float64(time.Second) / r)
		}
	}
}

func (h *Health) closeClients() {
	for _, p := range h.pollers {
		p.client.CloseIdleConnections()
	}
}
