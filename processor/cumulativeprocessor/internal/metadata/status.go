// Written by hand, in the shape mdatagen would generate from
// ../../metadata.yaml (mdatagen is not available here); metadata_test.go
// checks it against that file.

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
