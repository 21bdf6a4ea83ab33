// Package gatewayreceiver is the `gateway` receiver: it turns the spans,
// access logs and upstream health that API gateways already emit into
// request, latency, bandwidth and health metrics (README.md). Gateways live
// in internal/gateway (one home each, one registry), upstream health in
// internal/health, naming profiles in profile_<name>.go.
package gatewayreceiver // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver"

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/extension/extensionauth"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/otelgateway/otelgateway/internal/rename"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/admission"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/health"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
)

// gatewayReceiver turns gateway spans and access logs into request, latency
// and bandwidth metrics, emitted as deltas every flush interval, and passes
// the spans it received on to a traces pipeline when it is in one.
type gatewayReceiver struct {
	cfg        *Config
	settings   receiver.Settings
	next       consumer.Metrics // nil when only in a traces pipeline
	nextTraces consumer.Traces  // nil when not in a traces pipeline
	telemetry  *metadata.TelemetryBuilder
	agg        *aggregator
	// rates are sampling_rates by gateway kind.
	rates []float64
	// admit bounds the request bytes held at once across every ingest
	// path (internal/admission).
	admit *admission.Limiter
	// receiving bounds the gRPC calls whose message is still arriving and
	// ends the stalled ones (grpc.go); stopReap stops its reaper.
	receiving *admission.Receiving
	stopReap  chan struct{}
	// scratch hands each concurrent export its own *exportScratch; bodies
	// holds request body buffers (*[]byte) up to maxPooledBody.
	scratch sync.Pool
	bodies  sync.Pool

	serverHTTP *http.Server
	serverGRPC *grpc.Server
	// grpcAuth is protocols.grpc's authenticator (auth:), run by
	// admitStream before a call's message is read; nil without one.
	grpcAuth extensionauth.Server
	servers  sync.WaitGroup

	// windowStart is the start of the delta window being accumulated; only the
	// flush goroutine (and Shutdown, after it stopped) touches it.
	windowStart pcommon.Timestamp
	// coldStart: no window was carried over at start (no storage, or
	// nothing restored), so the first flush dates its window's start just
	// before its end (flush says why).
	coldStart bool
	stopFlush chan struct{}
	flushDone chan struct{}

	// health is the upstream-health part (internal/health); nil when the
	// health section is absent.
	health *health.Health
	// ckpt writes the checkpoint after each flush (checkpoint.go); nil
	// without storage.
	ckpt *checkpointer
	// folds log when a bound of the limits section folds or refuses data.
	folds folds
}

func newReceiver(cfg *Config, set receiver.Settings, next consumer.Metrics) (*gatewayReceiver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	id, idWarning, err := cfg.identity()
	if err != nil {
		return nil, err
	}
	rename.Warn(set.Logger, cfg.renamed)
	if idWarning != "" {
		set.Logger.Warn(idWarning)
	}
	set.Logger.Info("Collector identity", zap.String("label", id.Key), zap.String("value", id.Value))
	dims := cfg.dimensions()
	prof := profileByName(cfg.Profile).withDurationHistograms(cfg.durationBounds(), cfg.expoSize()).withoutMetrics(cfg.disabledMetrics())
	agg := newAggregator(prof, dims, cfg.limits())
	agg.keepExemplars = cfg.Exemplars.Enabled
	agg.identity = id
	agg.nodeLabel = cfg.NodeLabel
	r := &gatewayReceiver{
		cfg:       cfg,
		settings:  set,
		next:      next,
		telemetry: tb,
		agg:       agg,
		rates:     cfg.samplingRates(),
		admit:     admission.New(cfg.Limits.MaxRequestBytesInFlight, cfg.Limits.AdmissionQueueSize, cfg.Limits.AdmissionQueueTimeout),
		folds:     newFolds(cfg, set.Logger),
		receiving: admission.NewReceiving(receivingSlots(cfg), receivingSlots(cfg)/connShareDiv, cfg.GRPCReceiveTimeout),
	}
	r.scratch.New = func() any { return newScratch(r, cfg.detect(), dims.spanKeys()) }
	return r, nil
}

