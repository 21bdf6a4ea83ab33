package gateway

import (
	"math"
	"strconv"
	"unsafe"
)

// Attribute names read from spans (docs/gateways.md §1a, §2a, §3b, §5).
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

	// Kong, APISIX and Envoy attributes are named in their homes (kong.go,
	// apisix.go, envoy.go).

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
	// Dimensions are span attributes (RegisterAttribute) whose values the
	// root span's event carries in Dims, at most MaxSpanDimensions.
	Dimensions []AttrKey
	// dimBuf holds the text of non-string dimension values of the call.
	dimBuf []byte

	// Reserve, when set, is asked for the bytes of every buffer the counter
	// grows while it reads a protobuf body (span records, attributes,
	// events: whole new arrays, as the old ones stay garbage until
	// collected); an error stops the read and CountProto returns it. The
	// receiver charges them to the request's admission, so the memory a
	// body of many small spans costs (an event is 536 bytes, a span record
	// 104, where a span can take 60 bytes of protobuf) is bounded with the
	// bytes in flight, not just the body.
	Reserve func(n int64) error
	// capSpans, capAttrs and capEvents are the capacities already
	// reserved in this call; refused is Reserve's error, which CountProto
	// returns as it is (not located in the body: it is not the body's).
	capSpans, capAttrs, capEvents int
	refused                       error

	// Detect forces the gateway kind; KindAuto (the zero value) detects it
	// per scope: scope kong-internal is Kong, opentelemetry-lua (or a
	// resource service.name APISIX) is APISIX, github.com/traefik/traefik
	// is Traefik, a root span with Envoy's upstream_cluster or
	// component=proxy tags is Envoy, anything else the semantic conventions.
	Detect Kind

	// The ResourceSpans being reduced: its resource's known attributes,
	// its spans and their known attributes.
	res   attrs
	spans []spanRec
	attrs attrs

	local  map[[8]byte]struct{}
	roots  map[[8]byte]int
	events []Event
	// byID indexes the resource's spans by id, for the walk from an
	// INTERNAL span up to its root (built only when one is walked).
	byID map[[8]byte]int32
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
			if kind == KindAuto {
				kind = detectResource(gw.Gateway) // APISIX's default resource
			}
		}
		a := c.attrsOf(span)
		if kind == KindAuto {
			kind = detectSpan(a)
		}
		c.events = append(c.events, gw)
		c.lastTry = append(c.lastTry, -1)
		mapRoot(&c.events[len(c.events)-1], kind, span, a)
		if len(c.Dimensions) > 0 {
			c.readDims(&c.events[len(c.events)-1], a)
		}
	}
	if hasChildren && len(c.events) > first {
		c.completeFromChildren(first)
	}
	clear(c.local)
	clear(c.roots)
	clear(c.byID)
	return len(c.events) - first
}

// start begins a call, dropping what a refused one left.
func (c *SpanCounter) start() {
	c.dimBuf = c.dimBuf[:0]
	c.events = c.events[:0]
	c.lastTry = c.lastTry[:0]
	// What the counter kept from earlier calls (maxKeptRecords at most) is
	// not the body's to pay for.
	c.capSpans, c.capAttrs, c.capEvents = cap(c.spans), cap(c.attrs), cap(c.events)
	c.refused = nil
}

// Sizes of what reserveGrowth charges.
const (
	sizeofSpanRec = int64(unsafe.Sizeof(spanRec{}))
	sizeofKeyed   = int64(unsafe.Sizeof(keyed{}))
	sizeofEvent   = int64(unsafe.Sizeof(Event{})) + 8 // and its lastTry
)

// reserveGrowth asks Reserve for the buffers grown since its last call.
func (c *SpanCounter) reserveGrowth() error {
	if c.Reserve == nil {
		return nil
	}
	var n int64
	if k := cap(c.spans); k > c.capSpans {
		n += int64(k) * sizeofSpanRec
		c.capSpans = k
	}
	if k := cap(c.attrs); k > c.capAttrs {
		n += int64(k) * sizeofKeyed
		c.capAttrs = k
	}
	if k := cap(c.events); k > c.capEvents {
		n += int64(k) * sizeofEvent
		c.capEvents = k
	}
	if n == 0 {
		return nil
	}
	c.refused = c.Reserve(n)
	return c.refused
}

// readDims fills e.Dims from the root span's attributes: strings as they
// are, booleans and numbers as text (written into dimBuf, which the event
// borrows like the input), other types as absent.
func (c *SpanCounter) readDims(e *Event, a attrs) {
	for i, k := range c.Dimensions[:min(len(c.Dimensions), MaxSpanDimensions)] {
		v, ok := a.get(k)
		if !ok {
			continue
		}
		start := len(c.dimBuf)
		switch v.typ {
		case vStr:
			e.Dims[i] = v.str
			continue
		case vBool:
			c.dimBuf = strconv.AppendBool(c.dimBuf, v.num == 1)
		case vInt:
			c.dimBuf = strconv.AppendInt(c.dimBuf, int64(v.num), 10)
		case vDouble:
			c.dimBuf = strconv.AppendFloat(c.dimBuf, math.Float64frombits(v.num), 'g', -1, 64)
		default:
			continue
		}
		e.Dims[i] = borrow(c.dimBuf[start:])
	}
}

// maxKeptRecords bounds the span records (and attributes) a counter keeps
// for reuse between calls; a larger export's are dropped.
const maxKeptRecords = 1 << 12

