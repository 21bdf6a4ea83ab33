// Package gateway holds what the gateway receiver knows about each gateway,
// and the normalized request event every input becomes.
//
// Each gateway has one home (kong.go, apisix.go, envoy.go, semconv.go, with
// their <name>_httplog.go and <name>_health.go decoders) holding its
// detection, span mapping, access-log decoding, health decoding and admin
// API poll, listed once in registry.go. The shared machinery (SpanCounter,
// counter.go) reduces OTLP spans from protobuf bytes (otlp_proto.go) or
// pdata (spans_pdata.go) to records keeping the attributes attrs.go names,
// and maps each root span through its gateway's home (spans.go). The facts
// each home relies on are in docs/gateways.md, cited by section.
//
// It is the receiver's alone (internal to receiver/gatewayreceiver); the
// bench modules measure it through the receiver.
//
// Lifetime: strings in an Event borrow the memory of the input they were read
// from (pdata, or a decoded JSON entry): they are valid only while that input
// is. A consumer that keeps one (as a map key, say) must copy it with
// strings.Clone.
package gateway // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"

import (
	"math"
	"net/http"
	"strconv"
	"strings"
)

// MaxSpanDimensions bounds the span attributes a receiver can add as
// dimensions (each widens every label tuple).
const MaxSpanDimensions = 4

// Source says who produced the response the client got.
type Source uint8

const (
	// SourceUnknown: the input does not say (Kong < 3.x spans without a
	// balancer span, APISIX ≤ 3.16 spans without an upstream status).
	SourceUnknown Source = iota
	// SourceUpstream: the upstream service answered.
	SourceUpstream
	// SourceGateway: the gateway answered itself (a plugin exit, an error,
	// no route, an Envoy local reply).
	SourceGateway
	// SourceProxy: the gateway proxied, but the upstream sent no response
	// headers (refused, timed out) and the gateway's proxy answered: APISIX
	// ≥ 3.17's response_source "nginx". Profiles that do not tell it apart
	// name it as SourceGateway.
	SourceProxy
)

// Unknown marks a latency or size the input did not carry.
const Unknown = -1

// Event is one proxied request, normalized from any input.
type Event struct {
	Kind Kind
	// Namespace and Gateway are the reporting gateway's service.namespace and
	// service.name (one Kong cluster, one Envoy fleet); Instance is the node
	// (service.instance.id, APISIX's hostname or server.hostname). Instance is
	// never a metric label: any node may report to any collector.
	Namespace, Gateway, Instance string
	// Route is a route template (http.route, a Kong route path, APISIX's
	// matched uri), never a raw URL: raw paths would make cardinality
	// unbounded. RouteID and RouteName are the gateway's route entity.
	Route, RouteID, RouteName string
	// ServiceID and ServiceName are the gateway's service entity (Kong
	// service, APISIX service); ServiceHost is Kong's fallback for a service
	// without a name.
	ServiceID, ServiceName, ServiceHost string
	// Upstream is the upstream or cluster name; Target the address the
	// request was proxied to (host or ip, plus TargetPort when the input
	// carries the port apart, so no string is built per event).
	Upstream, Target string
	TargetPort       int64
	// Host is the matched host (APISIX matched_host).
	Host string
	// Method is an upper-case known HTTP method or OtherMethod; "" when the
	// input had none.
	Method string
	// StatusCode is the status sent to the client; 0 when unknown.
	StatusCode int64
	Consumer   string
	Workspace  string
	Source     Source
	// TotalMS is the whole request as the gateway saw it; UpstreamMS the time
	// spent waiting for the upstream. Unknown when absent.
	TotalMS, UpstreamMS float64
	// AddedMS is the latency the gateway itself reports adding (Kong's
	// latencies.kong, APISIX's apisix_latency); Unknown when it does not,
	// and GatewayMS derives it.
	AddedMS float64
	// RequestSize and ResponseSize are bytes received from and sent to the
	// client; Unknown when absent.
	RequestSize, ResponseSize int64
	GenAI                     GenAI
	// Dims are the values of the configured span dimensions
	// (SpanCounter.Dimensions), "" where the span has none.
	Dims [MaxSpanDimensions]string
	// TraceID and SpanID are the root span's, zero for a log entry: a
	// histogram keeps them as the exemplar of the bucket the request fell in.
	TraceID [16]byte
	SpanID  [8]byte
	// Weight is how many requests the event stands for (a sampled span's
	// adjusted count; 1 otherwise) and Sampling how that is known.
	Weight   uint64
	Sampling Sampling
	// Superseded are the families of Kong's plugin this event must not be
	// counted into: the node's pushed metrics carry them (KongClaims; the
	// receiver sets it, under the kong profile only).
	Superseded KongFamilySet
}

