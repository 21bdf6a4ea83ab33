// Package cumulativeprocessor is the `cumulative` processor: it turns delta
// sums and histograms (explicit and exponential) into cumulative ones, one
// state per stream, so delta sources such as the gateway receiver can be
// scraped by Prometheus (README.md). Streams are found through the shared
// series identity (internal/identity), bounded by max_streams, expired when
// stale, and checkpointed through a storage extension when one is set.
package cumulativeprocessor // import "github.com/otelgateway/otelgateway/processor/cumulativeprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/otelgateway/otelgateway/processor/cumulativeprocessor/internal/metadata"
)

// NewFactory returns the factory of the cumulative processor (type
// "cumulative").
func NewFactory() processor.Factory {
	return processor.NewFactory(
		metadata.Type,
		func() component.Config { return createDefaultConfig() },
		processor.WithMetrics(createMetrics, metadata.MetricsStability),
	)
}

func createMetrics(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	p, err := newProcessor(cfg.(*Config), set, next)
	if err != nil {
		return nil, err
	}
	return processorhelper.NewMetrics(ctx, set, cfg, next, p.processMetrics,
		processorhelper.WithStart(p.start),
		processorhelper.WithShutdown(p.shutdown),
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}))
}
