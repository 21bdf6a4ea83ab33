package gateway

import (
	"math"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Attribute names read from spans (gateway-formats.md §1a, §2a, §3b, §5).
// Gateways still emit the pre-1.23 HTTP semantic-convention names (Kong OSS,
// Envoy), newer ones the stable names (APISIX ≥ 3.16 sends both), so most
// fields have a stable and an old name.
const (
	attrServiceName   = "service.name"
	attrServiceNS     = "service.namespace"
	attrServiceInst   = "service.instance.id"
	attrHostname      = "hostname" // APISIX's resource
	attrRoute         = "http.route"
	attrMethod        = "http.request.method"
	attrMethodOld     = "http.method"
	attrStatusCode    = "http.response.status_code"
	attrStatusCodeOld = "http.status_code"
	attrReqSize       = "http.request.body.size"
	attrReqSizeOld    = "http.request_content_length"
	attrRespSize      = "http.response.body.size"
	attrRespSizeOld   = "http.response_content_length"

	// Kong (§1a): balancer spans.
	attrNetPeerIP    = "net.peer.ip"
	attrNetPeerPort  = "net.peer.port"
	attrNetPeerName  = "net.peer.name"
	attrPeerService  = "peer.service" // Enterprise only
	attrTryCount     = "try_count"
	kongScope        = "kong-internal"
	kongBalancer     = "kong.balancer"
	kongBalancerOld  = "balancer try #" // Kong 3.0–3.2
	apisixScope      = "opentelemetry-lua"
	apisixRouteID    = "apisix.route_id"
	apisixRouteName  = "apisix.route_name"
	apisixServiceID  = "apisix.service_id"
	apisixSvcName    = "apisix.service_name"
	apisixSource     = "apisix.response_source" // ≥ 3.17
	attrNetHostName  = "net.host.name"
	envoyCluster     = "upstream_cluster"
	envoyAddress     = "upstream_address"
	envoyFlags       = "response_flags"
	envoyReqSize     = "request_size"
	envoyRespSize    = "response_size"
	envoyComponent   = "component"
	envoyRouterStart = "router "

	attrGenAIProvider  = "gen_ai.provider.name"
	attrGenAISystem    = "gen_ai.system"
	attrGenAIReqModel  = "gen_ai.request.model"
	attrGenAIRespModel = "gen_ai.response.model"
	attrGenAIInput     = "gen_ai.usage.input_tokens"
	attrGenAIOutput    = "gen_ai.usage.output_tokens"
)

// SpanCounter walks OTLP traces and reports one Event per gateway root span,
// completed from that root's child spans (Kong balancer tries, Envoy's router
// span). It keeps scratch state between calls so a steady stream allocates
// nothing; it is not safe for concurrent use, so give each goroutine its own.
type SpanCounter struct {
	// Detect forces the gateway kind; KindAuto (the zero value) detects it
	// per scope: scope kong-internal is Kong, opentelemetry-lua (or a
	// resource service.name APISIX) is APISIX, a root span with Envoy's
	// upstream_cluster or component=proxy tags is Envoy, anything else the
	// semantic conventions.
	Detect Kind

	local  map[pcommon.SpanID]struct{}
	roots  map[pcommon.SpanID]int
	events []Event
	// lastTry is, per event, the try number of the balancer span that
	// filled Target (Kong's last try answers).
	lastTry []float64
}

// Count calls fn once for every root SERVER span in td and returns how many
// spans it examined and how many it reported. The *Event is valid only during
// the call.
//
// A root SERVER span is a span of kind SERVER whose parent is not another span
// of the same ResourceSpans: its parent is empty, or it is remote (a client's
// traceparent, which Kong for one does not flag as remote). In-process nested
// SERVER spans are skipped so one request is never counted twice.
func (c *SpanCounter) Count(td ptrace.Traces, fn func(*Event)) (examined, counted int) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		var gw Event
		gw.Reset()
		res := rs.Resource().Attributes()
		gw.Gateway = strAttr(res, attrServiceName)
		gw.Namespace = strAttr(res, attrServiceNS)
		gw.Instance = strAttr(res, attrServiceInst)
		if gw.Instance == "" {
			gw.Instance = strAttr(res, attrHostname)
		}
		hasChildren := c.collectNestedParents(rs)
		c.events = c.events[:0]
		c.lastTry = c.lastTry[:0]
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			scopeKind := c.Detect
			if scopeKind == KindAuto {
				scopeKind = detectScope(ss.Scope().Name(), gw.Gateway)
			}
			spans := ss.Spans()
			examined += spans.Len()
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				if !c.isRoot(span) {
					continue
				}
				kind := scopeKind
				if kind == KindAuto {
					kind = detectSpan(span.Attributes())
				}
				c.events = append(c.events, gw)
				c.lastTry = append(c.lastTry, -1)
				mapRoot(&c.events[len(c.events)-1], kind, span)
			}
		}
		if hasChildren && len(c.events) > 0 {
			c.completeFromChildren(rs)
		}
		for e := range c.events {
			fn(&c.events[e])
		}
		counted += len(c.events)
		clear(c.local)
		clear(c.roots)
	}
	return examined, counted
}