// Start starts the servers and the flush loop. A failed start shuts down
// whatever did start.
func (r *gatewayReceiver) Start(ctx context.Context, host component.Host) error {
	r.windowStart = pcommon.NewTimestampFromTime(time.Now())
	r.coldStart = true // until a checkpoint carries a window over
	// Before the flush loop and the servers: the restored windows are
	// replayed downstream and the open window's start carried over.
	if err := r.openCheckpoint(ctx, host); err != nil {
		return err
	}
	r.stopFlush = make(chan struct{})
	r.flushDone = make(chan struct{})
	go r.flushLoop()

	if err := r.startHealth(ctx, host); err != nil {
		return errors.Join(err, r.Shutdown(ctx))
	}
	if err := r.startHTTP(ctx, host); err != nil {
		return errors.Join(err, r.Shutdown(ctx))
	}
	if err := r.startGRPC(ctx, host); err != nil {
		return errors.Join(err, r.Shutdown(ctx))
	}
	return nil
}

// startHealth builds and starts the health part when the health section is
// configured. It runs before the HTTP server starts, so the push endpoint
// finds its core ready. A receiver with a health section must be in a
// metrics pipeline: the gauges have nowhere else to go.
func (r *gatewayReceiver) startHealth(ctx context.Context, host component.Host) error {
	if !r.cfg.Health.HasValue() {
		return nil
	}
	if r.next == nil {
		return errors.New("receiver " + r.settings.ID.String() + " has a health section but is in no metrics pipeline: " +
			"list it under a metrics pipeline's receivers (service::pipelines::metrics::receivers), or remove its health section")
	}
	h, err := health.New(health.Settings{
		Config: r.cfg.healthConfig(), Naming: profileByName(string(r.cfg.healthProfile())).health, Identity: r.agg.identity, Next: r.next,
		Telemetry: r.telemetry, TelemetrySettings: r.settings.TelemetrySettings, Logger: r.settings.Logger,
		MaxLabelBytes: r.cfg.Limits.MaxLabelValueLength, PushFolds: r.folds.pushed,
	})
	if err != nil {
		return err
	}
	if err := h.Start(ctx, host); err != nil {
		return err
	}
	r.health = h
	return nil
}

// serve runs a server's accept loop and reports a fatal error to the host.
func (r *gatewayReceiver) serve(host component.Host, name string, ln net.Listener, serve func(net.Listener) error, closed error) {
	r.settings.Logger.Info("Starting "+name+" server", zap.String("endpoint", ln.Addr().String()))
	r.servers.Add(1)
	go func() {
		defer r.servers.Done()
		if err := serve(ln); err != nil && !errors.Is(err, closed) {
			componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(err))
		}
	}()
}

// Shutdown stops the servers, then flushes what was counted so far, so a
// clean restart loses no requests.
func (r *gatewayReceiver) Shutdown(ctx context.Context) error {
	var errs error
	if r.serverHTTP != nil {
		errs = errors.Join(errs, r.serverHTTP.Shutdown(ctx))
	}
	if r.serverGRPC != nil {
		// Calls still receiving their message are ended first (their
		// clients retry): a stalled one would hold the graceful stop.
		r.receiving.Close()
		r.stopGRPC(ctx)
	}
	if r.stopReap != nil {
		close(r.stopReap)
		r.stopReap = nil
	}
	r.servers.Wait()
	if r.health != nil {
		errs = errors.Join(errs, r.health.Shutdown(ctx))
		r.health = nil
	}
	if r.stopFlush != nil {
		close(r.stopFlush)
		<-r.flushDone
		r.stopFlush = nil
		r.flush(ctx)
	}
	errs = errors.Join(errs, r.closeCheckpoint(ctx))
	r.folds.close()
	return errs
}

// stopGRPC stops the gRPC server gracefully (calls in progress finish), or
// at once when ctx ends first.
func (r *gatewayReceiver) stopGRPC(ctx context.Context) {
	stopped := make(chan struct{})
	go func() {
		r.serverGRPC.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		r.serverGRPC.Stop()
		<-stopped
	}
}

