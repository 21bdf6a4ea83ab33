package cumulativeprocessor

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelgateway/otelgateway/processor/cumulativeprocessor/internal/metadata"
)

// TestEmitInterval runs on a fake clock: delta points are consumed, every
// tick emits one cumulative point per stream touched since the last tick,
// an idle tick emits nothing, and shutdown flushes what is pending.
func TestEmitInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := createDefaultConfig()
		cfg.Emit, cfg.Interval = EmitInterval, 10*time.Second
		sink := new(consumertest.MetricsSink)
		proc, err := NewFactory().CreateMetrics(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, sink)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := proc.Start(ctx, componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
		for _, md := range []struct{ pts []point }{
			{[]point{{"kong", "/a", 10, 20, 1}, {"kong", "/b", 10, 20, 5}}},
			{[]point{{"kong", "/a", 20, 30, 2}}},
		} {
			if err := proc.ConsumeMetrics(ctx, batch(md.pts...)); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(sink.AllMetrics()); n != 0 {
			t.Fatalf("%d batches before the first tick, want 0", n)
		}

		time.Sleep(10 * time.Second) // fake time: exactly one tick
		synctest.Wait()
		if n := len(sink.AllMetrics()); n != 1 {
			t.Fatalf("%d batches after one tick, want 1", n)
		}
		// Streams leave shard by shard: their order is not part of the contract.
		got := emitted(t, sink.AllMetrics()[0])
		slices.Sort(got)
		assertEmitted(t, got, "kong /a 10 30 3", "kong /b 10 20 5")

		time.Sleep(10 * time.Second) // an idle tick
		synctest.Wait()
		if n := len(sink.AllMetrics()); n != 1 {
			t.Fatalf("%d batches after an idle tick, want still 1", n)
		}

		if err := proc.ConsumeMetrics(ctx, batch(point{"kong", "/b", 20, 40, 1})); err != nil {
			t.Fatal(err)
		}
		if err := proc.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if n := len(sink.AllMetrics()); n != 2 {
			t.Fatalf("%d batches after shutdown, want 2", n)
		}
		assertEmitted(t, emitted(t, sink.AllMetrics()[1]), "kong /b 10 40 6")
	})
}

// TestEmitIntervalPassesOtherMetricsThrough: in interval mode a batch that
// mixes delta and gauge metrics forwards the gauges at once.
func TestEmitIntervalPassesOtherMetricsThrough(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.Emit, cfg.Interval = EmitInterval, time.Hour
	p, _ := newTestProcessorWith(t, cfg, consumertest.NewNop())
	md := batch(point{"kong", "/a", 10, 20, 1})
	g := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().AppendEmpty()
	g.SetName("up")
	g.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(1)
	out, err := p.processMetrics(context.Background(), md)
	if err != nil {
		t.Fatal(err)
	}
	ms := out.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	if ms.Len() != 1 || ms.At(0).Name() != "up" {
		t.Fatalf("forwarded %d metrics (first %q), want only the gauge", ms.Len(), ms.At(0).Name())
	}
}
