package promstreamexporter

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/metadata"
	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/series"
	"github.com/otelgateway/otelgateway/internal/foldlog"
	"github.com/otelgateway/otelgateway/internal/rename"
)

// Reasons a point is not exposed: the bounded `reason` attribute of
// otelcol_exporter_promstream_dropped_points.
const (
	reasonDelta       = "delta_temporality" // put the cumulative processor in front
	reasonUnsupported = "unsupported_type"  // an empty metric, or a type Prometheus has no form for
	reasonConflict    = "type_conflict"     // the name is already exposed with another type
	reasonInvalidName = "invalid_name"      // the name translates to nothing valid
	reasonLimit       = "max_series"        // the table is full
	reasonInvalid     = "invalid_point"     // bounds or quantiles that cannot be written validly (invalid.go)
)

// promStreamExporter keeps the latest value of every series in a series table
// and serves it on /metrics. It renders; it never accumulates (that is the
// cumulative processor's job).
type promStreamExporter struct {
	cfg       *Config
	settings  exporter.Settings
	telemetry *metadata.TelemetryBuilder
	table     *series.Table
	namer     *namer

	// mu serialises ConsumeMetrics: it guards the namer's caches and scratch.
	// Scrapes never take it.
	mu sync.Mutex

	server  *http.Server
	serving sync.WaitGroup
	// slots holds one scrapeSlot per allowed concurrent scrape: taking one
	// is the concurrency limit, and its buffers and compressors live as long
	// as the exporter, so a scrape after a GC does not regrow them.
	slots slotPool
	stop  chan struct{}
	done  chan struct{}
	// folds logs the points limits.max_series refuses (internal/foldlog);
	// refused counts them through a batch (guarded by mu), so the log is
	// told once per batch, never per point.
	folds   *foldlog.Logger
	refused int64
	// warnedInvalid limits the invalid point warning to one per expiry
	// period.
	warnedInvalid bool
	// points is the reusable point writer (guarded by mu).
	points pointWriter
	// scrapeAttrs are the scrape telemetry's attributes per format.
	scrapeAttrs scrapeAttrs
	// negotiator picks a scrape's format among those enable_open_metrics
	// allows.
	negotiator *exposition.Negotiator

	// generation counts the batches stored; readGen is the highest
	// generation a scrape started at and completed (outcome ok), so it
	// read every batch up to it. Shutdown waits for readGen to reach
	// generation (shutdown_grace); scraped wakes it.
	generation atomic.Uint64
	readGen    atomic.Uint64
	scraped    chan struct{}
	// scrapers are the connections whole scrapes came from: Shutdown
	// also waits for each regular one to read the final state (an HA
	// pair of Prometheus servers).
	scrapers scrapers
}

func newExporter(cfg *Config, set exporter.Settings) (*promStreamExporter, error) {
	cfg, overrides := cfg.withPreset()
	e := &promStreamExporter{
		cfg:      cfg,
		settings: set,
		table: series.New(series.Options{
			MaxSeries:       cfg.Limits.MaxSeries,
			KeepEmptyLabels: cfg.KeepEmptyLabels,
			Unsorted:        cfg.LabelOrder == labelOrderAsReceived,
			ShortestBounds:  cfg.TextBucketFormat == bucketFormatShortest,
			Timestamps:      cfg.SendTimestamps,
			// compatibility: envoy (envoy_cluster_upstream_rq beside
			// envoy_cluster_upstream_rq_total).
			ExactCounterNames: cfg.exactCounterNames,
			MaxKeptBytes:      cfg.Limits.MaxGzipKeptBytes,
			GzipWorkers:       cfg.Limits.MaxGzipWorkers,
		}),
		namer:       newNamer(cfg),
		slots:       slotPool{free: make([]*scrapeSlot, 0, cfg.Limits.MaxConcurrentScrapes)},
		folds:       newSeriesFolds(cfg, set.Logger),
		scrapeAttrs: newScrapeAttrs(),
		negotiator:  exposition.NewNegotiator(cfg.EnableOpenMetrics == nil || *cfg.EnableOpenMetrics),
		scraped:     make(chan struct{}, 1),
	}
	if _, deprecated := cfg.resourceLabels(); deprecated {
		set.Logger.Warn("resource_to_telemetry_conversion is deprecated; use resource_constant_labels instead")
	}
	if cfg.addMetricSuffixesIgnored() {
		set.Logger.Warn("add_metric_suffixes is deprecated and ignored (as in the contrib prometheus exporter, whose feature gate " +
			gateDisableAddMetricSuffixes + " is on by default); set translation_strategy: UnderscoreEscapingWithoutSuffixes instead")
	}
	rename.Warn(set.Logger, cfg.renamed)
	warnOverrides(set.Logger, cfg.Compatibility, overrides)
	for range cfg.Limits.MaxConcurrentScrapes {
		e.slots.put(new(scrapeSlot)) // buffers are made on first use
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings, e.table.Len, e.table.Families)
	if err != nil {
		return nil, err
	}
	e.telemetry = tb
	return e, nil
}

