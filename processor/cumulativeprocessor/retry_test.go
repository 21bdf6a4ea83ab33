package cumulativeprocessor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/processor/cumulativeprocessor/internal/metadata"
)

// The receiver's retry: window [s, t1] with v1 is accumulated and forwarded;
// a downstream consumer fails retryably, so the receiver keeps v1 and sends
// [s, t2] with v1+v2 at its next flush. The cumulative value must be
// before + v1 + v2: not before + v1 (the resend dropped) and not
// before + 2·v1 + v2 (added twice).
func TestResentSumWindowReplacesTheLastOne(t *testing.T) {
	p, tel := newTestProcessor(t)
	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 5, 10, 100})), "kong /a 5 10 100")
	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 10, 20, 3})), "kong /a 5 20 103")
	// Downstream failed: resent with the new counts merged in.
	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 10, 30, 3 + 4})), "kong /a 5 30 107")
	// Failed again: resent again, from the same value before the window.
	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 10, 40, 3 + 4 + 5})), "kong /a 5 40 112")
	// An exact duplicate (same start and end): replaced, so idempotent.
	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 10, 40, 3 + 4 + 5})), "kong /a 5 40 112")
	// Delivered; the next window is contiguous again.
	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 40, 50, 1})), "kong /a 5 50 113")
	// The window before the last one is not the last one: dropped.
	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 10, 60, 1})))

	// A stream whose first window is resent starts again from the resend,
	// with the same start time.
	assertEmitted(t, process(t, p, batch(point{"kong", "/b", 10, 20, 3})), "kong /b 10 20 3")
	assertEmitted(t, process(t, p, batch(point{"kong", "/b", 10, 30, 7})), "kong /b 10 30 7")

	if n := testutil.Int64Sum(t, tel, "otelcol_processor_cumulative_points", attribute.String("reason", "replaced")); n != 4 {
		t.Errorf("replaced = %d, want 4", n)
	}
	if n := testutil.Int64Sum(t, tel, "otelcol_processor_cumulative_points", attribute.String("reason", "older_start")); n != 1 {
		t.Errorf("older_start = %d, want 1", n)
	}
}

func TestResentDoubleSumAndRestartedWindow(t *testing.T) {
	p, _ := newTestProcessor(t)
	double := func(start, end int64, v float64) pmetric.Metrics {
		md := batch(point{"kong", "/a", start, end, 0})
		md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0).SetDoubleValue(v)
		return md
	}
	value := func(md pmetric.Metrics) string {
		out, err := p.processMetrics(context.Background(), md)
		if err != nil {
			t.Fatal(err)
		}
		dp := out.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
		if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
			return fmt.Sprintf("%d int from %d", dp.IntValue(), dp.StartTimestamp()/1e9)
		}
		return fmt.Sprintf("%g double from %d", dp.DoubleValue(), dp.StartTimestamp()/1e9)
	}
	for _, step := range []struct {
		md   pmetric.Metrics
		want string
	}{
		{batch(point{"kong", "/a", 5, 10, 100}), "100 int from 5"},
		// The value type changes: the stream restarts from this window...
		{double(10, 20, 0.5), "0.5 double from 10"},
		// ...so its resend restarts it again, from the same start.
		{double(10, 30, 0.75), "0.75 double from 10"},
		{double(30, 40, 0.25), "1 double from 10"},
		{double(30, 50, 0.5), "1.25 double from 10"},
	} {
		if got := value(step.md); got != step.want {
			t.Errorf("got %s, want %s", got, step.want)
		}
	}
}

