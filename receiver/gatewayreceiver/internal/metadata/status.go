// Written by hand, in the shape mdatagen would generate from
// ../../metadata.yaml (mdatagen is not available here); metadata_test.go
// checks it against that file.

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
