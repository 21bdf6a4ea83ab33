package promstreamexporter

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/metadata"
	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/series"
	"github.com/otelgateway/otelgateway/internal/exposition"
	"github.com/otelgateway/otelgateway/internal/identity"
)

// Reasons a point is not exposed: the bounded `reason` attribute of
// otelcol_exporter_promstream_dropped_points.
const (
	reasonDelta       = "delta_temporality" // put the cumulative processor in front
	reasonUnsupported = "unsupported_type"  // histogram, summary, exponential histogram: not in this release
	reasonConflict    = "type_conflict"     // the name is already exposed with another type
	reasonInvalidName = "invalid_name"      // the name translates to nothing valid
)

// promStreamExporter keeps the latest value of every series in a series table
// and serves it on /metrics. It renders; it never accumulates (that is the
// cumulative processor's job).
type promStreamExporter struct {
	cfg       *Config
	settings  exporter.Settings
	telemetry *metadata.TelemetryBuilder
	table     *series.Table

	// mu serialises ConsumeMetrics: it guards the name cache and the label
	// scratch. Scrapes never take it.
	mu         sync.Mutex
	families   map[familyKey]familyRef
	metricName otlptranslator.MetricNamer
	labelName  otlptranslator.LabelNamer
	labels     []exposition.Label

	server  *http.Server
	serving sync.WaitGroup
	writers sync.Pool // *series.Writer, one per concurrent scrape
	stop    chan struct{}
	done    chan struct{}
}

// familyKey is what an OTel metric's Prometheus family depends on.
type familyKey struct {
	name, unit string
	typ        otlptranslator.MetricType
}

// familyRef caches the outcome of translating a familyKey: the family, or the
// reason its points are dropped.
type familyRef struct {
	family *series.Family
	reason string
}

func newExporter(cfg *Config, set exporter.Settings) (*promStreamExporter, error) {
	e := &promStreamExporter{
		cfg:        cfg,
		settings:   set,
		table:      series.New(),
		families:   make(map[familyKey]familyRef),
		metricName: otlptranslator.MetricNamer{WithMetricSuffixes: true},
		// Like the contrib exporter with its default feature gates.
		labelName: otlptranslator.LabelNamer{PreserveMultipleUnderscores: true},
		writers:   sync.Pool{New: func() any { return new(series.Writer) }},
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings, e.table.Len)
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
		err = e.server.Shutdown(ctx)
		e.serving.Wait()
	}
	if e.stop != nil {
		close(e.stop)
		<-e.done
		e.stop = nil
	}
	e.telemetry.Shutdown()
	return err
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
	if n := e.table.Expire(now.Add(-e.cfg.MetricExpiration).UnixNano()); n > 0 {
		e.telemetry.ExporterPromstreamExpiredSeries.Add(context.Background(), int64(n))
	}
}

// consumeMetrics stores the latest value of every point.
func (e *promStreamExporter) consumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	now := time.Now().UnixNano()
	e.mu.Lock()
	defer e.mu.Unlock()
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		job, instance := jobInstance(rm.Resource().Attributes())
		resHash := identity.Combine(identity.OfString(job), identity.OfString(instance))
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				e.consumeMetric(ctx, ms.At(k), job, instance, resHash, now)
			}
		}
	}
	return nil
}

func (e *promStreamExporter) consumeMetric(ctx context.Context, m pmetric.Metric, job, instance string, resHash uint64, now int64) {
	var dps pmetric.NumberDataPointSlice
	var typ otlptranslator.MetricType
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		dps, typ = m.Gauge().DataPoints(), otlptranslator.MetricTypeGauge
	case pmetric.MetricTypeSum:
		dps = m.Sum().DataPoints()
		if m.Sum().AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
			e.drop(ctx, reasonDelta, m.Name(), dps.Len())
			return
		}
		typ = otlptranslator.MetricTypeNonMonotonicCounter
		if m.Sum().IsMonotonic() {
			typ = otlptranslator.MetricTypeMonotonicCounter
		}
	default:
		e.drop(ctx, reasonUnsupported, m.Name(), dataPointCount(m))
		return
	}
	ref := e.familyOf(m, typ)
	if ref.family == nil {
		e.drop(ctx, ref.reason, m.Name(), dps.Len())
		return
	}
	f := ref.family
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		key := series.Key{Job: job, Instance: instance, Attrs: dp.Attributes()}
		hash := identity.Combine(resHash, identity.OfMap(dp.Attributes()))
		f.Set(hash, &key, numberValue(dp), now, func(dst []byte) []byte {
			return e.renderPrefix(dst, f.Name(), &key)
		})
	}
}