func TestResentHistogramWindowReplacesTheLastOne(t *testing.T) {
	p, _ := newTestProcessor(t)
	b := []float64{1, 5}
	withMinMax := func(md pmetric.Metrics, lo, hi float64) pmetric.Metrics {
		dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints().At(0)
		dp.SetMin(lo)
		dp.SetMax(hi)
		return md
	}
	minMax := func(md pmetric.Metrics) string {
		dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints().At(0)
		return fmt.Sprintf("min %g max %g", dp.Min(), dp.Max())
	}
	assertEmitted(t, histOut(t, p, withMinMax(histBatch(histPoint{5, 10, b, []uint64{1, 0, 0}, 0.5}), 0.5, 0.5)),
		"5 10 1 0.5 [1 5] [1 0 0]")
	md := withMinMax(histBatch(histPoint{10, 20, b, []uint64{0, 2, 0}, 6}), 0.1, 4)
	assertEmitted(t, histOut(t, p, md), "5 20 3 6.5 [1 5] [1 2 0]")
	if got := minMax(md); got != "min 0.1 max 4" {
		t.Errorf("window 2: %s", got)
	}
	// Resent with more counts: before (window 1) + the resend.
	md = withMinMax(histBatch(histPoint{10, 30, b, []uint64{0, 2, 1}, 16}), 2, 10)
	assertEmitted(t, histOut(t, p, md), "5 30 4 16.5 [1 5] [1 2 1]")
	// min and max are window 1's combined with the resend's: window 2's
	// 0.1 is replaced, not kept.
	if got := minMax(md); got != "min 0.5 max 10" {
		t.Errorf("after the resend: %s", got)
	}
	assertEmitted(t, histOut(t, p, histBatch(histPoint{10, 30, b, []uint64{0, 2, 1}, 16})), "5 30 4 16.5 [1 5] [1 2 1]")
	assertEmitted(t, histOut(t, p, histBatch(histPoint{30, 40, b, []uint64{1, 0, 0}, 0.5})), "5 40 5 17 [1 5] [2 2 1]")

	// A window that changed the bounds restarted the stream: its resend
	// restarts it again from the same start.
	nb := []float64{1, 5, 10}
	assertEmitted(t, histOut(t, p, histBatch(histPoint{40, 50, nb, []uint64{0, 0, 1, 0}, 7})), "40 50 1 7 [1 5 10] [0 0 1 0]")
	assertEmitted(t, histOut(t, p, histBatch(histPoint{40, 60, nb, []uint64{0, 0, 1, 1}, 19})), "40 60 2 19 [1 5 10] [0 0 1 1]")
	// An invalid resend is dropped and leaves the last window in place.
	assertEmitted(t, histOut(t, p, histBatch(histPoint{40, 70, nb, []uint64{1}, 1})))
	assertEmitted(t, histOut(t, p, histBatch(histPoint{60, 70, nb, []uint64{1, 0, 0, 0}, 0.5})), "40 70 3 19.5 [1 5 10] [1 0 1 1]")
}

func TestResentExponentialWindowReplacesTheLastOne(t *testing.T) {
	p := newExpProcessor(t, 4)
	if got := expOut(t, p, expBatch(expPoint{start: 5, end: 10, counts: []uint64{1, 1}})); got != "2 0 0 0 pos:0 [1 1] neg:0 []" {
		t.Fatalf("window 1: %s", got)
	}
	// Bucket 6 does not fit in 4 buckets at scale 0: the state downscales.
	if got := expOut(t, p, expBatch(expPoint{start: 10, end: 20, counts: []uint64{0, 0, 0, 0, 0, 0, 1}})); got != "3 -1 0 0 pos:0 [2 0 0 1] neg:0 []" {
		t.Fatalf("window 2: %s", got)
	}
	// The resend replaces window 2 entirely: back to window 1's scale-0
	// state, plus the resend.
	if got := expOut(t, p, expBatch(expPoint{start: 10, end: 30, counts: []uint64{0, 0, 1}, zero: 1})); got != "4 0 0 1 pos:0 [1 1 1] neg:0 []" {
		t.Errorf("after the resend: %s", got)
	}
	if got := expOut(t, p, expBatch(expPoint{start: 10, end: 30, counts: []uint64{0, 0, 1}, zero: 1})); got != "4 0 0 1 pos:0 [1 1 1] neg:0 []" {
		t.Errorf("after a duplicate: %s", got)
	}
	if got := expOut(t, p, expBatch(expPoint{start: 30, end: 40, counts: []uint64{1}})); got != "5 0 0 1 pos:0 [2 1 1] neg:0 []" {
		t.Errorf("next window: %s", got)
	}
	// The first window of a stream resent: starts again.
	p = newExpProcessor(t, 160)
	expOut(t, p, expBatch(expPoint{start: 5, end: 10, counts: []uint64{1, 1}}))
	if got := expOut(t, p, expBatch(expPoint{start: 5, end: 20, counts: []uint64{1, 1, 1}})); got != "3 0 0 0 pos:0 [1 1 1] neg:0 []" {
		t.Errorf("first window resent: %s", got)
	}
}

