package promstreamexporter // import "github.com/otelgateway/otelgateway/exporter/promstreamexporter"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/metadata"
)

// NewFactory returns the factory of the promstream exporter (type
// "promstream").
func NewFactory() exporter.Factory {
	return exporter.NewFactory(
		metadata.Type,
		func() component.Config { return createDefaultConfig() },
		exporter.WithMetrics(createMetrics, metadata.MetricsStability),
	)
}

func createMetrics(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
	e, err := newExporter(cfg.(*Config), set)
	if err != nil {
		return nil, err
	}
	// No queue and no retry: storing a point is a memory write that cannot
	// fail transiently, and a queue would only delay what scrapes see.
	return exporterhelper.NewMetrics(ctx, set, cfg, e.consumeMetrics,
		exporterhelper.WithStart(e.start),
		exporterhelper.WithShutdown(e.shutdown),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}))
}
