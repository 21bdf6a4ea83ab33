package gateway // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"

import (
	"encoding/json"
)

// envoyClusters is the part of envoy.admin.v3.Clusters we read. Proto3 JSON
// omits default values (false flags, zero numbers) and writes uint64 stats as
// strings; host stats are not decoded at all (docs/gateways.md §3a).
type envoyClusters struct {
	ClusterStatuses *[]struct {
		Name         string `json:"name"`
		HostStatuses []struct {
			Address struct {
				SocketAddress struct {
					Address   string      `json:"address"`
					PortValue json.Number `json:"port_value"`
				} `json:"socket_address"`
				Pipe struct {
					Path string `json:"path"`
				} `json:"pipe"`
			} `json:"address"`
			Hostname     string `json:"hostname"`
			HealthStatus struct {
				EDSHealthStatus            string `json:"eds_health_status"`
				FailedActiveHealthCheck    bool   `json:"failed_active_health_check"`
				FailedOutlierCheck         bool   `json:"failed_outlier_check"`
				FailedActiveDegradedCheck  bool   `json:"failed_active_degraded_check"`
				ExcludedViaImmediateHCFail bool   `json:"excluded_via_immediate_hc_fail"`
				ActiveHCTimeout            bool   `json:"active_hc_timeout"`
			} `json:"health_status"`
		} `json:"host_statuses"`
	} `json:"cluster_statuses"`
}

// DecodeEnvoyClusters reads Envoy's admin GET /clusters?format=json and
// appends one observation per host to dst: upstream = cluster name, target =
// hostname:port when the host has a hostname, else its address, address =
// ip:port (a pipe's path for a Unix socket).
//
// State, in Envoy's own precedence: a failed active or outlier check, an
// immediate-fail exclusion, an active check timeout or an EDS status of
// UNHEALTHY, DRAINING or TIMEOUT is unhealthy; otherwise a failed degraded
// check or EDS DEGRADED is degraded; otherwise healthy.
func DecodeEnvoyClusters(dst []TargetHealth, body []byte) ([]TargetHealth, error) {
	var c envoyClusters
	if err := json.Unmarshal(body, &c); err != nil {
		return dst, malformed("Envoy clusters", body, err)
	}
	if c.ClusterStatuses == nil {
		// An Envoy with no cluster prints {}: proto3 omits the empty list.
		// Anything else without the field is not /clusters?format=json.
		var probe map[string]json.RawMessage
		if json.Unmarshal(body, &probe) != nil || len(probe) != 0 {
			return dst, malformed("Envoy clusters has no \"cluster_statuses\"", body, nil)
		}
		return dst, nil
	}
	for _, cl := range *c.ClusterStatuses {
		for _, h := range cl.HostStatuses {
			ip, port := h.Address.SocketAddress.Address, string(h.Address.SocketAddress.PortValue)
			if ip == "" {
				ip, port = h.Address.Pipe.Path, ""
			}
			if port == "" && ip != "" && h.Address.Pipe.Path == "" {
				port = "0" // proto3 omits port_value 0
			}
			target := ip
			if port != "" {
				target = ip + ":" + port
			}
			if h.Hostname != "" {
				target = h.Hostname
				if port != "" {
					target += ":" + port
				}
			}
			hs := h.HealthStatus
			state := HealthHealthy
			switch {
			case hs.FailedActiveHealthCheck, hs.FailedOutlierCheck, hs.ExcludedViaImmediateHCFail, hs.ActiveHCTimeout,
				hs.EDSHealthStatus == "UNHEALTHY", hs.EDSHealthStatus == "DRAINING", hs.EDSHealthStatus == "TIMEOUT":
				state = HealthUnhealthy
			case hs.FailedActiveDegradedCheck, hs.EDSHealthStatus == "DEGRADED":
				state = HealthDegraded
			}
			dst = append(dst, TargetHealth{Upstream: cl.Name, Target: target, IP: ip, Port: port, State: state})
		}
	}
	return dst, nil
}

// envoyMaxResponseBody is the default bound on /clusters?format=json, one
// pretty-printed document for every cluster: 10,000 clusters of 2 hosts are
// about 26 MB (health_size_test.go).
const envoyMaxResponseBody = 64 << 20
