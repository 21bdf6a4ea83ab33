// Written by hand, in the shape mdatagen would generate from
// ../../metadata.yaml (mdatagen is not available here); metadata_test.go
// checks it against that file.

// Package metadata contains the telemetry and build information for the
// exporter/promstream component.
package metadata // import "github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
)

var (
	Type      = component.MustNewType("promstream")
	ScopeName = "github.com/otelgateway/otelgateway/exporter/promstreamexporter"
)

const (
	MetricsStability = component.StabilityLevelDevelopment
)