// exportScratch is the reusable working memory of one request: its body,
// the span counter and the events read from it.
type exportScratch struct {
	counter gateway.SpanCounter
	events  []gateway.Event
	body    []byte
	// charge is what the request holds against max_request_bytes_in_flight
	// (nil: nothing, as for the pdata a traces pipeline is handed);
	// putScratch releases it.
	charge *admission.Charge
	// collect appends an event to events (bound once, so passing it
	// allocates nothing); collected counts the events it was handed.
	collect   func(*gateway.Event)
	collected int
	// ctx, while set (aggregating), makes collect hand every eventChunk
	// events to the aggregator as they arrive: a request of 150k spans then
	// holds 1k events (~700 KiB) at a time instead of all of them (~100 MiB
	// and the copies of a growing slice). Every caller collects only from a
	// body already known to be whole (the span counter reports once it has
	// read every span, an array of log entries is checked whole first), so
	// nothing is aggregated of a body that is then refused.
	ctx context.Context
	r   *gatewayReceiver
}

// eventChunk is how many events a request holds before they are aggregated.
const eventChunk = 1024

func newScratch(r *gatewayReceiver, detect gateway.Kind, dims []gateway.AttrKey) *exportScratch {
	s := &exportScratch{counter: gateway.SpanCounter{Detect: detect, Dimensions: dims}, r: r}
	// What decoding a protobuf body builds is charged with its bytes.
	s.counter.Reserve = func(n int64) error { return s.charge.Add(n) }
	s.collect = func(e *gateway.Event) {
		s.events = append(s.events, *e)
		s.collected++
		if len(s.events) == eventChunk && s.ctx != nil {
			s.r.addEvents(s.ctx, s.events)
			clear(s.events)
			s.events = s.events[:0]
		}
	}
	return s
}

// aggregating makes s hand its events to the aggregator in chunks as they
// are collected, when the receiver is in a metrics pipeline.
func (s *exportScratch) aggregating(ctx context.Context) {
	if s.r.next != nil {
		s.ctx = ctx
	}
}

// maxPooledBody is the largest body buffer kept for reuse (a typical
// gateway batch is tens to a few hundred KiB); larger ones are dropped after
// their request. A request waiting for its body holds one pooled buffer at
// most, so slow or stalled uploads cannot pin large buffers.
const maxPooledBody = 256 << 10

// maxPooledEvents bounds the events a pooled scratch keeps room for.
const maxPooledEvents = 4096

func (r *gatewayReceiver) getScratch() *exportScratch {
	return r.scratch.Get().(*exportScratch)
}

// getBody returns an empty body buffer, pooled when one is free.
func (r *gatewayReceiver) getBody() []byte {
	if b, ok := r.bodies.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return nil
}

// putBody pools b for reuse unless it is large.
func (r *gatewayReceiver) putBody(b []byte) {
	if b != nil && cap(b) <= maxPooledBody {
		r.bodies.Put(&b)
	}
}

// putScratch pools s again. The events' and the counter's strings borrow
// the body, so all of them are dropped together; a request's scratch is
// taken only once its body has been read (handleTraces, handleLog), so a
// stalled upload holds at most one pooled body buffer.
func (r *gatewayReceiver) putScratch(s *exportScratch) {
	s.charge.Release()
	s.charge = nil
	s.counter.Release()
	clear(s.events)
	s.events, s.collected, s.ctx = s.events[:0], 0, nil
	if cap(s.events) > maxPooledEvents {
		s.events = nil
	}
	r.putBody(s.body)
	s.body = nil
	r.scratch.Put(s)
}

// ingest counts the gateway root spans of one export, then hands the spans
// to the traces pipeline if there is one. It is the core of gRPC and of the
// HTTP paths that need pdata. Spans are mapped before the aggregator's lock
// is taken, so concurrent exports only serialise on the map updates.
//
// The spans are counted before they are forwarded (after ConsumeTraces the
// receiver no longer owns td): if the traces pipeline refuses them and the
// client retries, that export is counted again.
func (r *gatewayReceiver) ingest(ctx context.Context, td ptrace.Traces) error {
	if r.next != nil {
		s := r.getScratch()
		s.aggregating(ctx)
		examined, counted := s.counter.Count(td, s.collect)
		r.record(ctx, s, examined, counted)
		r.putScratch(s)
	}
	if r.nextTraces != nil {
		return r.nextTraces.ConsumeTraces(ctx, td)
	}
	return nil
}

