package health

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// The health gauges of each naming profile (the receiver's `profile`, or
// health.profile): otel's semantic-convention-style names, and the names
// Kong's and APISIX's Prometheus plugins print, so their dashboards keep
// working.

// Profile names, as ProfileNames lists them.
const (
	ProfileOTel   Profile = "otel"
	ProfileKong   Profile = "kong"
	ProfileAPISIX Profile = "apisix"
)

// namings are the profiles' namings, the default first.
var namings = []struct {
	profile Profile
	naming  *Naming
}{{ProfileOTel, &otelHealth}, {ProfileKong, &kongHealth}, {ProfileAPISIX, &apisixHealth}}

// NamingOf is the naming of profile p (the default's for an unknown name,
// which validation refuses first).
func NamingOf(p Profile) *Naming {
	for _, n := range namings {
		if n.profile == p {
			return n.naming
		}
	}
	return namings[0].naming
}

// otel health: a one-hot gauge per (upstream, target, address) over the
// states of the gateway's kind, and per-upstream counts by state.
var otelHealth = Naming{
	Target: Metric{Name: "gateway.upstream.target.health",
		Desc: "1 for the state an upstream target's address is in, 0 for the other states of its gateway."},
	WriteTarget: func(dps pmetric.NumberDataPointSlice, r *Row, ts pcommon.Timestamp) {
		for _, s := range r.States() {
			a := Point(dps, ts, r.Removed, OneHot(r.State, s), 4)
			a.PutStr("gateway.upstream.name", r.Upstream())
			a.PutStr("gateway.target", r.Target())
			a.PutStr("gateway.target.address", r.Address())
			a.PutStr("state", s.String())
		}
	},
	Upstream: &Metric{Name: "gateway.upstream.targets", Unit: "{target}", Desc: "Upstream target addresses by state."},
	WriteUpstream: func(dps pmetric.NumberDataPointSlice, u *UpstreamRow, ts pcommon.Timestamp) {
		for _, s := range u.States() {
			a := Point(dps, ts, u.Removed, u.Counts[s], 2)
			a.PutStr("gateway.upstream.name", u.Name())
			a.PutStr("state", s.String())
		}
	},
}

// kongPrintedStates are the four series Kong prints per target, in its order.
var kongPrintedStates = [...]gateway.HealthState{gateway.HealthChecksOff, gateway.HealthHealthy, gateway.HealthUnhealthy, gateway.HealthDNSError}

// kong health: kong_upstream_target_health{upstream,target,address,state,subsystem}
// as Kong's Prometheus plugin prints it (docs/gateways.md §1c).
var kongHealth = Naming{
	Target: Metric{Name: gateway.KongFamilies[gateway.KongUpstreamTargetHealth].Name,
		Desc: gateway.KongFamilies[gateway.KongUpstreamTargetHealth].Help},
	WriteTarget: func(dps pmetric.NumberDataPointSlice, r *Row, ts pcommon.Timestamp) {
		for _, s := range kongPrintedStates {
			a := Point(dps, ts, r.Removed, OneHot(r.State, s), 5)
			a.PutStr("upstream", r.Upstream())
			a.PutStr("target", r.Target())
			a.PutStr("address", r.Address())
			a.PutStr("state", s.String())
			a.PutStr("subsystem", "http")
		}
	},
}

// apisix health: apisix_upstream_status{name,ip,port}, 1 for healthy and
// mostly_healthy (docs/gateways.md §2c).
var apisixHealth = Naming{
	Target: Metric{Name: "apisix_upstream_status", Desc: "Upstream status from health check"},
	WriteTarget: func(dps pmetric.NumberDataPointSlice, r *Row, ts pcommon.Timestamp) {
		var v int64
		if r.State == gateway.HealthHealthy || r.State == gateway.HealthMostlyHealthy {
			v = 1
		}
		a := Point(dps, ts, r.Removed, v, 3)
		a.PutStr("name", r.Upstream())
		a.PutStr("ip", r.IP())
		a.PutStr("port", r.Port())
	},
}
