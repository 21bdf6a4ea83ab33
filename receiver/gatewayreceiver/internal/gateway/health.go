package gateway // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// HealthState is the health of one (upstream, target, address) as a gateway
// reports it, normalized across gateways. The zero value is HealthUnknown.
type HealthState uint8

// The states of every source, in one bounded set. Kong reports HEALTHY,
// UNHEALTHY, DNS_ERROR and HEALTHCHECKS_OFF (docs/gateways.md §1b); APISIX
// healthy, unhealthy, mostly_healthy and mostly_unhealthy (§2b); Envoy's host
// flags map to healthy, degraded and unhealthy (§3a). Unknown is ours: a
// target whose poller has failed for longer than stale_after.
const (
	HealthUnknown HealthState = iota
	HealthHealthy
	HealthUnhealthy
	HealthDNSError
	HealthChecksOff
	HealthMostlyHealthy
	HealthMostlyUnhealthy
	HealthDegraded
	// NumHealthStates sizes arrays indexed by HealthState.
	NumHealthStates
)

var healthStateNames = [NumHealthStates]string{
	HealthUnknown:         "unknown",
	HealthHealthy:         "healthy",
	HealthUnhealthy:       "unhealthy",
	HealthDNSError:        "dns_error",
	HealthChecksOff:       "healthchecks_off",
	HealthMostlyHealthy:   "mostly_healthy",
	HealthMostlyUnhealthy: "mostly_unhealthy",
	HealthDegraded:        "degraded",
}

// String is the lower-case name used as the `state` label ("dns_error").
func (s HealthState) String() string {
	if s < NumHealthStates {
		return healthStateNames[s]
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// ParseHealthState reads a state name in any case ("HEALTHY", "healthy",
// "DNS_ERROR"); ok is false for a name outside the set. It does not allocate.
func ParseHealthState(s string) (HealthState, bool) {
	for i, name := range healthStateNames {
		if equalFoldASCII(s, name) {
			return HealthState(i), true
		}
	}
	return HealthUnknown, false
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		ca, cb := a[i], b[i]
		if 'A' <= ca && ca <= 'Z' {
			ca += 'a' - 'A'
		}
		if ca != cb {
			return false
		}
	}
	return true
}

// HealthName is the service.name of the kind's health series: the
// gateway's name, or "gateway" for KindAuto (a pushed event that named no
// gateway).
func (k Kind) HealthName() string {
	if g := gatewayOf(k); g != nil {
		return g.Name
	}
	return "gateway"
}

// ParseHealthKind reads a pushed event's `kind`: the name of a gateway with
// upstream health, in any case; "" is KindAuto (no gateway named).
func ParseHealthKind(s string) (Kind, bool) {
	if s == "" {
		return KindAuto, true
	}
	for _, g := range registry[1:] {
		if g.HealthStates != nil && equalFoldASCII(s, g.Name) {
			return g.kind, true
		}
	}
	return KindAuto, false
}

// HealthStates lists the states a kind's targets can be in, in a fixed
// order, unknown last: what a one-hot gauge enumerates per target. A kind
// without its own list (KindAuto) enumerates every state.
func (k Kind) HealthStates() []HealthState {
	if g := gatewayOf(k); g != nil && g.HealthStates != nil {
		return g.HealthStates
	}
	return allStates
}

var allStates = []HealthState{HealthHealthy, HealthUnhealthy, HealthDNSError, HealthChecksOff, HealthMostlyHealthy, HealthMostlyUnhealthy, HealthDegraded, HealthUnknown}

// TargetHealth is one observation: the state of one address of one target of
// one upstream. Address is "ip:port", or "" when the target has no address
// (Kong's DNS_ERROR). IP and Port are the address's parts ("" when absent).
//
// Strings are owned by whoever decoded them (fresh strings from
// encoding/json); a consumer may keep them.
type TargetHealth struct {
	Upstream string
	Target   string
	IP       string
	Port     string
	State    HealthState
}

// Address is IP:Port; just IP without a port (a Unix socket's path); "" without
// an IP. IPv6 addresses are written without brackets, as Kong and APISIX print
// them.
func (t TargetHealth) Address() string {
	switch {
	case t.IP == "":
		return ""
	case t.Port == "":
		return t.IP
	}
	return t.IP + ":" + t.Port
}

// addressParts keeps a port only with an IP: an address entry that has a
// port but no IP (a broken or half-written admin API answer) is no address
// at all, so rows and labels never carry a port without a host.
func addressParts(ip, port string) (string, string) {
	if ip == "" {
		return "", ""
	}
	return ip, port
}

// luaArray is a JSON array that a Lua gateway may write as `{}` when it is
// empty: an empty Lua table is encoded as an object unless marked as an
// array (APISIX's healthcheck nodes, docs/gateways.md §2b; Kong's target
// addresses are guarded the same way). null is empty too.
type luaArray[T any] []T

var errNonEmptyObject = errors.New("a non-empty object where an array belongs (only {} may stand for an empty list)")

func (a *luaArray[T]) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(b, &obj); err != nil {
			return err
		}
		if len(obj) != 0 {
			return errNonEmptyObject
		}
		*a = nil
		return nil
	}
	return json.Unmarshal(b, (*[]T)(a))
}