// countProto counts the gateway root spans of an OTLP protobuf body without
// unmarshalling it into pdata (only for a receiver in no traces pipeline).
// A malformed body counts nothing.
func (r *gatewayReceiver) countProto(ctx context.Context, s *exportScratch, body []byte) error {
	s.aggregating(ctx)
	examined, counted, err := s.counter.CountProto(body, s.collect)
	if err != nil {
		return err
	}
	r.record(ctx, s, examined, counted)
	return nil
}

// record aggregates the events in s and counts the spans.
func (r *gatewayReceiver) record(ctx context.Context, s *exportScratch, examined, counted int) {
	r.addEvents(ctx, s.events)
	r.telemetry.ReceiverGatewaySpans.Add(ctx, int64(counted), metric.WithAttributeSet(spansCounted))
	r.telemetry.ReceiverGatewaySpans.Add(ctx, int64(examined-counted), metric.WithAttributeSet(spansIgnored))
}

// addEvents aggregates events under one lock and counts what the profile
// did not count or folded into the overflow tuple.
func (r *gatewayReceiver) addEvents(ctx context.Context, events []gateway.Event) {
	var sampling [4]int64 // by gateway.Sampling
	for i := range events {
		events[i].Weighted(r.rates)
		sampling[events[i].Sampling]++
	}
	for s, set := range samplingSets {
		if n := sampling[s]; n > 0 && set.Len() > 0 {
			r.telemetry.ReceiverGatewaySpanSampling.Add(ctx, n, metric.WithAttributeSet(set))
		}
	}
	var notCounted int64
	r.agg.mu.Lock()
	before, gwBefore, truncatedBefore := r.agg.overflowed, r.agg.gatewaysOverflowed, r.agg.truncated
	for i := range events {
		if !r.agg.addLocked(&events[i]) {
			notCounted++
		}
	}
	overflowed, gwOverflowed, truncated := r.agg.overflowed-before, r.agg.gatewaysOverflowed-gwBefore, r.agg.truncated-truncatedBefore
	r.agg.mu.Unlock()
	if overflowed > 0 {
		r.folds.tuples.Folded(overflowed - gwOverflowed)
		r.folds.gateways.Folded(gwOverflowed)
	}
	if truncated > 0 {
		r.telemetry.ReceiverGatewayLabelValuesTruncated.Add(ctx, truncated)
	}
	r.telemetry.ReceiverGatewayEvents.Add(ctx, int64(len(events))-notCounted-overflowed, metric.WithAttributeSet(eventsCounted))
	if notCounted > 0 {
		r.telemetry.ReceiverGatewayEvents.Add(ctx, notCounted, metric.WithAttributeSet(eventsNotCounted))
	}
	if overflowed > 0 {
		r.telemetry.ReceiverGatewayEvents.Add(ctx, overflowed, metric.WithAttributeSet(eventsOverflow))
	}
}

// samplingSets are the sampling attribute sets by gateway.Sampling (none:
// log entries, not recorded).
var samplingSets = [...]attribute.Set{
	gateway.SamplingUnknown:    attribute.NewSet(attribute.String("sampling", "unknown")),
	gateway.SamplingThreshold:  attribute.NewSet(attribute.String("sampling", "threshold")),
	gateway.SamplingConfigured: attribute.NewSet(attribute.String("sampling", "configured")),
}

var (
	spansCounted = attribute.NewSet(attribute.String("outcome", "counted"))
	spansIgnored = attribute.NewSet(attribute.String("outcome", "ignored"))
	pointsSent   = attribute.NewSet(attribute.String("outcome", "sent"))
	pointsRetry  = attribute.NewSet(attribute.String("outcome", "retried"))
	pointsDrop   = attribute.NewSet(attribute.String("outcome", "dropped"))

	eventsCounted    = attribute.NewSet(attribute.String("outcome", "counted"))
	eventsNotCounted = attribute.NewSet(attribute.String("outcome", "not_counted"))
	eventsOverflow   = attribute.NewSet(attribute.String("outcome", "overflow"))
)

func (r *gatewayReceiver) flushLoop() {
	defer close(r.flushDone)
	t := time.NewTicker(r.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-r.stopFlush:
			return
		case <-t.C:
			r.flush(context.Background())
		}
	}
}

