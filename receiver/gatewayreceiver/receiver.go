// Package gatewayreceiver is the `gateway` receiver: it turns the spans,
// access logs and upstream health that API gateways already emit into
// request, latency, bandwidth and health metrics (README.md). This package
// is the factory, the configuration, the lifecycle and the transports;
// gateways live in internal/gateway (one home each, one registry), the
// traffic path from events to metrics in internal/traffic (its doc.go walks
// one span from the wire to a pdata point), upstream health in
// internal/health, admission in internal/admission.
package gatewayreceiver // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver"

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"

	"github.com/otelgateway/otelgateway/internal/rename"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/admission"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/health"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/traffic"
)

// gatewayReceiver is the receiver's lifecycle: it builds its parts, starts
// them in order and stops them in reverse.
//
//   - the transports (http.go, http_logs.go, http_metrics.go, grpc.go,
//     grpc_metrics.go), thin shells that admit and read a request, call
//     ingest and answer;
//   - pushed (metrics_push.go): the gateways' own pushed metrics, mapped by
//     their gateway's home and handed on as they are, and the Kong claims
//     the span and log paths are checked against;
//   - ingest (ingest.go, request.go): the transport-agnostic core, which
//     turns spans and log entries into events and adds them to traffic
//     (internal/traffic, the aggregator);
//   - flusher (flush.go, checkpoint.go): every flush_interval it takes the
//     window out of traffic and hands it downstream as delta metrics, and
//     into the checkpoint;
//   - health (internal/health): upstream health, polled and pushed (its
//     push handler is served by the HTTP transport).
type gatewayReceiver struct {
	cfg       *Config
	settings  receiver.Settings
	telemetry *metadata.TelemetryBuilder
	next      consumer.Metrics // nil when only in a traces pipeline

	ingest  *ingest
	flusher *flusher
	http    *httpServer // nil when protocols.http is off
	grpc    *grpcServer // nil when protocols.grpc is off
	// health is the upstream-health part; nil when the health section is
	// absent.
	health *health.Health
	// servers are the goroutines of the servers (accept loops, the gRPC
	// reaper), waited for at Shutdown.
	servers sync.WaitGroup
	// collector is the label naming the collector on every point, traffic
	// and health.
	collector health.Identity
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
	agg := traffic.New(traffic.Settings{
		Profile: cfg.Profile, DurationBounds: cfg.durationBounds(), ExpoSize: cfg.expoSize(), DisabledMetrics: cfg.disabledMetrics(),
		Dimensions: dims, Limits: cfg.limits(), Exemplars: cfg.Exemplars.Enabled, Collector: traffic.Label(id), NodeLabel: cfg.NodeLabel,
	})
	r := &gatewayReceiver{
		cfg:       cfg,
		settings:  set,
		telemetry: tb,
		collector: id,
		folds:     newFolds(cfg, set.Logger),
		ingest: &ingest{
			traffic: agg, telemetry: tb, rates: cfg.samplingRates(),
			admit:  admission.New(cfg.Limits.MaxRequestBytesInFlight, cfg.Limits.AdmissionQueueSize, cfg.Limits.AdmissionQueueTimeout),
			detect: cfg.detect(), spanKeys: dims.SpanKeys(), pushed: newPushed(cfg, tb),
		},
		flusher: &flusher{
			traffic: agg, telemetry: tb, logger: set.Logger, interval: cfg.FlushInterval,
			id: set.ID, storage: cfg.Storage, replay: cfg.CheckpointReplay,
		},
	}
	r.ingest.scratch.New = r.ingest.newScratch
	r.ingest.folds = &r.folds
	if hc := cfg.Protocols.HTTP.Get(); hc != nil {
		r.http = &httpServer{cfg: hc, ingest: r.ingest, telemetry: tb}
	}
	if gc := cfg.Protocols.GRPC.Get(); gc != nil {
		r.grpc = &grpcServer{cfg: gc, ingest: r.ingest, telemetry: tb, logger: set.Logger, receiveTimeout: cfg.GRPCReceiveTimeout,
			receiving: admission.NewReceiving(receivingSlots(cfg), receivingSlots(cfg)/connShareDiv, cfg.GRPCReceiveTimeout)}
	}
	r.useMetrics(next)
	return r, nil
}

// useMetrics makes next the receiver's metrics consumer (nil: none).
func (r *gatewayReceiver) useMetrics(next consumer.Metrics) {
	r.next = next
	r.ingest.metrics = next != nil
	r.ingest.pushed.next = next
	r.flusher.next = next
}

// useTraces makes next the consumer of the spans received (nil: none).
func (r *gatewayReceiver) useTraces(next consumer.Traces) {
	r.ingest.nextTraces = next
}

// Start starts the flush loop (after restoring the checkpoint), health and
// the servers. A failed start shuts down whatever did start.
func (r *gatewayReceiver) Start(ctx context.Context, host component.Host) error {
	if err := r.flusher.start(ctx, host); err != nil {
		return err
	}
	if err := r.startHealth(ctx, host); err != nil {
		return errors.Join(err, r.Shutdown(ctx))
	}
	if r.http != nil {
		var push http.Handler
		var pushPath string
		if r.health != nil {
			push, pushPath = r.health.PushHandler(), r.health.PushPath()
		}
		if err := r.http.start(ctx, host, r.settings, &r.servers, pushPath, push); err != nil {
			return errors.Join(err, r.Shutdown(ctx))
		}
	}
	if r.grpc != nil {
		if err := r.grpc.start(ctx, host, r.settings, &r.servers); err != nil {
			return errors.Join(err, r.Shutdown(ctx))
		}
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
		Config: r.cfg.healthConfig(), Naming: health.NamingOf(r.cfg.healthProfile()), Identity: r.collector, Next: r.next,
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

// serve runs a server's accept loop on a goroutine of servers and reports
// a fatal error to the host.
func serve(servers *sync.WaitGroup, logger *zap.Logger, host component.Host, name string, ln net.Listener, serve func(net.Listener) error, closed error) {
	logger.Info("Starting "+name+" server", zap.String("endpoint", ln.Addr().String()))
	servers.Add(1)
	go func() {
		defer servers.Done()
		if err := serve(ln); err != nil && !errors.Is(err, closed) {
			componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(err))
		}
	}()
}

// Shutdown stops the servers, then flushes what was counted so far, so a
// clean restart loses no requests.
func (r *gatewayReceiver) Shutdown(ctx context.Context) error {
	var errs error
	if r.http != nil {
		errs = errors.Join(errs, r.http.shutdown(ctx))
	}
	if r.grpc != nil {
		r.grpc.shutdown(ctx)
	}
	r.servers.Wait()
	if r.health != nil {
		errs = errors.Join(errs, r.health.Shutdown(ctx))
		r.health = nil
	}
	errs = errors.Join(errs, r.flusher.stop(ctx))
	r.folds.close()
	return errs
}
