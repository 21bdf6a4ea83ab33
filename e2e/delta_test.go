package e2e

// Delta to cumulative end to end: the OpenTelemetry Go SDK exports counters
// with delta temporality over OTLP/HTTP into the distribution's standard otlp
// receiver; the cumulative processor sums them; promstream serves them; a
// real Prometheus must store the exact running totals.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
)

// deltaMetric is the counter "e2e.delta.requests" ({request}) as Prometheus
// names it.
const deltaMetric = "e2e_delta_requests_total"

// TestDeltaSumsBecomeExactCumulativeTotals sends three delta exports and
// checks Prometheus after each: the totals are the sums of every delta, a
// route missing from a later export keeps its total, and an export without
// new recordings changes nothing.
func TestDeltaSumsBecomeExactCumulativeTotals(t *testing.T) {
	col := startCollectorOTLP(t)
	prom := startPrometheus(t, col.promAddr)
	ctx := context.Background()

	exp, err := otlpmetrichttp.New(ctx,
		otlpmetrichttp.WithEndpoint(col.otlpHTTPAddr),
		otlpmetrichttp.WithInsecure(),
		otlpmetrichttp.WithTemporalitySelector(func(sdkmetric.InstrumentKind) metricdata.Temporality {
			return metricdata.DeltaTemporality
		}))
	if err != nil {
		t.Fatalf("OTLP metric exporter: %v", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "delta-e2e"), attribute.String("service.instance.id", "node-1"))
	// A reader that never fires on its own: each ForceFlush is one export,
	// one delta per stream recorded since the previous one.
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(1<<40))))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	counter, err := mp.Meter("e2e-delta").Int64Counter("e2e.delta.requests", metric.WithUnit("{request}"))
	if err != nil {
		t.Fatal(err)
	}
	add := func(route string, n int64) {
		counter.Add(ctx, n, metric.WithAttributes(attribute.String("http.route", route)))
	}
	flush := func() {
		t.Helper()
		if err := mp.ForceFlush(ctx); err != nil {
			t.Fatalf("export: %v", err)
		}
	}

	add("/a", 3)
	add("/b", 5)
	flush()
	waitRouteTotals(t, prom, map[string]float64{"/a": 3, "/b": 5})

	add("/a", 4) // /b gets nothing: the SDK leaves it out of this delta
	add("/c", 2)
	add("/a", 1)
	flush()
	waitRouteTotals(t, prom, map[string]float64{"/a": 8, "/b": 5, "/c": 2})

	flush() // nothing recorded: an empty delta
	add("/b", 10)
	flush()
	waitRouteTotals(t, prom, map[string]float64{"/a": 8, "/b": 15, "/c": 2})
}

// waitRouteTotals polls Prometheus until deltaMetric has exactly one series
// per route in want, each with its value, all carrying the SDK's resource as
// job and instance.
func waitRouteTotals(t *testing.T, p *promServer, want map[string]float64) {
	t.Helper()
	eventually(t, convergeTimeout, "Prometheus to store the cumulative totals "+fmt.Sprint(want), func() (bool, string) {
		v, err := promQuery(p, deltaMetric)
		if err != nil {
			return false, err.Error()
		}
		got := map[string]float64{}
		var problems []string
		for _, s := range v {
			route := string(s.Metric["http_route"])
			if _, dup := got[route]; dup {
				problems = append(problems, "two series for route "+route)
			}
			if s.Metric["job"] != "delta-e2e" || s.Metric["instance"] != "node-1" {
				problems = append(problems, fmt.Sprintf("route %s has job=%q instance=%q", route, s.Metric["job"], s.Metric["instance"]))
			}
			got[route] = float64(s.Value)
		}
		for r, w := range want {
			if got[r] != w {
				problems = append(problems, fmt.Sprintf("route %s = %v, want %v", r, got[r], w))
			}
		}
		if len(got) != len(want) {
			problems = append(problems, fmt.Sprintf("%d series, want %d: %v", len(got), len(want), got))
		}
		sort.Strings(problems)
		return len(problems) == 0, strings.Join(problems, "\n")
	})
}
