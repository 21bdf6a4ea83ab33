package gateway

import (
	"encoding/base64"
	"math"
	"sync"
	"sync/atomic"
)

// The span mappers do not read pdata or protobuf directly: both inputs are
// first reduced to spanRecs holding only what the mappers use (ids, kind,
// name, times, status and the attributes named below). The OTLP/HTTP
// protobuf path decodes straight into them (otlp_proto.go), skipping the
// pdata tree it would otherwise build and throw away; gRPC, JSON and
// pass-through use the pdata adapter (spans.go). One mapping serves both, and
// the differential fuzz test holds them to the same events.

// attrKey numbers the resource and span attributes the mappers read; every
// other attribute is skipped when a span is reduced.
type attrKey uint8

const (
	akNone attrKey = iota
	akServiceName
	akServiceNS
	akServiceInst
	akHostname
	akRoute
	akMethod
	akMethodOld
	akStatusCode
	akStatusCodeOld
	akReqSize
	akReqSizeOld
	akRespSize
	akRespSizeOld
	akNetPeerIP
	akNetPeerPort
	akNetPeerName
	akPeerService
	akTryCount
	akAPISIXRouteID
	akAPISIXRouteName
	akAPISIXServiceID
	akAPISIXServiceName
	akAPISIXSource
	akEnvoyCluster
	akEnvoyAddress
	akEnvoyFlags
	akEnvoyReqSize
	akEnvoyRespSize
	akEnvoyComponent
	akGenAIProvider
	akGenAISystem
	akGenAIReqModel
	akGenAIRespModel
	akGenAIInput
	akGenAIOutput
)

// lookupAttrKey names the attribute k, akNone when no mapper reads it. The
// switch compiles to a search on length and bytes: no hashing, no
// allocation, so the decoder can ask with a string that borrows its input.
func lookupAttrKey(k string) attrKey {
	switch k {
	case attrServiceName:
		return akServiceName
	case attrServiceNS:
		return akServiceNS
	case attrServiceInst:
		return akServiceInst
	case attrHostname:
		return akHostname
	case attrRoute:
		return akRoute
	case attrMethod:
		return akMethod
	case attrMethodOld:
		return akMethodOld
	case attrStatusCode:
		return akStatusCode
	case attrStatusCodeOld:
		return akStatusCodeOld
	case attrReqSize:
		return akReqSize
	case attrReqSizeOld:
		return akReqSizeOld
	case attrRespSize:
		return akRespSize
	case attrRespSizeOld:
		return akRespSizeOld
	case attrNetPeerIP:
		return akNetPeerIP
	case attrNetPeerPort:
		return akNetPeerPort
	case attrNetPeerName:
		return akNetPeerName
	case attrPeerService:
		return akPeerService
	case attrTryCount:
		return akTryCount
	case apisixRouteID:
		return akAPISIXRouteID
	case apisixRouteName:
		return akAPISIXRouteName
	case apisixServiceID:
		return akAPISIXServiceID
	case apisixSvcName:
		return akAPISIXServiceName
	case apisixSource:
		return akAPISIXSource
	case envoyCluster:
		return akEnvoyCluster
	case envoyAddress:
		return akEnvoyAddress
	case envoyFlags:
		return akEnvoyFlags
	case envoyReqSize:
		return akEnvoyReqSize
	case envoyRespSize:
		return akEnvoyRespSize
	case envoyComponent:
		return akEnvoyComponent
	case attrGenAIProvider:
		return akGenAIProvider
	case attrGenAISystem:
		return akGenAISystem
	case attrGenAIReqModel:
		return akGenAIReqModel
	case attrGenAIRespModel:
		return akGenAIRespModel
	case attrGenAIInput:
		return akGenAIInput
	case attrGenAIOutput:
		return akGenAIOutput
	}
	if m := extraAttrs.Load(); m != nil {
		return (*m)[k] // akNone when absent
	}
	return akNone
}

// extraAttrs are the attributes registered beyond the built-in vocabulary
// (registerAttr: a gateway's home; RegisterAttribute: span dimensions of a
// receiver's config), which the switch above misses. Copy on write: a
// lookup is one atomic load, and registering never races a decoder.
var (
	extraAttrs  atomic.Pointer[map[string]attrKey]
	extraAttrMu sync.Mutex
)

// akExtra is the first key registerAttr hands out.
const akExtra attrKey = 128

// registerAttr adds an attribute to what span reduction keeps and returns
// its key: a new gateway's home declares its own attributes with it, in a
// package-level var, without touching the switch. A name already known
// returns its key.
func registerAttr(name string) attrKey {
	if k := lookupAttrKey(name); k != akNone {
		return k
	}
	extraAttrMu.Lock()
	defer extraAttrMu.Unlock()
	old := map[string]attrKey{}
	if m := extraAttrs.Load(); m != nil {
		old = *m
	}
	if k, ok := old[name]; ok {
		return k
	}
	k := akExtra + attrKey(len(old))
	if k < akExtra {
		panic("gateway: more than 128 registered attributes")
	}
	next := make(map[string]attrKey, len(old)+1)
	for n, v := range old {
		next[n] = v
	}
	next[name] = k
	extraAttrs.Store(&next)
	return k
}

// AttrKey names a span attribute the span reduction keeps.
type AttrKey = attrKey

// RegisterAttribute makes span reduction keep the attribute name (for a
// configured span dimension) and returns its key; at most 128 names can be
// registered in one process. Safe while spans are being decoded.
func RegisterAttribute(name string) AttrKey { return registerAttr(name) }

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

// keyed is one attribute a mapper reads.
type keyed struct {
	key attrKey
	val value
}

// attrs are the known attributes of one span or resource, in input order:
// get returns the first of duplicates, as pcommon.Map.Get does.
type attrs []keyed

func (a attrs) get(k attrKey) (value, bool) {
	for i := range a {
		if a[i].key == k {
			return a[i].val, true
		}
	}
	return value{}, false
}

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
	spanKindServer  = 2
	spanKindClient  = 3
	statusCodeError = 2
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
