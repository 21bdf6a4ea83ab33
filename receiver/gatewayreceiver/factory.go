package gatewayreceiver // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver"

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
)

// NewFactory returns the factory of the gateway receiver (type "gateway").
func NewFactory() receiver.Factory {
	return receiver.NewFactory(
		metadata.Type,
		func() component.Config { return createDefaultConfig() },
		receiver.WithMetrics(createMetrics, metadata.MetricsStability),
		receiver.WithTraces(createTraces, metadata.TracesStability),
	)
}

// receivers shares one receiver (one set of servers) between the metrics
// and the traces pipeline of one configured `gateway` receiver, as
// otlpreceiver does: both pipelines are fed by the same listeners. Keyed by
// the *Config the collector hands both factories.
var receivers = struct {
	sync.Mutex
	m map[*Config]*shared
}{m: make(map[*Config]*shared)}

// shared starts the receiver with the first pipeline that starts it and
// stops it with the first that stops it, as the collector's own shared
// components do (internal/sharedcomponent). The collector starts every
// receiver after every other component, and stops a pipeline's receiver
// before the processors and exporters it feeds; but it orders the nodes of
// two pipelines as a topological sort over a map happens to (it varies
// from run to run), so the traces pipeline's node may be stopped after the
// metrics pipeline's exporters. Stopped with the last pipeline, the
// receiver then flushed its open window into an exporter already stopped:
// a SIGTERM without storage lost the window in 6 of 30 runs (promstream
// had stopped serving before the flush reached it).
type shared struct {
	r                *gatewayReceiver
	started, stopped bool
	startErr         error
}

func sharedReceiver(cfg *Config, set receiver.Settings) (*shared, error) {
	receivers.Lock()
	defer receivers.Unlock()
	if s, ok := receivers.m[cfg]; ok {
		return s, nil
	}
	r, err := newReceiver(cfg, set, nil)
	if err != nil {
		return nil, err
	}
	s := &shared{r: r}
	receivers.m[cfg] = s
	return s, nil
}

// Start starts the receiver once; every pipeline gets the first start's
// error.
func (s *shared) Start(ctx context.Context, host component.Host) error {
	receivers.Lock()
	defer receivers.Unlock()
	if !s.started {
		s.started = true
		s.startErr = s.r.Start(ctx, host)
	}
	return s.startErr
}

// Shutdown stops the receiver at the first pipeline's call, while what
// every pipeline feeds still runs: its final flush reaches them.
func (s *shared) Shutdown(ctx context.Context) error {
	receivers.Lock()
	defer receivers.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	if receivers.m[s.r.cfg] == s {
		delete(receivers.m, s.r.cfg)
	}
	return s.r.Shutdown(ctx)
}

func createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	s, err := sharedReceiver(cfg.(*Config), set)
	if err != nil {
		return nil, err
	}
	s.r.useMetrics(next)
	return s, nil
}

func createTraces(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Traces) (receiver.Traces, error) {
	s, err := sharedReceiver(cfg.(*Config), set)
	if err != nil {
		return nil, err
	}
	s.r.useTraces(next)
	return s, nil
}
