package gateway

import (
	"math"
	"strings"
)

// Sampling says how a span-derived event's weight is known.
type Sampling uint8

const (
	// SamplingNone: the input is not sampled (access logs: every request).
	SamplingNone Sampling = iota
	// SamplingUnknown: a span without a sampling threshold; counted once,
	// which undercounts if the gateway samples (Kong's default
	// tracing_sampling_rate is 0.01, APISIX's default sampler always_off).
	SamplingUnknown
	// SamplingThreshold: the trace's tracestate carries OpenTelemetry's
	// consistent-probability threshold (ot=th:…); the event counts its
	// adjusted count.
	SamplingThreshold
	// SamplingConfigured: no threshold, but the receiver was told the
	// gateway's sampling rate (sampling_rates): an estimate.
	SamplingConfigured
)

// maxThreshold is 2^56: thresholds are 56-bit (docs/gateways.md §5, the
// OpenTelemetry "TraceState: Probability Sampling" spec).
const maxThreshold = 1 << 56

// thresholdWeight reads the ot=th:<hex> sub-key of a W3C tracestate and
// returns the span's adjusted count 2^56 / (2^56 − T), rounded to a whole
// number (the exact value for probabilities 1/N; an estimate otherwise).
// ok is false when there is no valid threshold. It does not allocate.
func thresholdWeight(tracestate string) (uint64, bool) {
	ot, ok := tracestateMember(tracestate, "ot")
	if !ok {
		return 0, false
	}
	for ot != "" {
		var field string
		field, ot, _ = strings.Cut(ot, ";")
		hex, isTh := strings.CutPrefix(field, "th:")
		if !isTh {
			continue
		}
		if hex == "" || len(hex) > 14 {
			return 0, false
		}
		var t uint64
		for i := 0; i < len(hex); i++ {
			c := hex[i]
			var d byte
			switch {
			case '0' <= c && c <= '9':
				d = c - '0'
			case 'a' <= c && c <= 'f':
				d = c - 'a' + 10
			default: // the spec allows lower-case hex only
				return 0, false
			}
			t = t<<4 | uint64(d)
		}
		t <<= 4 * uint(14-len(hex)) // trailing zeros are omitted
		if t >= maxThreshold {
			return 0, false
		}
		w := math.Round(float64(maxThreshold) / float64(maxThreshold-t))
		return uint64(max(w, 1)), true
	}
	return 0, false
}

// tracestateMember returns the value of the list member key in a W3C
// tracestate ("k1=v1,k2=v2").
func tracestateMember(ts, key string) (string, bool) {
	for ts != "" {
		var member string
		member, ts, _ = strings.Cut(ts, ",")
		member = strings.TrimSpace(member)
		if k, v, ok := strings.Cut(member, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// Weight returns how many requests the event stands for and how that is
// known: 1 for a log entry; a span's adjusted count from its threshold; else
// 1/rate of its gateway's configured sampling rate (rates is indexed by
// Kind; 0 = not configured), else 1.
func (e *Event) weight(rates []float64) (uint64, Sampling) {
	switch e.Sampling {
	case SamplingThreshold:
		return e.Weight, SamplingThreshold
	case SamplingUnknown:
		if int(e.Kind) < len(rates) && rates[e.Kind] > 0 {
			return uint64(max(math.Round(1/rates[e.Kind]), 1)), SamplingConfigured
		}
	}
	return 1, e.Sampling
}

// Weighted resolves the event's weight against the configured sampling
// rates (indexed by Kind): it sets Weight and Sampling for the aggregator.
func (e *Event) Weighted(rates []float64) {
	e.Weight, e.Sampling = e.weight(rates)
}
