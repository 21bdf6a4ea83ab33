package gateway

import (
	"encoding/base64"
	"math"
	"strconv"
)

// What a span is reduced to, and how the reduced spans of one ResourceSpans
// become events.
//
// The span mappers do not read pdata or protobuf directly: both inputs are
// first reduced to spanRecs holding only what the mappers use (ids, kind,
// name, times, status and the attributes attrs.go names). The OTLP/HTTP
// protobuf path decodes straight into them (otlp_proto.go), skipping the
// pdata tree it would otherwise build and throw away; gRPC, JSON and
// pass-through use the pdata adapter (spans_pdata.go). One mapping
// (endResource, below) serves both, and the differential fuzz test holds
// them to the same events.

// valueType mirrors the pcommon value types the mappers tell apart.
type valueType uint8

const (
	vEmpty valueType = iota
	vStr
	vBool
	vInt
	vDouble
	vBytes // str holds the raw bytes
	vOther // array or map: never a string, number or method
)

// value is one attribute value: str for vStr and vBytes, num the bits of an
// int (vInt), a double (vDouble) or a bool (vBool).
type value struct {
	typ valueType
	str string
	num uint64
}

// keyed is one attribute a mapper reads: its key and value, laid out flat
// (32 bytes, where a key beside a value struct would take 40: the decoder
// writes one for most attributes of every span).
type keyed struct {
	str string
	num uint64
	typ valueType
	key attrKey
}

func keyedOf(k attrKey, v value) keyed { return keyed{str: v.str, num: v.num, typ: v.typ, key: k} }

func (kv *keyed) val() value { return value{typ: kv.typ, str: kv.str, num: kv.num} }

// attrs are the known attributes of one span or resource, in input order:
// get returns the first of duplicates, as pcommon.Map.Get does.
type attrs []keyed

func (a attrs) get(k attrKey) (value, bool) {
	for i := range a {
		if a[i].key == k {
			return a[i].val(), true
		}
	}
	return value{}, false
}

// keySet is a filter of the keys an attrs holds, bit k%64 for key k: a clear
// bit means get finds nothing. A root's mapping asks for some 15 keys, most
// absent (Kong's root carries 4 of them), so it tests the filter first.
type keySet uint64

func (a attrs) keys() keySet {
	var s keySet
	for i := range a {
		s |= 1 << (a[i].key & 63)
	}
	return s
}

func (s keySet) has(k attrKey) bool { return s&(1<<(k&63)) != 0 }

// str is the attribute's value when it is a string, else "".
func (a attrs) str(k attrKey) string {
	if v, ok := a.get(k); ok && v.typ == vStr {
		return v.str
	}
	return ""
}

// either prefers the stable attribute name and falls back to the old one.
func (a attrs) either(stable, old attrKey) (value, bool) {
	if v, ok := a.get(stable); ok {
		return v, true
	}
	return a.get(old)
}

// spanRec is one span reduced to what the mappers read. Its attributes are
// SpanCounter.attrs[attrLo:attrHi].
type spanRec struct {
	trace      [16]byte
	id, parent [8]byte
	// kind and status are the OTLP enum values (SPAN_KIND_*, STATUS_CODE_*).
	kind, status   int32
	name           string
	traceState     string // W3C tracestate (the sampling threshold)
	start, end     uint64
	scope          Kind // what the span's instrumentation scope says; KindAuto when nothing
	attrLo, attrHi int32
	// legacy: from a deprecated instrumentation_library_spans list.
	legacy bool
}

// OTLP enum values the mappers compare with (trace/v1 SpanKind, Status).
const (
	spanKindInternal = 1
	spanKindServer   = 2
	spanKindClient   = 3
	statusCodeError  = 2
)

func (s *spanRec) hasParent() bool { return s.parent != [8]byte{} }

// durationMS is the span's duration; Unknown without a start, ending before
// it starts, or longer than a day (a clock error or a forged span, which
// would otherwise poison a latency sum for good).
func (s *spanRec) durationMS() float64 {
	if s.start == 0 || s.end < s.start || s.end-s.start > maxLatencyMS*1e6 {
		return Unknown
	}
	return float64(s.end-s.start) / 1e6
}

// asMethod is what pcommon's AsString gives for a method attribute, as far
// as NormalizeMethod can tell it apart: numbers, bools and structures never
// name a method, bytes are read as their base64 text, as AsString does.
func (v value) asMethod() string {
	switch v.typ {
	case vStr:
		return v.str
	case vBytes:
		if len(v.str) == 3 { // only 3 bytes encode to a 4-letter method
			return base64.StdEncoding.EncodeToString([]byte(v.str))
		}
		return "-"
	case vEmpty:
		return ""
	}
	return "-"
}

// number reads a number sent as int, double (Lua) or string (Envoy); NaN
// when it is none.
func (v value) number() float64 {
	switch v.typ {
	case vInt:
		return float64(int64(v.num))
	case vDouble:
		return math.Float64frombits(v.num)
	case vStr:
		return parseFloat(v.str)
	}
	return math.NaN()
}

// size reads a byte or token count; Unknown unless it is a whole number
// ≥ 0.
func (v value) size() int64 {
	f := v.number()
	if !(f >= 0) || f != math.Trunc(f) || f > 1<<53 {
		return Unknown
	}
	return int64(f)
}

// status accepts the encodings gateways use: int (semconv, Kong), double
// (numbers from Lua) and string (Envoy tags every value as a string).
func (v value) status() int64 {
	switch v.typ {
	case vInt:
		return validStatus(int64(v.num))
	case vDouble:
		d := math.Float64frombits(v.num)
		if d != math.Trunc(d) || d < 0 || d > 1000 {
			return 0
		}
		return validStatus(int64(d))
	case vStr:
		return parseStatus(v.str)
	}
	return 0
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
