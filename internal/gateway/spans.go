package gateway

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Attribute names read from spans. Gateways still emit the pre-1.23 HTTP
// semantic-convention names (Kong OSS, Envoy), newer ones the stable names
// (APISIX ≥ 3.16 sends both), so each field has a stable and an old name.
const (
	attrServiceName   = "service.name"
	attrServiceNS     = "service.namespace"
	attrRoute         = "http.route"
	attrMethod        = "http.request.method"
	attrMethodOld     = "http.method"
	attrStatusCode    = "http.response.status_code"
	attrStatusCodeOld = "http.status_code"
)

// SpanCounter walks OTLP traces and reports one Request per gateway root span.
// It keeps a scratch set between calls to avoid allocating per batch; it is not
// safe for concurrent use, so give each goroutine its own.
type SpanCounter struct {
	local map[pcommon.SpanID]struct{}
}

// Count calls fn once for every root SERVER span in td and returns how many
// spans it examined and how many it counted.
//
// A root SERVER span is a span of kind SERVER whose parent is not another span
// of the same ResourceSpans: its parent is empty, or it is remote (a client's
// traceparent, which Kong for one does not flag as remote). In-process nested
// SERVER spans are skipped so one request is never counted twice.
func (c *SpanCounter) Count(td ptrace.Traces, fn func(Request)) (examined, counted int) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		var gw Request
		res := rs.Resource().Attributes()
		if v, ok := res.Get(attrServiceName); ok {
			gw.Service = v.AsString()
		}
		if v, ok := res.Get(attrServiceNS); ok {
			gw.Namespace = v.AsString()
		}
		c.collectNestedParents(rs)
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			examined += spans.Len()
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				if !c.isRoot(span) {
					continue
				}
				fn(requestOf(gw, span.Attributes()))
				counted++
			}
		}
		clear(c.local)
	}
	return examined, counted
}

// collectNestedParents fills c.local with the ids of the spans in rs, but only
// when some SERVER span in rs has a parent: the common case (gateway root
// spans without an incoming traceparent) needs no set at all.
func (c *SpanCounter) collectNestedParents(rs ptrace.ResourceSpans) {
	needed := false
	sss := rs.ScopeSpans()
	for j := 0; j < sss.Len() && !needed; j++ {
		spans := sss.At(j).Spans()
		for k := 0; k < spans.Len(); k++ {
			s := spans.At(k)
			if s.Kind() == ptrace.SpanKindServer && !s.ParentSpanID().IsEmpty() {
				needed = true
				break
			}
		}
	}
	if !needed {
		return
	}
	if c.local == nil {
		c.local = make(map[pcommon.SpanID]struct{})
	}
	for j := 0; j < sss.Len(); j++ {
		spans := sss.At(j).Spans()
		for k := 0; k < spans.Len(); k++ {
			c.local[spans.At(k).SpanID()] = struct{}{}
		}
	}
}

func (c *SpanCounter) isRoot(span ptrace.Span) bool {
	if span.Kind() != ptrace.SpanKindServer {
		return false
	}
	parent := span.ParentSpanID()
	if parent.IsEmpty() {
		return true
	}
	_, nested := c.local[parent]
	return !nested
}

// requestOf maps the attributes of a SERVER span into a Request; r carries
// what the resource says about the gateway.
func requestOf(r Request, attrs pcommon.Map) Request {
	if v, ok := attrs.Get(attrRoute); ok && v.Type() == pcommon.ValueTypeStr {
		r.Route = v.Str()
	}
	if v, ok := getEither(attrs, attrMethod, attrMethodOld); ok {
		r.Method = NormalizeMethod(v.AsString())
	}
	if v, ok := getEither(attrs, attrStatusCode, attrStatusCodeOld); ok {
		r.StatusCode = statusOf(v)
	}
	return r
}

// getEither prefers the stable attribute name and falls back to the old one.
func getEither(attrs pcommon.Map, stable, old string) (pcommon.Value, bool) {
	if v, ok := attrs.Get(stable); ok {
		return v, true
	}
	return attrs.Get(old)
}

// statusOf accepts the encodings gateways use: int (semconv, Kong), double
// (numbers from Lua) and string (Envoy tags every value as a string).
func statusOf(v pcommon.Value) int64 {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return validStatus(v.Int())
	case pcommon.ValueTypeDouble:
		d := v.Double()
		if d != math.Trunc(d) {
			return 0
		}
		return validStatus(int64(d))
	case pcommon.ValueTypeStr:
		return parseStatus(v.Str())
	default:
		return 0
	}
}
