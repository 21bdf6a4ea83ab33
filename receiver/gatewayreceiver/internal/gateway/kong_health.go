package gateway // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// KongUpstream is one entry of Kong's GET /upstreams list.
type KongUpstream struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// KongUpstreamPage is one page of GET /upstreams: its upstreams and the path
// of the next page ("" on the last one; Kong sends null or leaves it out).
type KongUpstreamPage struct {
	Upstreams []KongUpstream
	Next      string
}

type kongPage[T any] struct {
	Data *[]T   `json:"data"`
	Next string `json:"next"`
}

// ErrMalformed marks a body that is not the JSON an admin API documents: an
// HTML error page, a truncated body, or JSON of the wrong shape. Decoders wrap
// it, quoting the start of the offending input.
var ErrMalformed = errors.New("malformed admin API response")

// malformed wraps ErrMalformed with what was wrong and the body's first bytes.
func malformed(what string, body []byte, err error) error {
	msg := what
	if err != nil {
		msg += ": " + err.Error()
	}
	return &MalformedError{Msg: msg, Body: quoteStart(body)}
}

// MalformedError is a body that failed to decode; Body quotes its first 64
// bytes so logs show whether it was HTML, truncated or just different.
type MalformedError struct {
	Msg  string
	Body string
}

func (e *MalformedError) Error() string { return e.Msg + " (body starts " + e.Body + ")" }

// Unwrap makes errors.Is(err, ErrMalformed) hold.
func (e *MalformedError) Unwrap() error { return ErrMalformed }

func quoteStart(body []byte) string {
	const max = 64
	b := bytes.TrimSpace(body)
	if len(b) > max {
		return strconv.Quote(string(b[:max])) + "…"
	}
	return strconv.Quote(string(b))
}

// DecodeKongUpstreams reads one page of Kong's GET /upstreams
// (docs/gateways.md §1b).
func DecodeKongUpstreams(body []byte) (KongUpstreamPage, error) {
	var p kongPage[KongUpstream]
	if err := json.Unmarshal(body, &p); err != nil {
		return KongUpstreamPage{}, malformed("Kong upstream list", body, err)
	}
	if p.Data == nil {
		return KongUpstreamPage{}, malformed("Kong upstream list has no \"data\" array", body, nil)
	}
	return KongUpstreamPage{Upstreams: *p.Data, Next: p.Next}, nil
}

type kongTarget struct {
	Target string `json:"target"`
	Health string `json:"health"`
	Data   struct {
		Addresses luaArray[kongAddress] `json:"addresses"`
	} `json:"data"`
}

type kongAddress struct {
	IP     string      `json:"ip"`
	Port   json.Number `json:"port"`
	Health string      `json:"health"`
}

// DecodeKongHealth reads one page of Kong's GET /upstreams/{id}/health and
// appends one observation per address of every target to dst, under the
// upstream's name (Kong's Prometheus plugin labels by name, not id). It
// returns the grown dst and the next page's path ("" on the last page).
//
// A target whose health is DNS_ERROR, or which has no address in the
// balancer, becomes one observation with no address, as Kong's
// kong_upstream_target_health prints it (address=""). A state string outside
// Kong's four reads as HealthUnknown.
func DecodeKongHealth(dst []TargetHealth, upstream string, body []byte) ([]TargetHealth, string, error) {
	var p kongPage[kongTarget]
	if err := json.Unmarshal(body, &p); err != nil {
		return dst, "", malformed("Kong upstream health", body, err)
	}
	if p.Data == nil {
		return dst, "", malformed("Kong upstream health has no \"data\" array", body, nil)
	}
	for _, t := range *p.Data {
		targetState := kongState(t.Health)
		if targetState == HealthDNSError || len(t.Data.Addresses) == 0 {
			dst = append(dst, TargetHealth{Upstream: upstream, Target: t.Target, State: targetState})
			continue
		}
		for _, a := range t.Data.Addresses {
			ip, port := addressParts(a.IP, string(a.Port))
			dst = append(dst, TargetHealth{Upstream: upstream, Target: t.Target, IP: ip, Port: port, State: kongState(a.Health)})
		}
	}
	return dst, p.Next, nil
}

func kongState(s string) HealthState {
	switch s {
	case "HEALTHY":
		return HealthHealthy
	case "UNHEALTHY":
		return HealthUnhealthy
	case "DNS_ERROR":
		return HealthDNSError
	case "HEALTHCHECKS_OFF":
		return HealthChecksOff
	default:
		return HealthUnknown
	}
}

// kongMaxResponseBody is the default bound on one Admin API answer: a page
// of 1,000 upstreams (Kong's largest page) with their full entities is
// about 1.1 MB, a page of 1,000 targets of 50 addresses each about 3.6 MB
// (health_size_test.go measures both).
const kongMaxResponseBody = 16 << 20
