package gatewayreceiver

import (
	"testing"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter"
	"github.com/otelgateway/otelgateway/processor/cumulativeprocessor"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/traffic"
)

// seedTargets is the seeds' gateway's upstream targets (10k upstreams, 20k
// targets): the polled health rows the defaults are sized for (a poll keeps
// every target its admin API reports; only pushed rows have a bound).
const seedTargets = 20_000

// With the defaults, what the receiver admits the cumulative processor and
// the promstream exporter hold, each bound in its own unit: the receiver's
// tuples (held ones, plus an overflow tuple per held gateway and one for
// the rest) become at most one stream per family of the profile with the
// most families, which limits.max_streams holds; the processor's streams
// (and its own overflow streams, one per metric), the health gauges (a
// series per state of every pushed target the bound allows and of the
// seeds' polled targets, and per state of every upstream), and target_info
// (one per gateway) fit in the exporter's limits.max_series.
func TestDefaultBoundsAgree(t *testing.T) {
	rc := createDefaultConfig()
	pc := cumulativeprocessor.NewFactory().CreateDefaultConfig().(*cumulativeprocessor.Config)
	ec := promstreamexporter.NewFactory().CreateDefaultConfig().(*promstreamexporter.Config)

	families, metrics := 0, 0
	for _, name := range traffic.ProfileNames() {
		families = max(families, traffic.Families(name, nil))
		metrics += len(traffic.MetricNames(name))
	}
	tuples := rc.Limits.MaxTuples + rc.Limits.MaxGateways + 1
	streams := tuples * families
	t.Logf("receiver: %d tuples at most (limits.max_tuples %d + max_gateways %d + 1) × %d families = %d streams; processor limits.max_streams %d",
		tuples, rc.Limits.MaxTuples, rc.Limits.MaxGateways, families, streams, pc.Limits.MaxStreams)
	if pc.Limits.MaxStreams < streams {
		t.Errorf("the processor's default limits.max_streams (%d) folds what the receiver's defaults admit (%d streams)", pc.Limits.MaxStreams, streams)
	}

	states := 0
	for _, g := range gateway.Gateways() {
		states = max(states, len(g.Kind().HealthStates()))
	}
	// A row's series per state, and its upstream's counts per state (at
	// most one upstream per row).
	health := (rc.Limits.MaxPushedTargets + seedTargets) * states * 2
	series := pc.Limits.MaxStreams + metrics + health + rc.Limits.MaxGateways + 1
	t.Logf("exporter: %d streams + %d overflow streams + %d health series ((%d pushed + %d polled targets) × %d states × 2) + %d target_info = %d; limits.max_series %d",
		pc.Limits.MaxStreams, metrics, health, rc.Limits.MaxPushedTargets, seedTargets, states, rc.Limits.MaxGateways+1, series, ec.Limits.MaxSeries)
	if ec.Limits.MaxSeries < int64(series) {
		t.Errorf("the exporter's default limits.max_series (%d) refuses what the processor and the health part emit by default (%d series)", ec.Limits.MaxSeries, series)
	}
}

// traffic's memory tests (TestSeedGatewayMemory) measure at the receiver's
// default limits, which they state: the defaults must be those.
func TestDefaultLimitsAreTraffics(t *testing.T) {
	want := traffic.Limits{MaxTuples: 100_000, MaxGateways: 1000, ExpiryWindows: 60, MaxLabelBytes: 256}
	if got := createDefaultConfig().limits(); got != want {
		t.Fatalf("default limits %+v, traffic's tests measure at %+v (internal/traffic/main_test.go defaultLimits)", got, want)
	}
}
