package scale

import (
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// flushedPoints is the receiver's otelcol_receiver_gateway_flushed_points
// {outcome=sent}.
func flushedPoints(tel *componenttest.Telemetry) int64 {
	m, err := tel.GetMetric("otelcol_receiver_gateway_flushed_points")
	if err != nil {
		return 0 // nothing flushed yet
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		return 0
	}
	var n int64
	for _, dp := range sum.DataPoints {
		if o, _ := dp.Attributes.Value("outcome"); o.AsString() == "sent" {
			n += dp.Value
		}
	}
	return n
}
