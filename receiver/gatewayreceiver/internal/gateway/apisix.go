package gateway

import "context"

// APISIX's home: span detection and mapping (docs/gateways.md §2a), the
// http-logger ingest path (apisix_httplogger.go, apisix_llm.go; §2d),
// upstream health (apisix_health.go; §2b) and the control API poller below.

// APISIX's scope, resource and span attributes (§2a).
const (
	apisixScope     = "opentelemetry-lua"
	apisixResource  = "APISIX" // the default resource's service.name
	apisixRouteID   = "apisix.route_id"
	apisixRouteName = "apisix.route_name"
	apisixServiceID = "apisix.service_id"
	apisixSvcName   = "apisix.service_name"
	apisixSource    = "apisix.response_source" // ≥ 3.17
	// apisixHealthPath is the control API's list of health checkers
	// (default control port 9090; §2b).
	apisixHealthPath = "/v1/healthcheck"
)

var apisixGateway = Gateway{
	Name:     "apisix",
	Scope:    apisixScope,
	Resource: apisixResource,
	MapRoot:  mapAPISIXRoot,
	Log: &LogSpec{
		Path: "/apisix/http-logger", Format: "apisix_http_logger",
		// APISIX sends new_line batches as NDJSON (often labelled text/plain).
		MediaTypes: []string{"application/json", "application/x-ndjson", "text/plain"},
		Decode:     DecodeAPISIXHTTPLogger,
	},
	HealthStates: []HealthState{HealthHealthy, HealthUnhealthy, HealthMostlyHealthy, HealthMostlyUnhealthy, HealthUnknown},
	Poller:       &PollerSpec{Poll: pollAPISIX, MaxConcurrency: 1, MaxResponseBodySize: apisixMaxResponseBody},
}

// pollAPISIX fetches every checker's nodes in one document. A checker exists
// only once its upstream has served a request, so upstreams come and go
// with traffic; rows of a checker that vanished are swept.
func pollAPISIX(ctx context.Context, s PollSession) (bool, error) {
	return pollDocument(ctx, s, apisixHealthPath, DecodeAPISIXHealth)
}

// pollDocument is the poll of an admin API that answers in one document
// (APISIX, Envoy): fetch, decode, keep this shard's upstreams, record. A
// successful poll is complete: what the document no longer lists is gone.
func pollDocument(ctx context.Context, s PollSession, path string, decode func([]TargetHealth, []byte) ([]TargetHealth, error)) (bool, error) {
	body, err := s.Get(ctx, path)
	if err != nil {
		return false, err
	}
	obs, err := decode(nil, body)
	if err != nil {
		return false, err
	}
	kept := obs[:0]
	for _, o := range obs {
		if s.InShard(o.Upstream) {
			kept = append(kept, o)
		}
	}
	s.Apply(kept)
	return true, nil
}

func mapAPISIXRoot(e *Event, a attrs) {
	e.RouteID = a.str(akAPISIXRouteID)
	e.RouteName = a.str(akAPISIXRouteName)
	e.ServiceID = a.str(akAPISIXServiceID)
	e.ServiceName = a.str(akAPISIXServiceName)
	// matched_host is the matched route's host pattern (ctx.curr_req_matched
	// ._host, "" for a route without hosts), which spans do not carry; the
	// span's net.host.name is the request's Host header, client input that
	// would mint a series per value. Host stays "" (§2c).
	switch src := a.str(akAPISIXSource); src {
	case "upstream":
		e.Source = SourceUpstream
	case "apisix":
		e.Source = SourceGateway
	case "nginx":
		e.Source = SourceProxy
	case "":
		// ≤ 3.16: http.status_code is the upstream's status, present only
		// when something was proxied (§2a), so the upstream answered
		// whenever it is there.
		if e.StatusCode != 0 {
			e.Source = SourceUpstream
		}
	}
}