// fanout calls every consumer and joins their errors, like the collector's
// fanoutconsumer (internal to the collector, hence this copy): one failing
// exporter fails the whole call, and the error is permanent only when every
// failure is.
type fanout []consumer.Metrics

func (f fanout) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (f fanout) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	var errs error
	for _, c := range f {
		errs = errors.Join(errs, c.ConsumeMetrics(ctx, md))
	}
	return errs
}

// flaky fails its first `fails` calls with err (all of them when fails < 0).
type flaky struct {
	fails int64
	err   error
	calls atomic.Int64
}

func (f *flaky) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (f *flaky) ConsumeMetrics(context.Context, pmetric.Metrics) error {
	if n := f.calls.Add(1); f.fails < 0 || n <= f.fails {
		return f.err
	}
	return nil
}

// TestFanOutWithAFailingExporterServesEverything drives the processor, as
// built by its factory, with what the gateway receiver sends: one delta
// window per flush, every stream with the window's start; after a retryable
// error the counts are kept and resent, merged with the next ones, with the
// original start; after a permanent error they are dropped. The first
// consumer (promstream) must end with every count ever acknowledged.
func TestFanOutWithAFailingExporterServesEverything(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fails int64
		err   error
	}{
		{"retryable for 5 flushes", 5, errors.New("otlphttp: connection refused")},
		{"retryable for ever", -1, errors.New("otlphttp: connection refused")},
		{"permanent", -1, consumererror.NewPermanent(errors.New("otlphttp: 400 bad request"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tel := componenttest.NewTelemetry()
			defer func() { _ = tel.Shutdown(context.Background()) }()
			set := processortest.NewNopSettings(metadata.Type)
			set.TelemetrySettings = tel.NewTelemetrySettings()
			served := new(consumertest.MetricsSink)
			proc, err := NewFactory().CreateMetrics(context.Background(), set, createDefaultConfig(),
				fanout{served, &flaky{fails: tc.fails, err: tc.err}})
			if err != nil {
				t.Fatal(err)
			}
			if err := proc.Start(context.Background(), componenttest.NewNopHost()); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = proc.Shutdown(context.Background()) }()

			routes := []string{"/a", "/b", "/c"}
			acknowledged := map[string]int64{}
			pending := map[string]int64{} // the receiver's open window
			start := int64(100)
			for flush := range int64(12) {
				now := start + 10 + flush // the window always ends later
				// New traffic: /a every flush, /b on even ones, /c only
				// while the exporter is failing the first time.
				for i, r := range routes {
					if i == 1 && flush%2 == 1 || i == 2 && (flush < 2 || flush > 4) {
						continue
					}
					n := int64(10*(i+1)) + flush
					pending[r] += n
					acknowledged[r] += n
				}
				var pts []point
				for _, r := range routes {
					if v, ok := pending[r]; ok {
						pts = append(pts, point{"kong", r, start, now, v})
					}
				}
				err := proc.ConsumeMetrics(context.Background(), batch(pts...))
				if err == nil || consumererror.IsPermanent(err) {
					clear(pending) // sent, or refused for good
					start = now
				}
			}

			last := map[string]int64{}
			for _, md := range served.AllMetrics() {
				for _, s := range emitted(t, md) {
					f := strings.Fields(s)
					v, _ := strconv.ParseInt(f[4], 10, 64)
					last[f[1]] = v // in order: the last one served
				}
			}
			for _, r := range routes {
				if last[r] != acknowledged[r] {
					t.Errorf("%s: served %d, acknowledged %d", r, last[r], acknowledged[r])
				}
			}
		})
	}
}