// detectScope tells the gateway from the instrumentation scope (and APISIX's
// default resource); KindAuto when the scope does not say.
func detectScope(scope, service string) Kind {
	switch {
	case scope == kongScope:
		return KindKong
	case scope == apisixScope || service == "APISIX":
		return KindAPISIX
	}
	return KindAuto
}

// detectSpan tells Envoy (whose scope is empty) from semantic-convention
// gateways by its string tags.
func detectSpan(attrs pcommon.Map) Kind {
	if _, ok := attrs.Get(envoyCluster); ok {
		return KindEnvoy
	}
	if v, ok := attrs.Get(envoyComponent); ok && v.Type() == pcommon.ValueTypeStr && v.Str() == "proxy" {
		return KindEnvoy
	}
	return KindSemconv
}

// collectNestedParents fills c.local with the ids of the spans in rs when some
// SERVER span in rs has a parent (the nested-SERVER test needs them), and
// reports whether rs holds any span with a parent at all (children that may
// complete a root's event).
func (c *SpanCounter) collectNestedParents(rs ptrace.ResourceSpans) (hasChildren bool) {
	needed := false
	sss := rs.ScopeSpans()
	for j := 0; j < sss.Len() && !needed; j++ {
		spans := sss.At(j).Spans()
		for k := 0; k < spans.Len(); k++ {
			s := spans.At(k)
			if s.ParentSpanID().IsEmpty() {
				continue
			}
			hasChildren = true
			if s.Kind() == ptrace.SpanKindServer {
				needed = true
				break
			}
		}
	}
	if !needed {
		return hasChildren
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
	return true
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

// completeFromChildren applies the direct children of each root: Kong's
// balancer spans (one per try; the last try gives the target and the
// upstream latency) and Envoy's router span.
func (c *SpanCounter) completeFromChildren(rs ptrace.ResourceSpans) {
	if c.roots == nil {
		c.roots = make(map[pcommon.SpanID]int)
	}
	// Roots are found again in the same order they were appended.
	idx := 0
	sss := rs.ScopeSpans()
	for j := 0; j < sss.Len(); j++ {
		spans := sss.At(j).Spans()
		for k := 0; k < spans.Len(); k++ {
			if s := spans.At(k); c.isRoot(s) {
				c.roots[s.SpanID()] = idx
				idx++
			}
		}
	}
	for j := 0; j < sss.Len(); j++ {
		spans := sss.At(j).Spans()
		for k := 0; k < spans.Len(); k++ {
			s := spans.At(k)
			if s.ParentSpanID().IsEmpty() || s.Kind() != ptrace.SpanKindClient {
				continue
			}
			i, ok := c.roots[s.ParentSpanID()]
			if !ok {
				continue
			}
			e := &c.events[i]
			switch e.Kind {
			case KindKong:
				c.kongBalancer(e, i, s)
			case KindEnvoy:
				envoyRouter(e, s)
			}
		}
	}
}

// kongBalancer applies one balancer try (§1a): `kong.balancer` (≥ 3.3) or
// `balancer try #N` (3.0–3.2), numbers as doubles. The highest try is the
// one that answered; a failed try carries http.status_code and status ERROR.
func (c *SpanCounter) kongBalancer(e *Event, i int, s ptrace.Span) {
	name := s.Name()
	if name != kongBalancer && !strings.HasPrefix(name, kongBalancerOld) {
		return
	}
	attrs := s.Attributes()
	try := 0.0
	if v, ok := attrs.Get(attrTryCount); ok {
		try = numberOf(v)
	}
	if try < c.lastTry[i] {
		return
	}
	c.lastTry[i] = try
	e.Target = strAttr(attrs, attrNetPeerIP)
	e.TargetPort = 0
	if v, ok := attrs.Get(attrNetPeerPort); ok {
		if p := numberOf(v); p > 0 && p < 65536 {
			e.TargetPort = int64(p)
		}
	}
	e.Upstream = strAttr(attrs, attrNetPeerName)
	if svc := strAttr(attrs, attrPeerService); svc != "" {
		e.ServiceName = svc
	}
	e.UpstreamMS = durationMS(s)
	if s.Status().Code() == ptrace.StatusCodeError {
		e.Source = SourceGateway
	} else {
		e.Source = SourceUpstream
	}
}

// envoyRouter applies Envoy's `router <cluster> egress` child span (§3b).
func envoyRouter(e *Event, s ptrace.Span) {
	if !strings.HasPrefix(s.Name(), envoyRouterStart) {
		return
	}
	attrs := s.Attributes()
	if a := strAttr(attrs, envoyAddress); a != "" {
		e.Target = a
	}
	if e.Upstream == "" {
		e.Upstream = strAttr(attrs, envoyCluster)
	}
	e.UpstreamMS = durationMS(s)
}

// mapRoot fills e from a root SERVER span of the given kind.
func mapRoot(e *Event, kind Kind, span ptrace.Span) {
	e.Kind = kind
	attrs := span.Attributes()
	e.TotalMS = durationMS(span)
	if v, ok := attrs.Get(attrRoute); ok && v.Type() == pcommon.ValueTypeStr {
		e.Route = v.Str()
	}
	if v, ok := getEither(attrs, attrMethod, attrMethodOld); ok {
		e.Method = NormalizeMethod(v.AsString())
	}
	if v, ok := getEither(attrs, attrStatusCode, attrStatusCodeOld); ok {
		e.StatusCode = statusOf(v)
	}
	if v, ok := getEither(attrs, attrReqSize, attrReqSizeOld); ok {
		e.RequestSize = sizeOf(v)
	}
	if v, ok := getEither(attrs, attrRespSize, attrRespSizeOld); ok {
		e.ResponseSize = sizeOf(v)
	}
	switch kind {
	case KindKong:
		// Kong's root carries no route or service entity (§1a); the
		// balancer spans add target, upstream and response source.
		e.Source = SourceGateway // until a successful balancer try says otherwise
	case KindAPISIX:
		e.RouteID = strAttr(attrs, apisixRouteID)
		e.RouteName = strAttr(attrs, apisixRouteName)
		e.ServiceID = strAttr(attrs, apisixServiceID)
		e.ServiceName = strAttr(attrs, apisixSvcName)
		e.Host = strAttr(attrs, attrNetHostName)
		switch src := strAttr(attrs, apisixSource); src {
		case "upstream":
			e.Source = SourceUpstream
		case "apisix", "nginx":
			e.Source = SourceGateway
		case "":
			// ≤ 3.16: http.status_code is the upstream's status, present
			// only when something was proxied (§2a), so the upstream
			// answered whenever it is there.
			if e.StatusCode != 0 {
				e.Source = SourceUpstream
			}
		}
	case KindEnvoy:
		e.Upstream = strAttr(attrs, envoyCluster)
		e.RequestSize = sizeOf(attrOrEmpty(attrs, envoyReqSize))
		e.ResponseSize = sizeOf(attrOrEmpty(attrs, envoyRespSize))
		switch f := strAttr(attrs, envoyFlags); {
		case f == "" || f == "-":
			if e.StatusCode != 0 {
				e.Source = SourceUpstream
			}
		default: // UT, UF, NR, RL, ...: Envoy answered itself
			e.Source = SourceGateway
		}
	}
	genAIOf(&e.GenAI, attrs)
}

func genAIOf(g *GenAI, attrs pcommon.Map) {
	g.Provider = strAttr(attrs, attrGenAIProvider)
	if g.Provider == "" {
		g.Provider = strAttr(attrs, attrGenAISystem)
	}
	g.RequestModel = strAttr(attrs, attrGenAIReqModel)
	g.ResponseModel = strAttr(attrs, attrGenAIRespModel)
	if v, ok := attrs.Get(attrGenAIInput); ok {
		g.InputTokens = sizeOf(v)
	}
	if v, ok := attrs.Get(attrGenAIOutput); ok {
		g.OutputTokens = sizeOf(v)
	}
}

var emptyValue = pcommon.NewValueEmpty()

func attrOrEmpty(attrs pcommon.Map, k string) pcommon.Value {
	if v, ok := attrs.Get(k); ok {
		return v
	}
	return emptyValue
}

func strAttr(attrs pcommon.Map, k string) string {
	if v, ok := attrs.Get(k); ok && v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return ""
}

// getEither prefers the stable attribute name and falls back to the old one.
func getEither(attrs pcommon.Map, stable, old string) (pcommon.Value, bool) {
	if v, ok := attrs.Get(stable); ok {
		return v, true
	}
	return attrs.Get(old)
}

func durationMS(s ptrace.Span) float64 {
	start, end := s.StartTimestamp(), s.EndTimestamp()
	if start == 0 || end < start {
		return Unknown
	}
	return float64(end-start) / 1e6
}

// numberOf reads a number sent as int, double (Lua) or string (Envoy); NaN
// when it is none.
func numberOf(v pcommon.Value) float64 {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return float64(v.Int())
	case pcommon.ValueTypeDouble:
		return v.Double()
	case pcommon.ValueTypeStr:
		return parseFloat(v.Str())
	}
	return math.NaN()
}

// sizeOf reads a byte or token count; Unknown unless it is a whole number
// ≥ 0.
func sizeOf(v pcommon.Value) int64 {
	f := numberOf(v)
	if !(f >= 0) || f != math.Trunc(f) || f > 1<<53 {
		return Unknown
	}
	return int64(f)
}

// statusOf accepts the encodings gateways use: int (semconv, Kong), double
// (numbers from Lua) and string (Envoy tags every value as a string).
func statusOf(v pcommon.Value) int64 {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return validStatus(v.Int())
	case pcommon.ValueTypeDouble:
		d := v.Double()
		if d != math.Trunc(d) || d < 0 || d > 1000 {
			return 0
		}
		return validStatus(int64(d))
	case pcommon.ValueTypeStr:
		return parseStatus(v.Str())
	default:
		return 0
	}
}