// GenAI is what an AI-gateway request adds (OpenTelemetry GenAI attributes).
type GenAI struct {
	// Provider is gen_ai.provider.name, or the older gen_ai.system.
	Provider, RequestModel, ResponseModel string
	// ClientModel is the model the client asked for, when the gateway logs
	// it apart from the model it asked the provider for (APISIX's
	// request_llm_model vs llm_model); "" otherwise. ClientModelLogged:
	// the input logs it (then "" means the client named no model).
	ClientModel       string
	ClientModelLogged bool
	// Stream: the client asked for a streamed answer (APISIX ai_stream).
	Stream bool
	// FirstTokenMS is the time to the first token of a streamed answer,
	// or to the whole answer of one that is not (APISIX
	// llm_summary.duration, $llm_time_to_first_token: 0 when no answer
	// came); Unknown when absent.
	FirstTokenMS float64
	// InputTokens, OutputTokens and TotalTokens are Unknown when absent.
	InputTokens, OutputTokens, TotalTokens int64
	// Cost is the request's cost as the gateway computed it (Kong's ai
	// usage.cost); Unknown when absent.
	Cost float64
	// ProviderMS is the LLM provider's latency as the gateway measured it
	// (Kong's ai meta.llm_latency, APISIX's llm_summary
	// .upstream_response_time); Unknown when the input does not carry it,
	// and the upstream latency stands in.
	ProviderMS float64
}

// IsLLM reports whether the event carries GenAI attributes.
func (g *GenAI) IsLLM() bool {
	return g.Provider != "" || g.RequestModel != "" || g.ResponseModel != ""
}

// Reset clears e for reuse, with every measurement Unknown.
func (e *Event) Reset() {
	*e = Event{Weight: 1, TotalMS: Unknown, UpstreamMS: Unknown, AddedMS: Unknown, RequestSize: Unknown, ResponseSize: Unknown,
		GenAI: GenAI{InputTokens: Unknown, OutputTokens: Unknown, TotalTokens: Unknown, Cost: Unknown, ProviderMS: Unknown, FirstTokenMS: Unknown}}
}

// GatewayMS is the latency the gateway added: AddedMS when the gateway
// reported it; else total − upstream (clamped at 0) when both are known;
// else the total when the gateway answered itself (no upstream was
// involved). ok is false otherwise: a proxied request whose upstream time
// the input does not carry (APISIX spans, semantic-convention spans) has
// no known added latency, and observing the total as "added" would be
// wrong (APISIX computes it as request − upstream, log-util.lua
// latency_details_in_ms; docs/gateways.md §2d).
func (e *Event) GatewayMS() (float64, bool) {
	switch {
	case e.AddedMS >= 0:
		return e.AddedMS, true
	case e.TotalMS < 0:
		return 0, false
	case e.UpstreamMS >= 0:
		return max(0, e.TotalMS-e.UpstreamMS), true
	case e.Source == SourceGateway:
		return e.TotalMS, true
	}
	return 0, false
}

// OtherMethod stands for any method outside the known set, as the HTTP
// semantic conventions require; it bounds the cardinality a hostile client
// could create through made-up methods.
const OtherMethod = "_OTHER"

// NormalizeMethod returns the canonical upper-case name of a known HTTP method
// (RFC 9110 plus PATCH), or OtherMethod. It does not allocate.
func NormalizeMethod(m string) string {
	// Nearly every method arrives in upper case: a plain comparison finds
	// it (no two known methods differ only in case, so the answer is the
	// one EqualFold gives).
	for _, known := range knownMethods {
		if m == known {
			return known
		}
	}
	for _, known := range knownMethods {
		if strings.EqualFold(m, known) {
			return known
		}
	}
	return OtherMethod
}

var knownMethods = [...]string{
	http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete,
	http.MethodHead, http.MethodOptions, http.MethodPatch, http.MethodConnect,
	http.MethodTrace,
}

// parseStatus reads a status code written as text (Envoy sends every tag as a
// string). Anything that is not a plausible HTTP status reads as 0.
func parseStatus(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0
	}
	return validStatus(n)
}

// validStatus keeps codes in the range HTTP can carry (100–599); other values
// become 0 so a corrupt attribute cannot mint unbounded label values.
func validStatus(n int64) int64 {
	if n < 100 || n > 599 {
		return 0
	}
	return n
}

// parseFloat reads a decimal number; NaN when s is not one.
func parseFloat(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN()
	}
	return f
}
