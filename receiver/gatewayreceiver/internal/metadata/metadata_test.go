package metadata

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.uber.org/goleak"

	"github.com/otelgateway/otelgateway/internal/metadatacheck"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestMetadataYAML holds status.go and telemetry.go to ../../metadata.yaml:
// type, class and stability, and every instrument as the SDK registers it.
func TestMetadataYAML(t *testing.T) {
	md := metadatacheck.Read(t, "../../metadata.yaml")
	metadatacheck.Status(t, md, Type, "receiver", map[string]component.StabilityLevel{"metrics": MetricsStability, "traces": TracesStability})

	tel := componenttest.NewTelemetry()
	defer func() { _ = tel.Shutdown(context.Background()) }()
	tb, err := NewTelemetryBuilder(tel.NewTelemetrySettings())
	if err != nil {
		t.Fatal(err)
	}
	metadatacheck.Telemetry(t, md, tel, tb)
}
