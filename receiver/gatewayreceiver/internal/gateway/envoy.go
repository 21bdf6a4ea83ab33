package gateway

import (
	"context"
	"strings"
)

// Envoy's home: span detection and mapping (docs/gateways.md §3b), upstream
// health (envoy_health.go; §3a), the admin API poller below and the stats
// sink's pushed metrics (envoy_metrics.go; §3c, §3d). Envoy has no
// access-log ingest path here.

// Envoy's span tags (§3b): every value a string.
const (
	envoyCluster     = "upstream_cluster"
	envoyAddress     = "upstream_address"
	envoyFlags       = "response_flags"
	envoyReqSize     = "request_size"
	envoyRespSize    = "response_size"
	envoyComponent   = "component"
	envoyRouterStart = "router "
	// envoyClustersPath is the admin cluster status in proto3 JSON (§3a).
	envoyClustersPath = "/clusters?format=json"
)

var envoyGateway = Gateway{
	Name:         "envoy",
	Detect:       isEnvoySpan,
	MapRoot:      mapEnvoyRoot,
	MapChild:     envoyRouter,
	HealthStates: []HealthState{HealthHealthy, HealthDegraded, HealthUnhealthy, HealthUnknown},
	Poller:       &PollerSpec{Poll: pollEnvoy, MaxConcurrency: 1, MaxResponseBodySize: envoyMaxResponseBody},
	Metrics:      &envoyMetrics,
}

// isEnvoySpan tells Envoy (whose scope is empty) by its string tags.
func isEnvoySpan(a attrs) bool {
	if _, ok := a.get(akEnvoyCluster); ok {
		return true
	}
	v, ok := a.get(akEnvoyComponent)
	return ok && v.typ == vStr && v.str == "proxy"
}

// pollEnvoy fetches every cluster's hosts and their health flags in one
// document.
func pollEnvoy(ctx context.Context, s PollSession) (bool, error) {
	return pollDocument(ctx, s, envoyClustersPath, DecodeEnvoyClusters)
}

func mapEnvoyRoot(e *Event, a attrs) {
	e.Upstream = a.str(akEnvoyCluster)
	e.RequestSize, e.ResponseSize = Unknown, Unknown
	if v, ok := a.get(akEnvoyReqSize); ok {
		e.RequestSize = v.size()
	}
	if v, ok := a.get(akEnvoyRespSize); ok {
		e.ResponseSize = v.size()
	}
	switch f := a.str(akEnvoyFlags); {
	case f == "" || f == "-":
		if e.StatusCode != 0 {
			e.Source = SourceUpstream
		}
	default: // UT, UF, NR, RL, ...: Envoy answered itself
		e.Source = SourceGateway
	}
}

// envoyRouter applies Envoy's `router <cluster> egress` child span (§3b).
func envoyRouter(e *Event, s *spanRec, a attrs, _ *float64) {
	if !strings.HasPrefix(s.name, envoyRouterStart) {
		return
	}
	if addr := a.str(akEnvoyAddress); addr != "" {
		e.Target = addr
	}
	if e.Upstream == "" {
		e.Upstream = a.str(akEnvoyCluster)
	}
	e.UpstreamMS = s.durationMS()
}