// flush emits the window that just ended, in chunks (emitChunk). On a
// retryable downstream error the whole window goes back into the aggregator
// (the chunks already accepted too) and keeps its start, so the next flush
// resends it, with the counts since, under the same start: the cumulative
// processor takes a window resent with the same start as a replacement of
// the one it accepted, so nothing is counted twice through it. A permanent
// error drops the chunks not yet accepted (counted in
// otelcol_receiver_gateway_flushed_points).
func (r *gatewayReceiver) flush(ctx context.Context) {
	if r.next == nil {
		return
	}
	items, buckets := r.agg.take()
	if len(items) == 0 {
		// Nothing happened: the next point's window still starts at
		// windowStart, which is correct for a delta covering the quiet time.
		return
	}
	now := pcommon.NewTimestampFromTime(time.Now())
	if r.coldStart {
		// The first window since a start that carried none over begins
		// just before it ends. Its points start every stream the
		// processor makes in this process, and that start is their
		// created time downstream (OpenMetrics _created, protobuf
		// created_timestamp). A pull exporter serves them only from this
		// flush on, and after a restart without storage Prometheus has
		// marked their series stale at a scrape made before it; with
		// created-timestamp zero ingestion it refuses a zero sample dated
		// before that marker (out of order), and a counter that came back
		// higher than it was then shows no reset at all: under
		// Prometheus 3.16, resets() found 0 of 12 and increase() read 96
		// of 156. Dated after the marker, the zero sample is taken. The
		// counts are the same; only the first window's requests are dated
		// at its end. Set before emitting, so a window resent after a
		// retryable error keeps it.
		r.windowStart = now - 1
		r.coldStart = false
	}
	sent, err := r.emit(ctx, items, buckets, r.windowStart, now, false)
	n := int64(len(items))
	switch {
	case err == nil || consumererror.IsPermanent(err):
		// The window is over: what was accepted (all of it without an
		// error) is sent and checkpointed, the rest dropped.
		start := r.windowStart
		r.windowStart = now
		if sent > 0 {
			r.telemetry.ReceiverGatewayFlushedPoints.Add(ctx, int64(sent), metric.WithAttributeSet(pointsSent))
			r.saveCheckpoint(ctx, items[:sent], buckets, start, now)
		}
		if err != nil {
			r.telemetry.ReceiverGatewayFlushedPoints.Add(ctx, n-int64(sent), metric.WithAttributeSet(pointsDrop))
			r.settings.Logger.Error("Dropping gateway metrics refused downstream", zap.Int64("points", n-int64(sent)), zap.Error(err))
		}
	default:
		r.agg.merge(items, buckets)
		r.telemetry.ReceiverGatewayFlushedPoints.Add(ctx, n, metric.WithAttributeSet(pointsRetry))
		r.settings.Logger.Warn("Downstream refused gateway metrics; keeping them for the next flush", zap.Int64("points", n), zap.Error(err))
	}
}

// emitChunk is the most points one ConsumeMetrics carries. A window of
// 10k routes is tens of thousands of points: as one pdata.Metrics it is
// ~14 MB built at once and alive until the pipeline returns, and a GC that
// marks meanwhile sets the next heap goal twice that higher (the
// collector's RSS follows the goal). In chunks of 512 (~0.3 MB of pdata)
// the window's pdata never outweighs the series state: in bench/distribution
// (22k series) the live heap a GC found during a flush went from ~53 MB
// (one batch) to ~45 (chunks of 2,048) to ~42 (512). 512 histogram points
// are still ~9k samples, a full remote-write request.
const emitChunk = 512

// emit hands points (one window, start to end) downstream in chunks of
// emitChunk, marked as a replay when replay is set, and returns how many
// were accepted before the first error.
func (r *gatewayReceiver) emit(ctx context.Context, points []point, buckets []uint64, start, end pcommon.Timestamp, replay bool) (int, error) {
	for sent := 0; sent < len(points); {
		chunk := points[sent:min(sent+emitChunk, len(points))]
		md := r.agg.toMetrics(chunk, buckets, start, end)
		if replay {
			markReplay(md)
		}
		if err := r.next.ConsumeMetrics(ctx, md); err != nil {
			return sent, err
		}
		sent += len(chunk)
	}
	return len(points), nil
}