func (e *promStreamExporter) start(ctx context.Context, host component.Host) error {
	mux := http.NewServeMux()
	mux.HandleFunc(metricsPath, e.handleMetrics)
	srv, err := e.cfg.ServerConfig.ToServer(ctx, host.GetExtensions(), e.settings.TelemetrySettings, mux)
	if err != nil {
		return err
	}
	ln, err := e.cfg.ServerConfig.ToListener(ctx)
	if err != nil {
		return err
	}
	e.server = srv
	e.settings.Logger.Info("Serving Prometheus metrics", zap.String("endpoint", ln.Addr().String()+metricsPath))
	e.serving.Add(1)
	go func() {
		defer e.serving.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(err))
		}
	}()
	e.stop = make(chan struct{})
	e.done = make(chan struct{})
	go e.expireLoop()
	return nil
}

func (e *promStreamExporter) shutdown(ctx context.Context) error {
	var err error
	if e.server != nil {
		e.awaitFinalScrape(ctx)
		err = e.server.Shutdown(ctx)
		e.serving.Wait()
	}
	defer e.folds.Close()
	if e.stop != nil {
		close(e.stop)
		<-e.done
		e.stop = nil
	}
	e.telemetry.Shutdown()
	return err
}

// awaitFinalScrape keeps /metrics served, for at most shutdown_grace, until
// a scrape that started after the last stored batch has completed, and
// every scraper that scrapes regularly (scrapers.regular: both servers of an
// HA pair) has completed one: without persistent storage the collector's
// last flush lands here on shutdown, and a pull exporter that stopped at
// once would lose it (a clean restart lost seconds of traffic). It returns
// at once when no batch came after those scrapes, and when ctx ends.
func (e *promStreamExporter) awaitFinalScrape(ctx context.Context) {
	grace := e.cfg.ShutdownGrace
	if grace <= 0 {
		return
	}
	regular := e.scrapers.regular(time.Now(), grace)
	if e.finalStateRead(regular) {
		return
	}
	e.settings.Logger.Info("Serving /metrics until a scrape reads the final state (shutdown_grace)",
		zap.Duration("shutdown_grace", grace), zap.Int("regular_scrapers", len(regular)))
	timer := time.NewTimer(grace)
	defer timer.Stop()
	for !e.finalStateRead(regular) {
		select {
		case <-e.scraped:
		case <-timer.C:
			e.settings.Logger.Warn("Not every scraper read the final state within shutdown_grace; unless sharded (?shard=) scrapes read all of it, its last points are not served to them",
				zap.Duration("shutdown_grace", grace), zap.Bool("any_whole_scrape", e.readGen.Load() >= e.generation.Load()),
				zap.Int("regular_scrapers", len(regular)),
				zap.Int("regular_scrapers_unread", e.scrapers.unread(regular, e.generation.Load())))
			return
		case <-ctx.Done():
			return
		}
	}
}

// finalStateRead reports whether a completed scrape read every stored
// batch, and every scraper of regular did.
func (e *promStreamExporter) finalStateRead(regular []string) bool {
	gen := e.generation.Load()
	return e.readGen.Load() >= gen && e.scrapers.unread(regular, gen) == 0
}

// scrapeCompleted records that a scrape which started at generation gen
// completed: it read every batch up to gen.
func (e *promStreamExporter) scrapeCompleted(gen uint64) {
	for {
		read := e.readGen.Load()
		if gen <= read || e.readGen.CompareAndSwap(read, gen) {
			break
		}
	}
	select {
	case e.scraped <- struct{}{}:
	default:
	}
}

