// Written by hand in the style of mdatagen's output (mdatagen is not served
// here); keep it in step with ../../metadata.yaml.

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
