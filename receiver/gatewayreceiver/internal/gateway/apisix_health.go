package gateway // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"

import "encoding/json"

type apisixChecker struct {
	Name  string               `json:"name"`
	Nodes luaArray[apisixNode] `json:"nodes"` // `{}` when empty (§2b)
}

type apisixNode struct {
	IP       string      `json:"ip"`
	Port     json.Number `json:"port"`
	Hostname string      `json:"hostname"`
	Status   string      `json:"status"`
}

// DecodeAPISIXHealth reads APISIX's control API GET /v1/healthcheck (a JSON
// array of checkers) and appends one observation per node to dst. The
// upstream is the checker's name (its config key, "/apisix/routes/1"), the
// target hostname:port, the address ip:port. A status outside APISIX's four
// reads as HealthUnknown.
func DecodeAPISIXHealth(dst []TargetHealth, body []byte) ([]TargetHealth, error) {
	var checkers []apisixChecker
	if err := json.Unmarshal(body, &checkers); err != nil {
		return dst, malformed("APISIX healthcheck list", body, err)
	}
	for _, c := range checkers {
		for _, n := range c.Nodes {
			host := n.Hostname
			if host == "" {
				host = n.IP
			}
			ip, port := addressParts(n.IP, string(n.Port))
			dst = append(dst, TargetHealth{
				Upstream: c.Name, Target: host + ":" + string(n.Port),
				IP: ip, Port: port, State: apisixState(n.Status),
			})
		}
	}
	return dst, nil
}

func apisixState(s string) HealthState {
	switch s {
	case "healthy":
		return HealthHealthy
	case "unhealthy":
		return HealthUnhealthy
	case "mostly_healthy":
		return HealthMostlyHealthy
	case "mostly_unhealthy":
		return HealthMostlyUnhealthy
	default:
		return HealthUnknown
	}
}

// apisixMaxResponseBody is the default bound on /v1/healthcheck, one
// document for every checker: 10,000 checkers of 2 nodes are about 4 MB
// (health_size_test.go).
const apisixMaxResponseBody = 32 << 20
