package gateway // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
)

// HealthEvent is one pushed health transition, decoded and checked.
type HealthEvent struct {
	// Gateway is the reporting gateway instance (a Kong node, an Envoy pod).
	Gateway string
	// Kind is the gateway kind the event names; KindAuto when none.
	Kind Kind
	TargetHealth
	// Time is when the gateway saw the state, as its clock read it; valid
	// only when HasTime (0001-01-01T00:00:00Z is a timestamp too).
	Time    time.Time
	HasTime bool
	// Index is the event's position in the request (0 for a lone object),
	// to name it in an answer.
	Index int
}

// pushEvent is the documented JSON schema of a pushed event.
type pushEvent struct {
	Gateway    string `json:"gateway"`
	HealthKind string `json:"kind"`
	Upstream   string `json:"upstream"`
	Target     string `json:"target"`
	Address    string `json:"address"`
	State      string `json:"state"`
	Timestamp  string `json:"timestamp"`
}

// EventError is one rejected event of a push: its index in the request and
// why, quoting the offending value.
type EventError struct {
	Index int
	Msg   string
}

func (e EventError) Error() string { return "event " + strconv.Itoa(e.Index) + ": " + e.Msg }

// DecodeHealthEvents reads a push body: one event object or an array of them.
// Events are checked one by one: valid ones are appended to dst, invalid
// ones reported in rejected (one bad event never refuses the others). err is
// set only when the body as a whole is not JSON of that shape.
func DecodeHealthEvents(dst []HealthEvent, body []byte) (events []HealthEvent, rejected []EventError, err error) {
	b := bytes.TrimSpace(body)
	var raw []pushEvent
	if len(b) > 0 && b[0] == '{' {
		var one pushEvent
		if err := strictUnmarshal(b, &one); err != nil {
			return dst, nil, malformed("health event", body, err)
		}
		raw = []pushEvent{one}
	} else if err := strictUnmarshal(b, &raw); err != nil {
		return dst, nil, malformed("health events (want an object or an array of objects)", body, err)
	}
	for i, e := range raw {
		ev, msg := checkHealthEvent(e)
		if msg != "" {
			rejected = append(rejected, EventError{Index: i, Msg: msg})
			continue
		}
		ev.Index = i
		dst = append(dst, ev)
	}
	return dst, rejected, nil
}

// HealthEventCount is how many events push body b carries, counted
// without decoding it: the elements of a top-level array, else 1. It does
// not check that b is valid JSON (DecodeHealthEvents does); a push of
// millions of events can be refused before they are decoded.
func HealthEventCount(b []byte) int {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '[' {
		return 1
	}
	depth, n, empty := 0, 0, true
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = stringEnd(b, i+1)
			empty = false
		case '[', '{':
			if depth++; depth > 1 {
				empty = false
			}
		case ']', '}':
			depth--
		case ',':
			if depth == 1 {
				n++
			}
		case ' ', '\t', '\n', '\r':
		default:
			empty = false
		}
	}
	if empty {
		return 0
	}
	return n + 1
}

func strictUnmarshal(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errTrailing
	}
	return nil
}

var errTrailing = errors.New("trailing data after the JSON value")

func checkHealthEvent(e pushEvent) (HealthEvent, string) {
	switch {
	case e.Gateway == "":
		return HealthEvent{}, `"gateway" is missing`
	case e.Upstream == "":
		return HealthEvent{}, `"upstream" is missing`
	case e.Target == "":
		return HealthEvent{}, `"target" is missing`
	}
	state, ok := ParseHealthState(e.State)
	if !ok {
		return HealthEvent{}, `"state" ` + strconv.Quote(e.State) + " is not one of healthy, unhealthy, dns_error, healthchecks_off, mostly_healthy, mostly_unhealthy, degraded, unknown"
	}
	kind, ok := ParseHealthKind(e.HealthKind)
	if !ok {
		return HealthEvent{}, `"kind" ` + strconv.Quote(e.HealthKind) + " is not one of " + OneOf(HealthNames())
	}
	ev := HealthEvent{Gateway: e.Gateway, Kind: kind, TargetHealth: TargetHealth{Upstream: e.Upstream, Target: e.Target, State: state}}
	if e.Address != "" {
		i := strings.LastIndexByte(e.Address, ':')
		if i <= 0 || i == len(e.Address)-1 {
			return HealthEvent{}, `"address" ` + strconv.Quote(e.Address) + ` is not "ip:port"`
		}
		ev.IP, ev.Port = strings.Trim(e.Address[:i], "[]"), e.Address[i+1:]
		if ev.IP == "" { // "[]:80"
			return HealthEvent{}, `"address" ` + strconv.Quote(e.Address) + ` is not "ip:port"`
		}
	}
	if e.Timestamp != "" {
		t, err := time.Parse(time.RFC3339Nano, e.Timestamp)
		if err != nil {
			return HealthEvent{}, `"timestamp" ` + strconv.Quote(e.Timestamp) + " is not RFC 3339"
		}
		ev.Time, ev.HasTime = t, true
	}
	return ev, ""
}
