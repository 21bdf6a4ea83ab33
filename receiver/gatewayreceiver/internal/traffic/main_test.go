package traffic

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// defaultMaxLabelBytes is the receiver's default max_label_value_length.
const defaultMaxLabelBytes = 256

// defaultExpoMaxSize is the receiver's default histogram.exponential.max_size.
const defaultExpoMaxSize = 160

// defaultMaxGateways is the receiver's default limits.max_gateways.
const defaultMaxGateways = 1000

// defaultLimits are the receiver's default limits: limits.max_tuples,
// limits.max_gateways, limits.max_label_value_length, and tuple_expiry (5m)
// in flush windows (5s). The receiver's TestDefaultLimitsAreTraffics holds
// them to its defaults.
var defaultLimits = Limits{MaxTuples: 100_000, MaxGateways: defaultMaxGateways, ExpiryWindows: 60, MaxLabelBytes: defaultMaxLabelBytes}

// testAggregator is an aggregator of prof with exemplars on (the receiver's
// default) under lim.
func testAggregator(prof *profile, lim Limits) *Aggregator {
	return newAggregator(prof, Settings{Limits: lim, Exemplars: true})
}

// otelEvent is a request of gateway gw on route.
func otelEvent(gw, route string) gateway.Event {
	var e gateway.Event
	e.Reset()
	e.Kind, e.Gateway, e.Route, e.Method, e.StatusCode, e.TotalMS = gateway.KindSemconv, gw, route, "GET", 200, 3
	return e
}

// requestsByTuple sums the window's request points by (gateway, route,
// overflow).
func requestsByTuple(w *Window) map[string]int64 {
	out := map[string]int64{}
	for _, p := range w.points {
		if p.fam != 0 {
			continue
		}
		t := p.tuple()
		k := t.gateway + " " + t.route
		if t.overflow {
			k = t.gateway + " overflow"
		}
		out[k] += int64(p.total)
	}
	return out
}
