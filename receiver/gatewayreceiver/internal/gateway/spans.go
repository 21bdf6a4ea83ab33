package gateway

import "strings"

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

// SpanCounter turns OTLP traces into one Event per gateway root span,
// completed from that root's child spans (Kong balancer tries, Envoy's router
// span). It reads pdata (Count) or OTLP protobuf bytes (CountProto); both
// reduce each ResourceSpans to spanRecs first and share the mapping below.
// It keeps scratch state between calls so a steady stream allocates nothing;
// it is not safe for concurrent use, so give each goroutine its own.
type SpanCounter struct {
	// Detect forces the gateway kind; KindAuto (the zero value) detects it
	// per scope: scope kong-internal is Kong, opentelemetry-lua (or a
	// resource service.name APISIX) is APISIX, a root span with Envoy's
	// upstream_cluster or component=proxy tags is Envoy, anything else the
	// semantic conventions.
	Detect Kind

	// The ResourceSpans being reduced: its resource's known attributes,
	// its spans and their known attributes.
	res   attrs
	spans []spanRec
	attrs attrs

	local  map[[8]byte]struct{}
	roots  map[[8]byte]int
	events []Event
	// lastTry is, per event, the try number of the balancer span that
	// filled Target (Kong's last try answers).
	lastTry []float64
}

// beginResource starts reducing one ResourceSpans.
func (c *SpanCounter) beginResource() {
	c.res = c.res[:0]
	c.spans = c.spans[:0]
	c.attrs = c.attrs[:0]
}

// endResource maps the reduced ResourceSpans: it appends to c.events one
// event for every root SERVER span and returns how many.
//
// A root SERVER span is a span of kind SERVER whose parent is not another span
// of the same ResourceSpans: its parent is empty, or it is remote (a client's
// traceparent, which Kong for one does not flag as remote). In-process nested
// SERVER spans are skipped so one request is never counted twice.
func (c *SpanCounter) endResource() int {
	var gw Event
	gw.Reset()
	gw.Gateway = c.res.str(akServiceName)
	gw.Namespace = c.res.str(akServiceNS)
	gw.Instance = c.res.str(akServiceInst)
	if gw.Instance == "" {
		gw.Instance = c.res.str(akHostname)
	}
	hasChildren := c.collectNestedParents()
	first := len(c.events)
	for i := range c.spans {
		span := &c.spans[i]
		if !c.isRoot(span) {
			continue
		}
		kind := c.Detect
		if kind == KindAuto {
			kind = span.scope
			if kind == KindAuto && gw.Gateway == "APISIX" {
				kind = KindAPISIX // APISIX's default resource
			}
		}
		a := c.attrsOf(span)
		if kind == KindAuto {
			kind = detectSpan(a)
		}
		c.events = append(c.events, gw)
		c.lastTry = append(c.lastTry, -1)
		mapRoot(&c.events[len(c.events)-1], kind, span, a)
	}
	if hasChildren && len(c.events) > first {
		c.completeFromChildren(first)
	}
	clear(c.local)
	clear(c.roots)
	return len(c.events) - first
}

// start begins a call, dropping what a refused one left.
func (c *SpanCounter) start() {
	c.events = c.events[:0]
	c.lastTry = c.lastTry[:0]
}

// report hands every event of the call to fn, once all of its input was
// read: a body refused half-way reports nothing.
func (c *SpanCounter) report(fn func(*Event)) int {
	for i := range c.events {
		fn(&c.events[i])
	}
	n := len(c.events)
	c.start()
	return n
}

func (c *SpanCounter) attrsOf(s *spanRec) attrs { return c.attrs[s.attrLo:s.attrHi] }

// detectScope tells the gateway from the instrumentation scope; KindAuto
// when the scope does not say.
func detectScope(scope string) Kind {
	switch scope {
	case kongScope:
		return KindKong
	case apisixScope:
		return KindAPISIX
	}
	return KindAuto
}

// detectSpan tells Envoy (whose scope is empty) from semantic-convention
// gateways by its string tags.
func detectSpan(a attrs) Kind {
	if _, ok := a.get(akEnvoyCluster); ok {
		return KindEnvoy
	}
	if v, ok := a.get(akEnvoyComponent); ok && v.typ == vStr && v.str == "proxy" {
		return KindEnvoy
	}
	return KindSemconv
}

// collectNestedParents fills c.local with the ids of the spans when some
// SERVER span has a parent (the nested-SERVER test needs them), and reports
// whether any span has a parent at all (children that may complete a root's
// event).
func (c *SpanCounter) collectNestedParents() (hasChildren bool) {
	needed := false
	for i := range c.spans {
		s := &c.spans[i]
		if !s.hasParent() {
			continue
		}
		hasChildren = true
		if s.kind == spanKindServer {
			needed = true
			break
		}
	}
	if !needed {
		return hasChildren
	}
	if c.local == nil {
		c.local = make(map[[8]byte]struct{})
	}
	for i := range c.spans {
		c.local[c.spans[i].id] = struct{}{}
	}
	return true
}

func (c *SpanCounter) isRoot(span *spanRec) bool {
	if span.kind != spanKindServer {
		return false
	}
	if !span.hasParent() {
		return true
	}
	_, nested := c.local[span.parent]
	return !nested
}

