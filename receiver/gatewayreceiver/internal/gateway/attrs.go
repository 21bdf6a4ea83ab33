package gateway

import (
	"encoding/binary"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Which span and resource attributes span reduction keeps: the names the
// mappers read (the built-in vocabulary, and those a gateway's home or a
// configured span dimension registers), each numbered by an attrKey, and the
// table a decoder looks every attribute name up in.

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