// familyOf translates an OTel metric into its Prometheus family, once per
// (name, unit, type): later points hit the cache without translating.
func (e *promStreamExporter) familyOf(m pmetric.Metric, typ otlptranslator.MetricType) familyRef {
	k := familyKey{name: m.Name(), unit: m.Unit(), typ: typ}
	if ref, ok := e.families[k]; ok {
		return ref
	}
	k.name, k.unit = strings.Clone(k.name), strings.Clone(k.unit)
	ref := familyRef{}
	name, err := e.metricName.Build(otlptranslator.Metric{Name: k.name, Unit: k.unit, Type: typ})
	if err != nil {
		ref.reason = reasonInvalidName
		e.settings.Logger.Warn("Metric name cannot be translated; its points are dropped", zap.String("metric", k.name), zap.Error(err))
	} else if ref.family, err = e.table.Family(name, m.Description(), promType(typ)); err != nil {
		ref.reason = reasonConflict
		e.settings.Logger.Warn("Metric translates to a family already exposed with another type; its points are dropped",
			zap.String("metric", k.name), zap.String("family", name))
	}
	e.families[k] = ref
	return ref
}

// renderPrefix renders `name{labels}` for a new series: job and instance from
// the resource, then the point's attributes with names translated; labels
// sorted by name, and values of attributes that translate to one name joined
// with ";" (as the contrib exporter does). Runs once per series.
func (e *promStreamExporter) renderPrefix(dst []byte, name string, key *series.Key) []byte {
	labels := append(e.labels[:0], exposition.Label{Name: "job", Value: key.Job}, exposition.Label{Name: "instance", Value: key.Instance})
	for k, v := range key.Attrs.All() {
		ln, err := e.labelName.Build(k)
		if err != nil {
			continue // an empty or all-underscore key has no valid label name
		}
		labels = append(labels, exposition.Label{Name: ln, Value: v.AsString()})
	}
	slices.SortStableFunc(labels, func(a, b exposition.Label) int { return strings.Compare(a.Name, b.Name) })
	labels = mergeDuplicates(labels)
	e.labels = labels
	return exposition.AppendSeriesPrefix(dst, name, labels)
}

// mergeDuplicates joins the values of adjacent labels with the same name.
func mergeDuplicates(labels []exposition.Label) []exposition.Label {
	out := labels[:0]
	for _, l := range labels {
		if n := len(out); n > 0 && out[n-1].Name == l.Name {
			if l.Value != "" {
				if out[n-1].Value != "" {
					out[n-1].Value += ";"
				}
				out[n-1].Value += l.Value
			}
			continue
		}
		out = append(out, l)
	}
	return out
}

func (e *promStreamExporter) drop(ctx context.Context, reason, name string, n int) {
	if n == 0 {
		return
	}
	e.telemetry.ExporterPromstreamDroppedPoints.Add(ctx, int64(n), metric.WithAttributeSet(dropReasons[reason]))
	e.settings.Logger.Debug("Points not exposed", zap.String("metric", name), zap.String("reason", reason), zap.Int("points", n))
}

var dropReasons = map[string]attribute.Set{
	reasonDelta:       attribute.NewSet(attribute.String("reason", reasonDelta)),
	reasonUnsupported: attribute.NewSet(attribute.String("reason", reasonUnsupported)),
	reasonConflict:    attribute.NewSet(attribute.String("reason", reasonConflict)),
	reasonInvalidName: attribute.NewSet(attribute.String("reason", reasonInvalidName)),
}

// jobInstance derives the job and instance labels as the Prometheus
// compatibility spec does: job = service.namespace/service.name (or just
// service.name), instance = service.instance.id.
func jobInstance(res pcommon.Map) (job, instance string) {
	if v, ok := res.Get("service.name"); ok {
		job = v.AsString()
		if ns, ok := res.Get("service.namespace"); ok && ns.AsString() != "" {
			job = ns.AsString() + "/" + job
		}
	}
	if v, ok := res.Get("service.instance.id"); ok {
		instance = v.AsString()
	}
	return job, instance
}

func promType(t otlptranslator.MetricType) exposition.Type {
	if t == otlptranslator.MetricTypeMonotonicCounter {
		return exposition.TypeCounter
	}
	return exposition.TypeGauge
}

func numberValue(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}

func dataPointCount(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().DataPoints().Len()
	case pmetric.MetricTypeSummary:
		return m.Summary().DataPoints().Len()
	default:
		return 0
	}
}