// Release drops every reference the counter keeps into the last input:
// records, attributes and events borrow its strings (the body they were
// decoded from), so a pooled counter would otherwise pin that body for as
// long as it sits in the pool, outside any admission bound. Buffers beyond
// maxKeptRecords are dropped. Call it before pooling the counter.
func (c *SpanCounter) Release() {
	c.events, c.spans, c.attrs, c.res = releaseSlice(c.events), releaseSlice(c.spans), releaseSlice(c.attrs), releaseSlice(c.res)
	c.dimBuf = releaseSlice(c.dimBuf)
	c.lastTry = c.lastTry[:0]
}

func releaseSlice[T any](s []T) []T {
	if cap(s) > maxKeptRecords {
		return nil
	}
	clear(s[:cap(s)])
	return s[:0]
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

// completeFromChildren applies the direct CLIENT children of each root (the
// resource's events start at c.events[first]): Kong's
// balancer spans (one per try; the last try gives the target and the
// upstream latency) and Envoy's router span; and, for a gateway that maps
// them, the INTERNAL spans below a root (Traefik's Router span).
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
	internal := c.wantInternal(first)
	for i := range c.spans {
		s := &c.spans[i]
		if !s.hasParent() {
			continue
		}
		if s.kind != spanKindClient {
			if internal && s.kind == spanKindInternal {
				c.applyInternal(s)
			}
			continue
		}
		r, ok := c.roots[s.parent]
		if !ok {
			continue
		}
		e := &c.events[r]
		if g := gatewayOf(e.Kind); g != nil && g.MapChild != nil {
			g.MapChild(e, s, c.attrsOf(s), &c.lastTry[r])
		}
	}
}

// maxInternalDepth bounds the walk from an INTERNAL span up to its root: a
// chain longer than this (or a cycle of forged parent ids) is not a request's.
const maxInternalDepth = 64

// wantInternal reports whether a gateway of one of the resource's events
// maps INTERNAL descendants; only then are INTERNAL spans looked at, so
// Kong's and Envoy's reduction is unchanged.
func (c *SpanCounter) wantInternal(first int) bool {
	for i := first; i < len(c.events); i++ {
		if g := gatewayOf(c.events[i].Kind); g != nil && g.MapInternal != nil {
			return true
		}
	}
	return false
}

// applyInternal hands an INTERNAL span to MapInternal of its root's
// gateway when the span has that gateway's Internal name and its parents,
// INTERNAL spans all of them, lead to a root of the same ResourceSpans
// (as for CLIENT children, a span whose root is in another export, or
// another ResourceSpans, adds nothing). A nested SERVER or a CLIENT span on
// the way is another request's boundary: the walk stops there.
func (c *SpanCounter) applyInternal(s *spanRec) {
	if !isInternalName(s.name) {
		return
	}
	if c.byID == nil {
		c.byID = make(map[[8]byte]int32)
	}
	if len(c.byID) == 0 {
		for i := range c.spans {
			c.byID[c.spans[i].id] = int32(i)
		}
	}
	p := s.parent
	for depth := 1; depth <= maxInternalDepth; depth++ {
		if r, ok := c.roots[p]; ok {
			e := &c.events[r]
			if g := gatewayOf(e.Kind); g != nil && g.MapInternal != nil && g.Internal == s.name {
				g.MapInternal(e, s, c.attrsOf(s), depth, &c.lastTry[r])
			}
			return
		}
		j, ok := c.byID[p]
		if !ok {
			return
		}
		up := &c.spans[j]
		if up.kind != spanKindInternal || !up.hasParent() {
			return
		}
		p = up.parent
	}
}

// isInternalName reports whether some gateway maps INTERNAL spans of this
// name.
func isInternalName(name string) bool {
	for _, g := range registry[1:] {
		if g.MapInternal != nil && g.Internal == name {
			return true
		}
	}
	return false
}

// mapRoot fills e from a root SERVER span of the given kind.
func mapRoot(e *Event, kind Kind, span *spanRec, a attrs) {
	e.Kind = kind
	e.TotalMS = span.durationMS()
	e.TraceID, e.SpanID = span.trace, span.id
	e.Sampling = SamplingUnknown
	if w, ok := thresholdWeight(span.traceState); ok {
		e.Weight, e.Sampling = w, SamplingThreshold
	}
	ks := a.keys()
	if v, ok := a.get(akRoute); ok && v.typ == vStr {
		e.Route = v.str
	}
	if v, ok := a.either(akMethod, akMethodOld); ok {
		e.Method = NormalizeMethod(v.asMethod())
	}
	if v, ok := a.either(akStatusCode, akStatusCodeOld); ok {
		e.StatusCode = v.status()
	}
	if ks.has(akReqSize) || ks.has(akReqSizeOld) {
		if v, ok := a.either(akReqSize, akReqSizeOld); ok {
			e.RequestSize = v.size()
		}
	}
	if ks.has(akRespSize) || ks.has(akRespSizeOld) {
		if v, ok := a.either(akRespSize, akRespSizeOld); ok {
			e.ResponseSize = v.size()
		}
	}
	if g := gatewayOf(kind); g != nil && g.MapRoot != nil {
		g.MapRoot(e, a)
	}
	if ks&genAIKeys != 0 {
		genAIOf(&e.GenAI, a)
	} else { // what genAIOf sets when none of its keys is there
		e.GenAI.Provider, e.GenAI.RequestModel, e.GenAI.ResponseModel = "", "", ""
	}
}

// genAIKeys are the keys genAIOf reads.
const genAIKeys = keySet(1<<akGenAIProvider | 1<<akGenAISystem | 1<<akGenAIReqModel |
	1<<akGenAIRespModel | 1<<akGenAIInput | 1<<akGenAIOutput)

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
