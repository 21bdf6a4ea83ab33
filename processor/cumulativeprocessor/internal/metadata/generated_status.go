// Written by hand in the style of mdatagen's output (mdatagen is not served
// here); keep it in step with ../../metadata.yaml.

// Package metadata contains the telemetry and build information for the
// processor/cumulative component.
package metadata // import "github.com/otelgateway/otelgateway/processor/cumulativeprocessor/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
)

var (
	Type      = component.MustNewType("cumulative")
	ScopeName = "github.com/otelgateway/otelgateway/processor/cumulativeprocessor"
)

const (
	MetricsStability = component.StabilityLevelDevelopment
)
