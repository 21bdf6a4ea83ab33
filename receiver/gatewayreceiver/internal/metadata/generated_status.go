// Written by hand in the style of mdatagen's output (mdatagen is not served
// here); keep it in step with ../../metadata.yaml.

// Package metadata contains the telemetry and build information for the
// receiver/gateway component.
package metadata // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
)

var (
	Type      = component.MustNewType("gateway")
	ScopeName = "github.com/otelgateway/otelgateway/receiver/gatewayreceiver"
)

const (
	MetricsStability = component.StabilityLevelDevelopment
	TracesStability  = component.StabilityLevelDevelopment
)
