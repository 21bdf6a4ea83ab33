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

// shared counts the pipelines that started the receiver, so it starts with
// the first and stops with the last.
type shared struct {
	r       *gatewayReceiver
	started int
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

func (s *shared) Start(ctx context.Context, host component.Host) error {
	receivers.Lock()
	defer receivers.Unlock()
	s.started++
	if s.started > 1 {
		return nil
	}
	return s.r.Start(ctx, host)
}

func (s *shared) Shutdown(ctx context.Context) error {
	receivers.Lock()
	defer receivers.Unlock()
	if s.started > 1 {
		s.started--
		return nil
	}
	s.started = 0
	delete(receivers.m, s.r.cfg)
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
