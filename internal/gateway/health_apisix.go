package gateway // import "github.com/otelgateway/otelgateway/internal/gateway"

import (
	"bytes"
	"encoding/json"
	"errors"
)

type apisixChecker struct {
	Name  string      `json:"name"`
	Nodes apisixNodes `json:"nodes"`
}

type apisixNode struct {
	IP       string      `json:"ip"`
	Port     json.Number `json:"port"`
	Hostname string      `json:"hostname"`
	Status   string      `json:"status"`
}

var errNodesObject = errors.New(`"nodes" is a non-empty object, want an array (or {} for none)`)

// apisixNodes is a checker's node list. APISIX encodes an empty Lua table as
// an object, so an empty list arrives as `{}` (gateway-formats.md §2b).
type apisixNodes []apisixNode

func (n *apisixNodes) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		var empty map[string]json.RawMessage
		if err := json.Unmarshal(b, &empty); err != nil {
			return err
		}
		if len(empty) != 0 {
			return errNodesObject
		}
		*n = nil
		return nil
	}
	return json.Unmarshal(b, (*[]apisixNode)(n))
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
			dst = append(dst, TargetHealth{
				Upstream: c.Name, Target: host + ":" + string(n.Port),
				IP: n.IP, Port: string(n.Port), State: apisixState(n.Status),
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