// expireLoop removes series older than metric_expiration, in the background,
// checking four times per expiration period, so a series disappears between
// 1 and 1.25 metric_expiration after its last update.
func (e *promStreamExporter) expireLoop() {
	defer close(e.done)
	t := time.NewTicker(e.cfg.MetricExpiration / 4)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case now := <-t.C:
			e.expire(now)
		}
	}
}

func (e *promStreamExporter) expire(now time.Time) {
	cutoff := now.Add(-e.cfg.MetricExpiration).UnixNano()
	if n := e.table.Expire(cutoff); n > 0 {
		e.telemetry.ExporterPromstreamExpiredSeries.Add(context.Background(), int64(n))
	}
	e.mu.Lock()
	e.namer.forgetContexts(cutoff)
	e.warnedInvalid = false
	e.mu.Unlock()
}

// consumeMetrics stores the latest value of every point.
func (e *promStreamExporter) consumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	now := time.Now().UnixNano()
	e.mu.Lock()
	defer e.mu.Unlock()
	// Counted once the batch is stored: a scrape that starts after that
	// reads it (shutdown_grace waits for one to complete).
	defer e.generation.Add(1)
	defer e.reportRefused()
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		res := e.namer.resource(rm.Resource().Attributes(), now)
		e.targetInfo(ctx, res, now)
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			sm := sms.At(j)
			c := e.namer.context(res, sm.Scope(), sm.SchemaUrl(), now)
			ms := sm.Metrics()
			for k := 0; k < ms.Len(); k++ {
				e.consumeMetric(ctx, ms.At(k), c, now)
			}
		}
	}
	return nil
}

func (e *promStreamExporter) consumeMetric(ctx context.Context, m pmetric.Metric, c *labelContext, now int64) {
	kind, n := classify(m)
	if kind.reason != "" {
		e.drop(ctx, kind.reason, m.Name(), n)
		return
	}
	f, reason := e.familyOf(m, kind)
	if f == nil {
		e.drop(ctx, reason, m.Name(), n)
		return
	}
	p := &e.points
	*p = pointWriter{e: e, ctx: ctx, f: f, c: c, now: now, labels: p.labels}
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		p.numbers(m.Gauge().DataPoints())
	case pmetric.MetricTypeSum:
		p.numbers(m.Sum().DataPoints())
	case pmetric.MetricTypeHistogram:
		p.histograms(m.Histogram().DataPoints())
	case pmetric.MetricTypeExponentialHistogram:
		p.exponential(m.ExponentialHistogram().DataPoints())
	case pmetric.MetricTypeSummary:
		p.summaries(m.Summary().DataPoints())
	}
}

// familyOf translates an OTel metric into its Prometheus family, once per
// (name, unit, type): later points hit the namer's cache.
func (e *promStreamExporter) familyOf(m pmetric.Metric, kind metricKind) (*series.Family, string) {
	ref, fresh := e.namer.family(m, kind.otel)
	if !fresh {
		return ref.family, ref.reason
	}
	if ref.reason != "" {
		e.settings.Logger.Warn("Metric name cannot be translated; its points are dropped", zap.String("metric", m.Name()))
		return nil, ref.reason
	}
	f, err := e.table.Family(ref.name, m.Description(), kind.prom)
	if err != nil {
		e.settings.Logger.Warn("Metric translates to a name another family already writes with another type; its points are dropped",
			zap.String("metric", m.Name()), zap.String("family", ref.name), zap.String("type", kind.prom.String()))
		e.namer.setFamily(m, kind.otel, familyRef{reason: reasonConflict})
		return nil, reasonConflict
	}
	e.namer.setFamily(m, kind.otel, familyRef{name: ref.name, family: f})
	return f, ""
}

// targetInfo keeps target_info{job,instance,...} 1 for a resource that has
// both a job and an instance, as the Prometheus compatibility spec asks.
func (e *promStreamExporter) targetInfo(ctx context.Context, res *resourceLabels, now int64) {
	if res.targetInfo == nil {
		return
	}
	f, err := e.table.Family(e.namer.targetInfoName, "Target metadata", exposition.TypeGauge)
	if err != nil {
		return // a user metric took the name: it wins, as in the contrib exporter
	}
	key := series.Key{Context: res.targetInfo, Attrs: emptyAttrs}
	s, err := f.Series(res.targetInfoHash, &key, now, contextLabels{res.targetInfo})
	if err != nil {
		e.limited(ctx, "target_info", 1)
		return
	}
	s.SetValue(1, now)
}

