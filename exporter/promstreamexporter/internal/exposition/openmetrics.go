package exposition

import "github.com/prometheus/common/expfmt"

// openMetricsBody is OpenMetrics' text: its own headers (`_total` trimmed,
// unknown for untyped), canonical bounds, `_created` samples, exemplars,
// timestamps in seconds, and `# EOF` at the end.
var openMetricsBody = Body{Header: AppendOpenMetricsHeader, Trailer: OpenMetricsEOF, CanonicalBounds: true, Created: true, TimestampSeconds: true, Exemplars: true}

var (
	// FormatOpenMetrics100 is OpenMetrics 1.0.0.
	FormatOpenMetrics100 = Register(Spec{
		Name:        "openmetrics_1.0.0",
		MediaType:   expfmt.FmtOpenMetrics_1_0_0,
		Preference:  20,
		UTF8:        true,
		OpenMetrics: true,
		Body:        openMetricsBody,
	})
	// FormatOpenMetrics001 is OpenMetrics 0.0.1: the same body as 1.0.0.
	FormatOpenMetrics001 = Register(Spec{
		Name:        "openmetrics_0.0.1",
		MediaType:   expfmt.FmtOpenMetrics_0_0_1,
		Preference:  30,
		UTF8:        true,
		OpenMetrics: true,
		Body:        openMetricsBody,
	})
)
