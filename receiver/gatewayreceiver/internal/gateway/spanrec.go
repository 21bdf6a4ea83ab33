package gateway

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"
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
	akTraefikRouter
	akTraefikService
	akGenAIProvider
	akGenAISystem
	akGenAIReqModel
	akGenAIRespModel
	akGenAIInput
	akGenAIOutput
)

// builtinAttrs is the vocabulary the mappers read, with its keys.
var builtinAttrs = []struct {
	name string
	key  attrKey
}{
	{attrServiceName, akServiceName},
	{attrServiceNS, akServiceNS},
	{attrServiceInst, akServiceInst},
	{attrHostname, akHostname},
	{attrRoute, akRoute},
	{attrMethod, akMethod},
	{attrMethodOld, akMethodOld},
	{attrStatusCode, akStatusCode},
	{attrStatusCodeOld, akStatusCodeOld},
	{attrReqSize, akReqSize},
	{attrReqSizeOld, akReqSizeOld},
	{attrRespSize, akRespSize},
	{attrRespSizeOld, akRespSizeOld},
	{attrNetPeerIP, akNetPeerIP},
	{attrNetPeerPort, akNetPeerPort},
	{attrNetPeerName, akNetPeerName},
	{attrPeerService, akPeerService},
	{attrTryCount, akTryCount},
	{apisixRouteID, akAPISIXRouteID},
	{apisixRouteName, akAPISIXRouteName},
	{apisixServiceID, akAPISIXServiceID},
	{apisixSvcName, akAPISIXServiceName},
	{apisixSource, akAPISIXSource},
	{envoyCluster, akEnvoyCluster},
	{envoyAddress, akEnvoyAddress},
	{envoyFlags, akEnvoyFlags},
	{envoyReqSize, akEnvoyReqSize},
	{envoyRespSize, akEnvoyRespSize},
	{envoyComponent, akEnvoyComponent},
	{traefikRouterName, akTraefikRouter},
	{traefikServiceName, akTraefikService},
	{attrGenAIProvider, akGenAIProvider},
	{attrGenAISystem, akGenAISystem},
	{attrGenAIReqModel, akGenAIReqModel},
	{attrGenAIRespModel, akGenAIRespModel},
	{attrGenAIInput, akGenAIInput},
	{attrGenAIOutput, akGenAIOutput},
}

// lookupAttrKey names the attribute k, akNone when no mapper reads it. It
// runs for every attribute of every span, and most attributes are ones no
// mapper reads, so it is one probe of a small open-addressed table
// (attrTable) in the common case: no string hashing, no allocation, so the
// decoder can ask with a string that borrows its input.
func lookupAttrKey(k string) attrKey {
	t := attrTab.Load()
	if t == nil {
		t = builtinAttrTable
	}
	return t.lookup(k)
}

// attrTable maps attribute names to keys: the built-in vocabulary and the
// registered names. slots, indexed by the top bits of attrHash, hold 1 + the
// index of the name's entry (0: empty); collisions probe the next slots.
// With at most 37 + 128 names in 512 slots, most names the table does not
// hold meet an empty slot at once, and most it holds are found at the
// first probe.
type attrTable struct {
	slots   [attrSlots]uint8
	entries []attrEntry
}

// attrEntry is one name, with its words (attrWords) to compare first.
type attrEntry struct {
	lo, hi uint64
	name   string
	key    attrKey
}

const attrSlots = 512

// attrWords are k's first and last 8 bytes (overlapping when k is shorter
// than 16; both k's bytes when shorter than 8). Two names of the same
// length with the same words are equal when no longer than 16 bytes, and
// every built-in name is; the words are also what the hash mixes, so a
// lookup reads k's bytes once, as two loads.
func attrWords(k string) (lo, hi uint64) {
	b := unsafe.Slice(unsafe.StringData(k), len(k))
	if len(b) >= 8 {
		return binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[len(b)-8:])
	}
	for i := len(b) - 1; i >= 0; i-- {
		lo = lo<<8 | uint64(b[i])
	}
	return lo, lo
}

// attrSlot is where the probe for a name of n bytes and these words starts.
func attrSlot(lo, hi uint64, n int) uint64 {
	return ((lo ^ bits.RotateLeft64(hi, 29) ^ uint64(n)) * 0x9E3779B97F4A7C15) >> (64 - 9) // 0 ≤ slot < 512
}

func (t *attrTable) lookup(k string) attrKey {
	lo, hi := attrWords(k)
	for i := attrSlot(lo, hi, len(k)); ; i = (i + 1) & (attrSlots - 1) {
		j := int(t.slots[i]) - 1
		if j < 0 {
			return akNone
		}
		e := &t.entries[j]
		if e.lo == lo && e.hi == hi && len(e.name) == len(k) && (len(k) <= 16 || e.name[8:len(k)-8] == k[8:len(k)-8]) {
			return e.key
		}
	}
}

// with returns a copy of t holding name too (t may be nil: an empty table).
// A name t holds already keeps its key.
func (t *attrTable) with(name string, key attrKey) *attrTable {
	next := &attrTable{}
	if t != nil {
		if k := t.lookup(name); k != akNone {
			return t
		}
		*next = *t
		next.entries = append([]attrEntry(nil), t.entries...)
	}
	if len(next.entries) >= 255 {
		panic("gateway: attribute table full")
	}
	lo, hi := attrWords(name)
	next.entries = append(next.entries, attrEntry{lo: lo, hi: hi, name: name, key: key})
	i := attrSlot(lo, hi, len(name))
	for next.slots[i] != 0 {
		i = (i + 1) & (attrSlots - 1)
	}
	next.slots[i] = uint8(len(next.entries))
	return next
}

// builtinAttrTable holds builtinAttrs; attrTab, once a name is registered,
// builtinAttrs and the registered names. Copy on write: a lookup is one
// atomic load, and registering never races a decoder.
var (
	builtinAttrTable = func() *attrTable {
		var t *attrTable
		for _, a := range builtinAttrs {
			t = t.with(a.name, a.key)
		}
		return t
	}()
	attrTab     atomic.Pointer[attrTable]
	extraAttrMu sync.Mutex
	// extraAttrs counts the registered names (the next key to hand out).
	extraAttrs int
)

// akExtra is the first key registerAttr hands out.
const akExtra attrKey = 128

// registerAttr adds an attribute to what span reduction keeps and returns
// its key: a new gateway's home declares its own attributes with it, in a
// package-level var, without touching the vocabulary. A name already known
// returns its key.
func registerAttr(name string) attrKey {
	if k := lookupAttrKey(name); k != akNone {
		return k
	}
	extraAttrMu.Lock()
	defer extraAttrMu.Unlock()
	t := attrTab.Load()
	if t == nil {
		t = builtinAttrTable
	}
	if k := t.lookup(name); k != akNone {
		return k
	}
	k := akExtra + attrKey(extraAttrs)
	if k < akExtra {
		panic("gateway: more than 128 registered attributes")
	}
	extraAttrs++
	attrTab.Store(t.with(name, k))
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