func (e *promStreamExporter) drop(ctx context.Context, reason, name string, n int) {
	if n == 0 {
		return
	}
	e.telemetry.ExporterPromstreamDroppedPoints.Add(ctx, int64(n), metric.WithAttributeSet(dropReasons[reason]))
	e.settings.Logger.Debug("Points not exposed", zap.String("metric", name), zap.String("reason", reason), zap.Int("points", n))
}

// limited counts points refused because the table is full; the batch's
// count goes to the log when it ends (reportRefused). The caller holds mu.
func (e *promStreamExporter) limited(ctx context.Context, name string, n int) {
	e.drop(ctx, reasonLimit, name, n)
	e.refused += int64(n)
}

// reportRefused tells the fold log what limits.max_series refused in the
// batch. The caller holds mu.
func (e *promStreamExporter) reportRefused() {
	if e.refused > 0 {
		e.folds.Folded(e.refused)
		e.refused = 0
	}
}

// invalid counts a point that cannot be written validly, and warns once per
// expiry period, naming what was wrong.
func (e *promStreamExporter) invalid(ctx context.Context, name, why string) {
	e.drop(ctx, reasonInvalid, name, 1)
	if !e.warnedInvalid {
		e.warnedInvalid = true
		e.settings.Logger.Warn("Data point cannot be exposed validly; it is dropped (further ones until the next expiry check are only counted)",
			zap.String("metric", name), zap.String("problem", why))
	}
}

var dropReasons = map[string]attribute.Set{
	reasonDelta:       attribute.NewSet(attribute.String("reason", reasonDelta)),
	reasonUnsupported: attribute.NewSet(attribute.String("reason", reasonUnsupported)),
	reasonConflict:    attribute.NewSet(attribute.String("reason", reasonConflict)),
	reasonInvalidName: attribute.NewSet(attribute.String("reason", reasonInvalidName)),
	reasonLimit:       attribute.NewSet(attribute.String("reason", reasonLimit)),
	reasonInvalid:     attribute.NewSet(attribute.String("reason", reasonInvalid)),
}

// metricKind is how one OTel metric maps to Prometheus, or why it does not.
type metricKind struct {
	otel   otlptranslator.MetricType
	prom   exposition.Type
	reason string
}

// classify maps an OTel metric to its Prometheus type and returns its point
// count. Delta temporality cannot be exposed: a scrape would read the last
// delta as a total.
func classify(m pmetric.Metric) (metricKind, int) {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return metricKind{otel: otlptranslator.MetricTypeGauge, prom: exposition.TypeGauge}, m.Gauge().DataPoints().Len()
	case pmetric.MetricTypeSum:
		s := m.Sum()
		n := s.DataPoints().Len()
		switch {
		case s.AggregationTemporality() != pmetric.AggregationTemporalityCumulative:
			return metricKind{reason: reasonDelta}, n
		case s.IsMonotonic():
			return metricKind{otel: otlptranslator.MetricTypeMonotonicCounter, prom: exposition.TypeCounter}, n
		default:
			return metricKind{otel: otlptranslator.MetricTypeNonMonotonicCounter, prom: exposition.TypeGauge}, n
		}
	case pmetric.MetricTypeHistogram:
		h := m.Histogram()
		if h.AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
			return metricKind{reason: reasonDelta}, h.DataPoints().Len()
		}
		return metricKind{otel: otlptranslator.MetricTypeHistogram, prom: exposition.TypeHistogram}, h.DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		h := m.ExponentialHistogram()
		if h.AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
			return metricKind{reason: reasonDelta}, h.DataPoints().Len()
		}
		return metricKind{otel: otlptranslator.MetricTypeExponentialHistogram, prom: exposition.TypeHistogram}, h.DataPoints().Len()
	case pmetric.MetricTypeSummary:
		return metricKind{otel: otlptranslator.MetricTypeSummary, prom: exposition.TypeSummary}, m.Summary().DataPoints().Len()
	default:
		return metricKind{reason: reasonUnsupported}, 0
	}
}

// contextLabels is the LabelSource of a series whose labels are exactly its
// context's (target_info).
type contextLabels struct{ c *series.Context }

func (l contextLabels) Labels() []exposition.Label { return l.c.Labels }