// completeFromChildren applies the direct children of each root (the
// resource's events start at c.events[first]): Kong's
// balancer spans (one per try; the last try gives the target and the
// upstream latency) and Envoy's router span.
func (c *SpanCounter) completeFromChildren(first int) {
	if c.roots == nil {
		c.roots = make(map[[8]byte]int)
	}
	// Roots are found again in the same order they were appended.
	idx := first
	for i := range c.spans {
		if s := &c.spans[i]; c.isRoot(s) {
			c.roots[s.id] = idx
			idx++
		}
	}
	for i := range c.spans {
		s := &c.spans[i]
		if !s.hasParent() || s.kind != spanKindClient {
			continue
		}
		r, ok := c.roots[s.parent]
		if !ok {
			continue
		}
		e := &c.events[r]
		switch e.Kind {
		case KindKong:
			c.kongBalancer(e, r, s)
		case KindEnvoy:
			envoyRouter(e, s, c.attrsOf(s))
		}
	}
}

// kongBalancer applies one balancer try (§1a): `kong.balancer` (≥ 3.3) or
// `balancer try #N` (3.0–3.2), numbers as doubles. The highest try is the
// one that answered; a failed try carries http.status_code and status ERROR.
func (c *SpanCounter) kongBalancer(e *Event, i int, s *spanRec) {
	if s.name != kongBalancer && !strings.HasPrefix(s.name, kongBalancerOld) {
		return
	}
	a := c.attrsOf(s)
	try := 0.0
	if v, ok := a.get(akTryCount); ok {
		try = v.number()
	}
	if try < c.lastTry[i] {
		return
	}
	c.lastTry[i] = try
	e.Target = a.str(akNetPeerIP)
	e.TargetPort = 0
	if v, ok := a.get(akNetPeerPort); ok {
		if p := v.number(); p > 0 && p < 65536 {
			e.TargetPort = int64(p)
		}
	}
	e.Upstream = a.str(akNetPeerName)
	if svc := a.str(akPeerService); svc != "" {
		e.ServiceName = svc
	}
	e.UpstreamMS = s.durationMS()
	if s.status == statusCodeError {
		e.Source = SourceGateway
	} else {
		e.Source = SourceUpstream
	}
}

// envoyRouter applies Envoy's `router <cluster> egress` child span (§3b).
func envoyRouter(e *Event, s *spanRec, a attrs) {
	if !strings.HasPrefix(s.name, envoyRouterStart) {
		return
	}
	if addr := a.str(akEnvoyAddress); addr != "" {
		e.Target = addr
	}
	if e.Upstream == "" {
		e.Upstream = a.str(akEnvoyCluster)
	}
	e.UpstreamMS = s.durationMS()
}

// mapRoot fills e from a root SERVER span of the given kind.
func mapRoot(e *Event, kind Kind, span *spanRec, a attrs) {
	e.Kind = kind
	e.TotalMS = span.durationMS()
	if v, ok := a.get(akRoute); ok && v.typ == vStr {
		e.Route = v.str
	}
	if v, ok := a.either(akMethod, akMethodOld); ok {
		e.Method = NormalizeMethod(v.asMethod())
	}
	if v, ok := a.either(akStatusCode, akStatusCodeOld); ok {
		e.StatusCode = v.status()
	}
	if v, ok := a.either(akReqSize, akReqSizeOld); ok {
		e.RequestSize = v.size()
	}
	if v, ok := a.either(akRespSize, akRespSizeOld); ok {
		e.ResponseSize = v.size()
	}
	switch kind {
	case KindKong:
		// Kong's root carries no route or service entity (§1a); the
		// balancer spans add target, upstream and response source.
		e.Source = SourceGateway // until a successful balancer try says otherwise
	case KindAPISIX:
		mapAPISIXRoot(e, a)
	case KindEnvoy:
		mapEnvoyRoot(e, a)
	}
	genAIOf(&e.GenAI, a)
}

func mapAPISIXRoot(e *Event, a attrs) {
	e.RouteID = a.str(akAPISIXRouteID)
	e.RouteName = a.str(akAPISIXRouteName)
	e.ServiceID = a.str(akAPISIXServiceID)
	e.ServiceName = a.str(akAPISIXServiceName)
	e.Host = a.str(akNetHostName)
	switch src := a.str(akAPISIXSource); src {
	case "upstream":
		e.Source = SourceUpstream
	case "apisix", "nginx":
		e.Source = SourceGateway
	case "":
		// ≤ 3.16: http.status_code is the upstream's status, present only
		// when something was proxied (§2a), so the upstream answered
		// whenever it is there.
		if e.StatusCode != 0 {
			e.Source = SourceUpstream
		}
	}
}

func mapEnvoyRoot(e *Event, a attrs) {
	e.Upstream = a.str(akEnvoyCluster)
	e.RequestSize, e.ResponseSize = Unknown, Unknown
	if v, ok := a.get(akEnvoyReqSize); ok {
		e.RequestSize = v.size()
	}
	if v, ok := a.get(akEnvoyRespSize); ok {
		e.ResponseSize = v.size()
	}
	switch f := a.str(akEnvoyFlags); {
	case f == "" || f == "-":
		if e.StatusCode != 0 {
			e.Source = SourceUpstream
		}
	default: // UT, UF, NR, RL, ...: Envoy answered itself
		e.Source = SourceGateway
	}
}

func genAIOf(g *GenAI, a attrs) {
	g.Provider = a.str(akGenAIProvider)
	if g.Provider == "" {
		g.Provider = a.str(akGenAISystem)
	}
	g.RequestModel = a.str(akGenAIReqModel)
	g.ResponseModel = a.str(akGenAIRespModel)
	if v, ok := a.get(akGenAIInput); ok {
		g.InputTokens = v.size()
	}
	if v, ok := a.get(akGenAIOutput); ok {
		g.OutputTokens = v.size()
	}
}
