package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A gateway receiver with a health section listed only in a traces pipeline
// has nowhere to send its health gauges. The built collector must refuse to
// start with a message naming the fix, and must not panic (it did: a nil
// pointer dereference at start).
func TestHealthInTracesOnlyPipelineIsRefused(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 2)
	cfg := fmt.Sprintf(`receivers:
  gateway:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
      grpc:
        endpoint: 127.0.0.1:%d
    health:
      push: {}
exporters:
  debug:
    verbosity: basic
service:
  telemetry:
    metrics:
      level: none
    logs:
      level: info
  extensions: []
  pipelines:
    traces:
      receivers: [gateway]
      exporters: [debug]
`, ports[0], ports[1])
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, "otelcol", filepath.Join(dir, "otelcol.log"), otelcolBin, "--config", cfgPath)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the collector kept running with a health section in no metrics pipeline; log:\n%s", p.logTail(20))
	}
	log, err := os.ReadFile(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if p.waitErr == nil {
		t.Errorf("the collector exited 0; log:\n%s", log)
	}
	if strings.Contains(string(log), "panic") || strings.Contains(string(log), "nil pointer") {
		t.Errorf("the collector panicked:\n%s", log)
	}
	for _, want := range []string{"has a health section but is in no metrics pipeline", "service::pipelines::metrics::receivers"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("the log does not say %q:\n%s", want, log)
		}
	}
}
