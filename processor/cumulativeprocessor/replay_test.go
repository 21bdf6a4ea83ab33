package cumulativeprocessor

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelgateway/otelgateway/internal/testutil"
)

// replay marks a batch as the gateway receiver marks the windows it replays
// from its checkpoint.
func replay(md pmetric.Metrics) pmetric.Metrics {
	md.ResourceMetrics().At(0).ScopeMetrics().At(0).Scope().Attributes().PutBool(replayScopeAttr, true)
	return md
}

// The gateway receiver's replay after a crash: windows this processor
// already counted come back marked. The older ones are skipped and counted
// as replayed (not dropped: no alert fires on a restart), the last one
// replaces itself, a window it lacked is accumulated, and the mark never
// reaches a stream's identity or the output.
func TestReplayedWindowsAreCountedOnce(t *testing.T) {
	p, tel := newTestProcessor(t)
	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 5, 10, 100})), "kong /a 5 10 100")
	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 10, 20, 3})), "kong /a 5 20 103")
	// Replay of both windows and one the processor never saw (its
	// checkpoint predates it).
	assertEmitted(t, process(t, p, replay(batch(point{"kong", "/a", 5, 10, 100}))))
	assertEmitted(t, process(t, p, replay(batch(point{"kong", "/a", 10, 20, 3}))), "kong /a 5 20 103")
	out, err := p.processMetrics(context.Background(), replay(batch(point{"kong", "/a", 20, 30, 4})))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out.ResourceMetrics().At(0).ScopeMetrics().At(0).Scope().Attributes().Get(replayScopeAttr); ok {
		t.Error("the replay mark left the processor")
	}
	assertEmitted(t, emitted(t, out), "kong /a 5 30 107")
	// The open window after the restart continues the same stream.
	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 30, 40, 1})), "kong /a 5 40 108")

	if n := testutil.Int64Sum(t, tel, "otelcol_processor_cumulative_points", attribute.String("outcome", "replayed")); n != 1 {
		t.Errorf("replayed = %d, want 1", n)
	}
	if n := testutil.Int64Sum(t, tel, "otelcol_processor_cumulative_points", attribute.String("outcome", "dropped")); n != 0 {
		t.Errorf("dropped = %d, want 0", n)
	}
}
