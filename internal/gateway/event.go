// Package gateway holds the normalized gateway request event and the mappers
// that turn what gateways emit (OTLP spans today) into it.
//
// Strings in an Event borrow the memory of the pdata they were read from: they
// are valid only while that pdata is. A consumer that keeps one (as a map key,
// say) must copy it with strings.Clone.
package gateway // import "github.com/otelgateway/otelgateway/internal/gateway"

import (
	"net/http"
	"strconv"
	"strings"
)

// Request is one proxied request, as counted by the receiver.
type Request struct {
	// Namespace and Service are the gateway's resource service.namespace and
	// service.name (one Kong cluster, one Envoy fleet): they keep the series of
	// different gateways apart. The gateway node's service.instance.id is
	// deliberately not kept: the series of one collector carry that
	// collector's identity, so any node may report to any collector and sums
	// across collectors stay exact.
	Namespace, Service string
	// Route is a route template (http.route), never a raw path: raw paths
	// would make cardinality unbounded.
	Route string
	// Method is an upper-case known HTTP method or OtherMethod.
	Method string
	// StatusCode is the response status; 0 when the span did not carry one.
	StatusCode int64
}

// OtherMethod stands for any method outside the known set, as the HTTP
// semantic conventions require; it bounds the cardinality a hostile client
// could create through made-up methods.
const OtherMethod = "_OTHER"

// NormalizeMethod returns the canonical upper-case name of a known HTTP method
// (RFC 9110 plus PATCH), or OtherMethod. It does not allocate.
func NormalizeMethod(m string) string {
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
