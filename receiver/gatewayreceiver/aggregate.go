package gatewayreceiver

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"sort"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/health"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
)

// overflowKey is the tuple every event of a new tuple is folded into once
// max_series tuples are held: per gateway resource, its series carry only
// otel.metric.overflow=true.
func overflowKey(k tupleKey) tupleKey {
	return tupleKey{namespace: k.namespace, gateway: k.gateway, overflow: true}
}

// gatewayOverflowKey is the one tuple of every gateway (resource) beyond
// max_gateways: no resource, only otel.metric.overflow=true.
var gatewayOverflowKey = tupleKey{overflow: true}

// limits are the aggregator's bounds on held state, across flush windows.
type limits struct {
	// maxSeries bounds the distinct label tuples held (0: none); maxGateways
	// the distinct gateway resources (namespace, service.name) (0: none).
	maxSeries, maxGateways int
	// expiryWindows: a tuple or gateway unseen for this many flush windows
	// is no longer held.
	expiryWindows int64
	// maxLabelBytes cuts each string of a tuple to this many bytes (0:
	// none, in tests that do not set it).
	maxLabelBytes int
}

// series is one stream of one family over the current window, as the
// words of its set that hold it: total and sum (float64 bits), count, and
// whether it was updated in this window (emit it). Sums use total;
// histograms count, sum and the family's buckets (len(bounds)+1, the last
// +Inf), which follow the set's series in its words.
//
// Layout: with 10k routes the series outgrow the CPU caches, so each update
// is a memory access. A set's series and buckets are one pointer-free
// array of words (the collector's GC never scans them; a new kong tuple
// writes three), reached through the set's one cache line: an update of a
// histogram touches its series and then its buckets, next to each other.
// What few series have (exemplars, an exponential histogram's buckets)
// sits in the set's extra, reached only by the updates that need it.
type series [seriesWords]uint64

// seriesWords is the words of one series.
const seriesWords = 4

func (s *series) total() float64 { return math.Float64frombits(s[0]) }
func (s *series) count() uint64  { return s[1] }
func (s *series) sum() float64   { return math.Float64frombits(s[2]) }
func (s *series) touched() bool  { return s[3] != 0 }

// touch marks s updated in this window; false if it was already.
func (s *series) touch() bool {
	if s[3] != 0 {
		return false
	}
	s[3] = 1
	return true
}

// addTo adds a window's total, sum and count to s (merge).
func (s *series) addTo(total, sum float64, count uint64) {
	s[0] = math.Float64bits(s.total() + total)
	s[1] += count
	s[2] = math.Float64bits(s.sum() + sum)
}

// seriesExtra is what a series of a set keeps beyond its counts, when it
// keeps any.
type seriesExtra struct {
	// ex is, per bucket, the last sampled request observed in it this
	// window; allocated on the first one (spans with a trace id only). An
	// exponential histogram keeps one, the last.
	ex *[]exemplar
	// exp holds the buckets of an exponential histogram (nil otherwise).
	exp *expoHist
}

// at is the set's series in slot j.
func (set *seriesSet) at(j int) *series {
	return (*series)(set.words[j*seriesWords:][:seriesWords])
}

// extraAt is the extra part of the set's series in slot j, nil when the
// set keeps none.
func (set *seriesSet) extraAt(j int) *seriesExtra {
	if x := set.extra; x != nil {
		return &(*x)[j]
	}
	return nil
}

// ensureExtra is the extra part of the set's series in slot j of n, the
// set's made on first use (its first traced request).
func (set *seriesSet) ensureExtra(j, n int) *seriesExtra {
	if set.extra == nil {
		x := make([]seriesExtra, n)
		set.extra = &x
	}
	return &(*set.extra)[j]
}

// bucketsOf is the explicit histogram buckets of family f (none for other
// families) in the set, fs its place.
func (set *seriesSet) bucketsOf(fs *familyState, f *family) []uint64 {
	n := f.explicitBuckets()
	return set.words[fs.at : fs.at+n : fs.at+n]
}

// exemplar is one observed request that carried a trace: its ids and
// value (in the emitted unit).
type exemplar struct {
	trace [16]byte
	span  [8]byte
	value float64
	set   bool
}

// seriesSet holds the series of the families that share one projection
// (group) for one projected tuple: the otel profile's six request families
// of a route, method and status. They are found with one lookup, created
// together, and live as long as each other: the same bundles hold them.
//
// enc is the projected tuple as encodeKey writes it: the set's identity in
// its group's map (compared whole, after the hash), and its points' labels
// (decodeKey, substrings of enc). A string of some 30 bytes without pointers
// in place of the 328-byte tupleKey per series the sets replace.
//
// 64 bytes: a set's chunk of 32 fills a 2 KiB size class, so every set is
// one aligned cache line.
type seriesSet struct {
	// words are the series of the group's families, seriesWords each in
	// its order (slot j's at j·seriesWords), then the explicit
	// histograms' buckets (family fam's at fams[fam].at).
	words []uint64
	// extra is, per slot, what a series keeps beyond its counts: made for
	// every set of a group with an exponential histogram, else on the set's
	// first exemplar; nil for most sets.
	extra *[]seriesExtra
	next  *seriesSet // the group's next set whose tuple has the same hash
	enc   string
	seen  bool // a bundle that holds it was used in this window (keep it)
	// touched: one of its series was updated in this window (the set is in
	// its group's touched list).
	touched bool
}

// setsPerChunk is how many sets a group allocates at once. Slots of evicted
// sets are reused before a new chunk is allocated, so a chunk kept alive by
// one surviving set costs no more than the sets it held at its peak (which
// max_series bounds), and a new tuple costs a fraction of an allocation.
const setsPerChunk = 32

// group is the state of one projection: its families, and their sets by
// the hash of the projected tuple's encoding, chained on collision (hashing
// one short string costs a fraction of hashing the 19-string tupleKey, and
// a hash key needs no string allocated per set).
type group struct {
	proj *projection
	// mask is proj as the fields it clears, when it only keeps or clears
	// fields (every projection of the profiles does).
	mask projMask
	// fams are the families of the projection, in profile order: slot j of
	// a set is family fams[j]'s series.
	fams []int
	// words is the length of one set's words: its series, then its
	// explicit histograms' buckets.
	words int
	// sets is made on the group's first set, sized as the bundles map (a
	// tuple projects onto one set per group), so that new tuples do not
	// grow it either; a group no event reaches (the LLM families of a
	// gateway without GenAI traffic) costs no map.
	sets map[uint64]*seriesSet
	// free are evicted sets, emptied, reused before chunk; chunk, words
	// and extras are the last chunk allocated, of which the first used
	// sets are taken (an index, not a shrinking slice: a new set writes no
	// pointer to the group, and so takes no write barrier).
	free      []*seriesSet
	chunk     []seriesSet
	wordChunk []uint64
	extras    []seriesExtra
	used      int
	// expo: a family of the group is an exponential histogram (its sets
	// are made with their extra).
	expo bool
	// touched are the sets with a series updated in this window, in the
	// order of their first update: take emits, per family, the updated
	// series of each. One entry per set, not one per series: a new tuple
	// appends once for the six request families of the otel profile.
	touched []*seriesSet
}

// newSet returns an empty set of g, reusing an evicted one when it can.
func (g *group) newSet(fams []family) *seriesSet {
	if n := len(g.free); n > 0 {
		set := g.free[n-1]
		g.free[n-1] = nil
		g.free = g.free[:n-1]
		return set
	}
	if g.used == len(g.chunk) {
		g.chunk = make([]seriesSet, setsPerChunk)
		g.wordChunk = make([]uint64, setsPerChunk*g.words)
		if g.expo {
			g.extras = make([]seriesExtra, setsPerChunk*len(g.fams))
		}
		g.used = 0
	}
	i := g.used
	g.used++
	set := &g.chunk[i]
	n, nw := len(g.fams), g.words
	set.words = g.wordChunk[i*nw : (i+1)*nw : (i+1)*nw]
	if g.expo {
		x := g.extras[i*n : (i+1)*n : (i+1)*n]
		set.extra = &x
		for j, fi := range g.fams {
			if f := &fams[fi]; f.expoSize > 0 {
				x[j].exp = newExpoHist(f.expoSize)
			}
		}
	}
	return set
}

// release empties an evicted set for reuse. Nothing else refers to it:
// take clears every bundle's series when it evicts (and drops overflow
// bundles), and the touched lists are empty.
func (g *group) release(set *seriesSet) {
	set.enc, set.next, set.seen, set.touched = "", nil, false, false
	clear(set.words)
	var extra []seriesExtra
	if set.extra != nil {
		extra = *set.extra
	}
	for j := range extra {
		x := &extra[j]
		if x.ex != nil {
			clear(*x.ex)
		}
		if h := x.exp; h != nil {
			h.reset()
			h.scale, h.base = expoMaxScale, 0 // as newExpoHist: a new series starts at the finest scale
		}
	}
	g.free = append(g.free, set)
}

// add records, in the set's series of family f (fs its place), value v of
// an event that stands for w requests (a sampled span's adjusted count; 1
// otherwise): sums add v·w, histograms observe v w times, and keep traced
// (nil for an event without a trace) as the bucket's exemplar. It returns
// the series.
func (set *seriesSet) add(fs *familyState, f *family, v float64, w uint64, traced *gateway.Event) *series {
	s := set.at(fs.slot)
	if !f.hist {
		s[0] = math.Float64bits(s.total() + v*float64(w))
		return s
	}
	v *= f.scale
	s[1] += w
	s[2] = math.Float64bits(s.sum() + v*float64(w))
	if f.expoSize > 0 {
		x := set.extraAt(fs.slot) // made with the set
		x.exp.observe(v, w)
		if traced != nil {
			x.exemplar(0, 1, traced, v)
		}
		return s
	}
	// Bounds are upper-inclusive, as Prometheus' le.
	i := sort.SearchFloat64s(f.bounds, v)
	set.words[fs.at+i] += w
	if traced != nil {
		set.ensureExtra(fs.slot, fs.fams).exemplar(i, len(f.bounds)+1, traced, v)
	}
	return s
}

// exemplars is x's exemplars, nil when it keeps none (or x is nil).
func (x *seriesExtra) exemplars() []exemplar {
	if x == nil || x.ex == nil {
		return nil
	}
	return *x.ex
}

// exemplar keeps e as bucket i's exemplar (the ids are copied: the event
// borrows its input).
func (x *seriesExtra) exemplar(i, buckets int, e *gateway.Event, v float64) {
	if x.ex == nil {
		ex := make([]exemplar, buckets) // once per series, on its first traced request
		x.ex = &ex
	}
	(*x.ex)[i] = exemplar{trace: e.TraceID, span: e.SpanID, value: v, set: true}
}

// bundle is the handle of one tuple: the series sets of every group that
// an event of that tuple updates, found with one map lookup.
type bundle struct {
	// sets is aligned with aggregator.groups (carved from the chunk of its
	// bundle: one pointer per group, not per family). A group's set is
	// found on the first event that has a value for one of its families: a
	// request without GenAI fields never needs the LLM families' set.
	sets []*seriesSet
	// key is the tuple's encoding, the bundle's key in aggregator.bundles.
	key string
	// gw is the held key of the bundle's gateway ("" for an overflow tuple
	// or a profile without resources), refreshed with the bundle.
	gw string
	// window is the last window a held bundle was used in.
	window int64
	// seen: used in this window. Kept on the bundle, not on each of its
	// series, so an event writes one line instead of one per family; take
	// propagates it to the sets of its series.
	seen bool
	// held: the tuple counts against max_series (overflow tuples do not).
	held bool
}

// bundlesPerChunk is how many bundles the aggregator allocates at once:
// 112 of 72 bytes fill an 8 KiB size class (their set pointers are a
// second chunk, 8 bytes per group per bundle). As with sets, the bundles of
// dropped tuples are reused before a new chunk is allocated, so the chunks
// hold no more bundles than the peak the bounds allow, and a new tuple
// costs a fraction of an allocation (and of the collector's work on it).
const bundlesPerChunk = 112

// familyState is one family's place among the groups.
type familyState struct {
	// A set of groups[group] holds its series at slot (of fams), and an
	// explicit histogram's buckets at at, in its words.
	group, slot, at, fams int
}

// aggregator turns events into per-window series under one profile.
//
// Hot path: encode the event's tuple into one byte string (keyBuf, reused),
// hash it once in one Go map lookup, get its bundle, update every family's
// series through the bundle's pointers. Hashing and comparing one short
// contiguous key costs a fraction of Go's field-by-field hash and equality
// of the 13-string tupleKey (which was half of the aggregation time). No
// allocation once the tuple has been seen: the key is copied only when a
// tuple is first inserted.
//
// Concurrency: addLocked runs with mu held (ingest takes it once per export
// or log batch); take and merge take it themselves. pdata is built from the
// snapshot after mu is released.
type aggregator struct {
	mu   sync.Mutex
	prof *profile
	dims dimensions
	lim  limits
	// identity labels every point with the collector that aggregated it.
	identity health.Identity
	// nodeLabel names the reporting gateway node's label (node_label);
	// "" for none.
	nodeLabel string
	// exemplars: histograms keep a traced request per bucket (exemplars.enabled).
	keepExemplars bool
	// bundles are by encodeKey of the tuple: the tuples admitted under
	// max_series (nHeld of them, held), and overflow tuples. A held tuple's
	// bundle stays, so the bounds hold across windows, until expiryWindows
	// without an event; its series are let go when sets are evicted (found
	// again on next use). One map, so a new tuple costs one lookup and one
	// insert. gateways are the gateways admitted under max_gateways, each
	// with the last window it was used in.
	bundles  map[string]*bundle
	nHeld    int
	gateways map[string]heldGateway
	window   int64
	keyBuf   []byte
	gwBuf    []byte
	famBuf   []byte
	fams     []familyState
	groups   []group
	// unmapped counts events the profile does not count (no route under
	// the kong profile); overflowed counts events folded into an overflow
	// tuple, gatewaysOverflowed those of them folded by max_gateways.
	unmapped, overflowed, gatewaysOverflowed int64
	// truncated counts label values cut to maxLabelBytes.
	truncated int64
	snap      []point
	bucketBuf []uint64
	exBuf     []exemplar

	// freeBundles are dropped bundles, emptied, reused before bundleChunk,
	// the last chunk of bundles allocated, of which the first bundlesUsed
	// are taken (an index, as group.used).
	freeBundles []*bundle
	bundleChunk []bundle
	setsChunk   []*seriesSet // the set pointers of bundleChunk's bundles
	bundlesUsed int
}

// heldGateway is a gateway admitted under max_gateways: its key (the
// string every bundle of the gateway shares, so a new tuple of a known
// gateway needs no copy of it) and the last window it was used in.
type heldGateway struct {
	key    string
	window int64
}

// point is one emitted point of the window: 56 bytes, as a window holds
// one per active series (tens of thousands at 10k routes, kept between
// flushes for reuse).
type point struct {
	// enc is the family's projection of the tuple as encodeKey writes it
	// (the series set's; 16 bytes per point where a tupleKey takes 328: a
	// window holds a point per active series): tuple decodes it.
	enc        string
	total, sum float64
	count      uint64
	fam        int32
	// bucketsStart indexes bucketBuf: a histogram's counts start there; an
	// exponential histogram's layout (expoHeader words) precedes its counts.
	bucketsStart   int32
	exStart, exEnd int32 // into exBuf
}

// tuple is the point's projected tuple; its strings are substrings of enc.
func (p *point) tuple() tupleKey {
	var k tupleKey
	decodeKey(p.enc, &k) // encodeKey wrote it (or a checkpoint decoder checked it)
	return k
}

// expoPoint is the layout of an exponential histogram point: n buckets,
// the first of index offset at scale.
type expoPoint struct {
	scale, offset int32
	n             int
	zero          uint64
}

// expoHeader is the number of bucketBuf words an exponential point's
// layout takes ahead of its counts: scale and offset, n, zero.
const expoHeader = 3

// expoWords is an exponential point's layout as bucketBuf holds it.
func expoWords(e expoPoint) [expoHeader]uint64 {
	return [expoHeader]uint64{uint64(uint32(e.scale))<<32 | uint64(uint32(e.offset)), uint64(e.n), e.zero}
}

// appendExpo appends an exponential point's layout and counts to buf.
func appendExpo(buf []uint64, e expoPoint, counts []uint64) []uint64 {
	w := expoWords(e)
	return append(append(buf, w[:]...), counts...)
}

// expo is exponential point p's layout and counts, as appendExpo wrote them.
func (p *point) expo(buf []uint64) (expoPoint, []uint64) {
	h := buf[p.bucketsStart:]
	e := expoPoint{scale: int32(uint32(h[0] >> 32)), offset: int32(uint32(h[0])), n: int(h[1]), zero: h[2]}
	return e, h[expoHeader:][:e.n]
}

// counts is explicit histogram point p's n bucket counts.
func (p *point) counts(buf []uint64, n int) []uint64 { return buf[p.bucketsStart:][:n] }

func newAggregator(prof *profile, dims dimensions, lim limits) *aggregator {
	a := &aggregator{prof: prof, dims: dims, lim: lim, keepExemplars: true, bundles: make(map[string]*bundle, bundlesHint(lim)),
		gateways: make(map[string]heldGateway)}
	a.fams = make([]familyState, len(prof.families))
	for i := range prof.families {
		f := &prof.families[i]
		gi := 0
		for gi < len(a.groups) && a.groups[gi].proj != f.project {
			gi++
		}
		if gi == len(a.groups) {
			a.groups = append(a.groups, group{proj: f.project, mask: newProjMask(f.project)})
		}
		g := &a.groups[gi]
		a.fams[i].group, a.fams[i].slot = gi, len(g.fams)
		g.fams = append(g.fams, i)
		g.expo = g.expo || f.expoSize > 0
	}
	// A set's words: its series, then its explicit histograms' buckets.
	for gi := range a.groups {
		g := &a.groups[gi]
		g.words = len(g.fams) * seriesWords
		for _, fi := range g.fams {
			fs := &a.fams[fi]
			fs.at, fs.fams = g.words, len(g.fams)
			g.words += prof.families[fi].explicitBuckets()
		}
	}
	return a
}

// maxBundlesHint caps the bundles map's initial size (about 2.8 MiB of
// map at 65,536 entries).
const maxBundlesHint = 1 << 16

// bundlesHint is the bundles map's initial size: the most tuples the bounds
// allow (max_series, plus an overflow tuple per gateway and one for the
// rest), so that new tuples never grow the map below maxBundlesHint. About
// 2.8 MiB for the default bounds (capped at 65,536), allocated up front; 0
// without max_series.
func bundlesHint(lim limits) int {
	if lim.maxSeries <= 0 {
		return 0
	}
	return min(lim.maxSeries+lim.maxGateways+1, maxBundlesHint)
}

// addLocked records one event; the caller holds a.mu. It reports whether
// the profile counted the event.
func (a *aggregator) addLocked(e *gateway.Event) bool {
	k, ok := a.prof.key(e, a.dims)
	if !ok {
		a.unmapped++
		return false
	}
	a.keyBuf = encodeKey(a.keyBuf[:0], &k)
	// No string of a tuple is longer than its whole encoding: only a long
	// encoding (rare) has strings to look at.
	if max := a.lim.maxLabelBytes; max > 0 && len(a.keyBuf) > max {
		if n := capStrings(&k, max); n > 0 {
			a.truncated += int64(n)
			a.keyBuf = encodeKey(a.keyBuf[:0], &k)
		}
	}
	b := a.bundles[string(a.keyBuf)] // no allocation: the compiler borrows keyBuf
	if b == nil {
		b = a.admitLocked(&k) // k becomes the bundle's tuple (an overflow tuple)
	}
	b.seen = true
	// Whether the event carries a trace (an exemplar) is decided once, not
	// per histogram.
	var traced *gateway.Event
	if a.keepExemplars && e.TraceID != ([16]byte{}) {
		traced = e
	}
	w := max(e.Weight, 1)
	for i := range a.prof.families {
		f := &a.prof.families[i]
		v, ok := valueOf(f.measure, e)
		if !ok {
			continue
		}
		fs := &a.fams[i]
		set := b.sets[fs.group]
		if set == nil {
			set = a.resolveLocked(b, fs.group, &k)
		}
		if set.add(fs, f, v, w, traced).touch() {
			a.touchLocked(set, fs.group)
		}
	}
	return true
}

// capStrings cuts each string of k longer than max bytes to at most max, at
// a whole UTF-8 character, and returns how many it cut. The cut strings
// are substrings of the event's: the tuple's encoding copies them.
func capStrings(k *tupleKey, max int) int {
	n := 0
	for _, f := range k.strings() {
		if len(*f) > max {
			*f = gateway.CutLabel(*f, max)
			n++
		}
	}
	return n
}

// touchLocked lists set, of group gi, a series of which was just updated
// for the first time this window, among its group's touched sets, once per
// window.
func (a *aggregator) touchLocked(set *seriesSet, gi int) {
	if !set.touched {
		set.touched = true
		g := &a.groups[gi]
		g.touched = append(g.touched, set)
	}
}

// admitLocked finds the bundle of a tuple that has none (a.keyBuf holds its
// encoding; a held tuple always has one): a new tuple is held if max_series
// and max_gateways allow, else its events go to its gateway's
// overflow tuple, or to the one tuple of gateways beyond max_gateways, and
// *k becomes that tuple.
func (a *aggregator) admitLocked(k *tupleKey) *bundle {
	gw := ""
	if k.namespace != "" || k.gateway != "" {
		a.gwBuf = append(append(append(a.gwBuf[:0], k.namespace...), 0), k.gateway...)
		if held, ok := a.gateways[string(a.gwBuf)]; ok {
			gw = held.key // the map's own copy: a new tuple of a held gateway allocates no key
		} else if a.lim.maxGateways > 0 && len(a.gateways) >= a.lim.maxGateways {
			a.overflowed++
			a.gatewaysOverflowed++
			*k = gatewayOverflowKey
			return a.overflowBundle(k, "")
		} else {
			gw = string(a.gwBuf)
			a.gateways[gw] = heldGateway{key: gw, window: a.window}
		}
	}
	if a.lim.maxSeries > 0 && a.nHeld >= a.lim.maxSeries {
		a.overflowed++
		*k = overflowKey(*k)
		return a.overflowBundle(k, gw)
	}
	b := a.newBundle(string(a.keyBuf))
	b.gw, b.held, b.window = gw, true, a.window
	a.nHeld++
	return b
}

// overflowBundle is the bundle of overflow tuple k, created on first use.
func (a *aggregator) overflowBundle(k *tupleKey, gw string) *bundle {
	a.keyBuf = encodeKey(a.keyBuf[:0], k)
	if b := a.bundles[string(a.keyBuf)]; b != nil {
		return b
	}
	b := a.newBundle(string(a.keyBuf))
	b.gw = gw
	return b
}

// heldTuples is the number of tuples held against max_series.
func (a *aggregator) heldTuples() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nHeld
}

// newBundle creates the bundle of the tuple encoded as encoded, its series
// not found yet (resolveLocked does, per group, on first use).
func (a *aggregator) newBundle(encoded string) *bundle {
	var b *bundle
	if n := len(a.freeBundles); n > 0 {
		b = a.freeBundles[n-1]
		a.freeBundles[n-1] = nil
		a.freeBundles = a.freeBundles[:n-1]
	} else {
		n := len(a.groups)
		if a.bundlesUsed == len(a.bundleChunk) {
			a.bundleChunk = make([]bundle, bundlesPerChunk)
			a.setsChunk = make([]*seriesSet, bundlesPerChunk*n)
			a.bundlesUsed = 0
		}
		i := a.bundlesUsed
		a.bundlesUsed++
		b = &a.bundleChunk[i]
		b.sets = a.setsChunk[i*n : (i+1)*n : (i+1)*n]
	}
	b.key = encoded
	a.bundles[encoded] = b
	return b
}

// dropBundle lets go of the bundle of key and keeps it, emptied, for
// reuse. Nothing else refers to a bundle: addLocked holds one only while
// it records an event.
func (a *aggregator) dropBundle(key string, b *bundle) {
	delete(a.bundles, key)
	sets := b.sets // kept for reuse
	clear(sets)
	*b = bundle{sets: sets}
	a.freeBundles = append(a.freeBundles, b)
}

// resolveLocked points bundle b, of tuple k (a.keyBuf holds its encoding),
// at its set of group gi, sharing the set that other bundles already
// project onto (a latency histogram is shared by every status code), and
// returns it. k's strings may be borrowed: a new set keeps its own
// encoding.
func (a *aggregator) resolveLocked(b *bundle, gi int, k *tupleKey) *seriesSet {
	g := &a.groups[gi]
	var set *seriesSet
	if g.mask.ok && g.mask.whole(k) {
		// The projection keeps the whole tuple (the otel request families
		// of a request without GenAI fields): its encoding is the bundle's.
		set = a.setAt(g, a.keyBuf, b.key)
	} else if g.mask.ok {
		a.famBuf = g.mask.encodeFrom(a.famBuf[:0], a.keyBuf)
		set = a.setAt(g, a.famBuf, "")
	} else if pk := g.proj.keep(*k); pk != *k {
		a.famBuf = encodeKey(a.famBuf[:0], &pk)
		set = a.setAt(g, a.famBuf, "")
	} else {
		set = a.setAt(g, a.keyBuf, b.key) // a projection that is not a mask kept the whole tuple
	}
	b.sets[gi] = set
	return set
}

// projMask is a projection that only keeps or clears fields of the tuple,
// as the fields it clears: it keeps the whole of a tuple whose cleared
// fields are empty already (whole), and the projection's encoding is the
// tuple's with those fields empty (encodeFrom), both told without building,
// comparing and encoding a 328-byte projected tuple. newProjMask finds the
// cleared fields by projecting a tuple whose every field is set;
// TestProjMasks checks, for every profile's projections, that whole and
// encodeFrom agree with keep and encodeKey.
type projMask struct {
	ok bool // keep only keeps or clears fields
	// strs are the string fields cleared, as indexes of strings(); cleared
	// marks them.
	strs    []int
	cleared [tupleStrings]bool
	// The other fields cleared.
	status, port, source, stream, overflow bool
}

// newProjMask is p as a projMask; not ok when p's projection of a tuple
// with every field set has a field that is neither kept nor cleared.
func newProjMask(p *projection) projMask {
	var probe tupleKey
	for i, f := range probe.strings() {
		*f = string(rune('a' + i)) // distinct: a field moved to another is not kept
	}
	probe.status, probe.targetPort, probe.source, probe.stream, probe.overflow = 1, 2, gateway.SourceGateway, true, true
	pk := p.keep(probe)
	var m projMask
	for i, f := range pk.strings() {
		switch *f {
		case *probe.strings()[i]:
		case "":
			m.strs, m.cleared[i] = append(m.strs, i), true
		default:
			return projMask{}
		}
	}
	// The other fields are kept (the probe's value) or cleared (zero).
	if pk.status != 0 && pk.status != probe.status || pk.targetPort != 0 && pk.targetPort != probe.targetPort ||
		pk.source != gateway.SourceUnknown && pk.source != probe.source {
		return projMask{}
	}
	m.status, m.port, m.source = pk.status == 0, pk.targetPort == 0, pk.source == gateway.SourceUnknown
	m.stream, m.overflow = !pk.stream, !pk.overflow
	m.ok = true
	return m
}

// whole reports whether m's projection of k is k itself: the fields it
// clears are empty.
func (m *projMask) whole(k *tupleKey) bool {
	if m.status && k.status != 0 || m.port && k.targetPort != 0 || m.source && k.source != gateway.SourceUnknown ||
		m.stream && k.stream || m.overflow && k.overflow {
		return false
	}
	strs := k.strings()
	for _, i := range m.strs {
		if *strs[i] != "" {
			return false
		}
	}
	return true
}

// encodeFrom appends encodeKey of m's projection of tuple k, read from
// full, encodeKey of k (no projected tuple built): the kept bytes are
// copied in runs (a cleared field that is empty
// already is the byte it encodes to), so a new tuple's projections cost a
// few copies of its encoding, not a walk of its fields.
func (m *projMask) encodeFrom(dst, full []byte) []byte {
	i, run := 0, 0
	for f := range tupleStrings {
		n, w := uint64(full[i]), 1
		if n >= 0x80 {
			n, w = binary.Uvarint(full[i:])
		}
		end := i + w + int(n)
		if m.cleared[f] && n != 0 {
			dst = append(append(dst, full[run:i]...), 0)
			run = end
		}
		i = end
	}
	dst = append(dst, full[run:i]...)
	for _, cleared := range [2]bool{m.status, m.port} {
		_, w := binary.Varint(full[i:])
		if cleared {
			dst = append(dst, 0)
		} else {
			dst = append(dst, full[i:i+w]...)
		}
		i += w
	}
	flags := full[i]
	if m.source {
		flags &= 3
	}
	if m.overflow {
		flags &^= 1
	}
	if m.stream {
		flags &^= 2
	}
	return append(dst, flags)
}

// tupleStrings is the number of string fields of a tuple (strings).
const tupleStrings = 15 + gateway.MaxSpanDimensions

// setAt returns g's set of the projected tuple encoded as enc, creating it;
// a new set keeps encStr when it is enc as a string, else a copy of enc.
func (a *aggregator) setAt(g *group, enc []byte, encStr string) *seriesSet {
	h := maphash.Bytes(seriesSeed, enc)
	head := g.sets[h]
	for set := head; set != nil; set = set.next {
		if set.enc == string(enc) {
			return set
		}
	}
	set := g.newSet(a.prof.families)
	if encStr == "" {
		encStr = string(enc)
	}
	set.enc = encStr
	set.next = head
	if g.sets == nil {
		// Both at the most sets the bounds allow: the window's first sets
		// grow neither.
		g.sets = make(map[uint64]*seriesSet, bundlesHint(a.lim))
		g.touched = make([]*seriesSet, 0, bundlesHint(a.lim))
	}
	g.sets[h] = set
	return set
}

// seriesSeed seeds the family maps' hashes.
var seriesSeed = maphash.MakeSeed()

// strings lists the tuple's string fields, the ones cloneKey copies and
// encodeKey writes: one list, so a new field cannot be missed by either.
func (k *tupleKey) strings() [15 + gateway.MaxSpanDimensions]*string {
	return [...]*string{&k.namespace, &k.gateway, &k.route, &k.method, &k.service, &k.upstream,
		&k.target, &k.consumer, &k.workspace, &k.host, &k.uri, &k.provider, &k.model, &k.clientModel, &k.node,
		&k.dims[0], &k.dims[1], &k.dims[2], &k.dims[3]}
}

// decodeKey reads what encodeKey wrote into k, its strings substrings of
// enc; false when enc is not such a tuple.
func decodeKey(enc string, k *tupleKey) bool {
	for _, p := range k.strings() {
		n, w := uvarintString(enc)
		if w <= 0 || n > uint64(len(enc)-w) {
			return false
		}
		*p, enc = enc[w:w+int(n)], enc[w+int(n):]
	}
	var w1, w2 int
	k.status, w1 = varintString(enc)
	if w1 > 0 {
		k.targetPort, w2 = varintString(enc[w1:])
	}
	if w1 <= 0 || w2 <= 0 || len(enc) != w1+w2+1 {
		return false
	}
	flags := enc[w1+w2]
	k.overflow, k.stream = flags&1 != 0, flags&2 != 0
	k.source = gateway.Source(flags >> 2)
	return true
}

// uvarintString is binary.Uvarint of a string (no copy to a []byte).
func uvarintString(s string) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		c := s[i]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				return 0, -(i + 1) // overflow
			}
			return x | uint64(c)<<shift, i + 1
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	return 0, 0
}

// varintString is binary.Varint of a string.
func varintString(s string) (int64, int) {
	ux, n := uvarintString(s)
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x, n
}

// encodeKey appends k's fields, each string length-prefixed, so two tuples
// encode alike only when they are equal.
func encodeKey(dst []byte, k *tupleKey) []byte {
	for _, f := range k.strings() {
		dst = binary.AppendUvarint(dst, uint64(len(*f)))
		dst = append(dst, *f...)
	}
	dst = binary.AppendVarint(dst, k.status)
	dst = binary.AppendVarint(dst, k.targetPort)
	flags := byte(k.source) << 2
	if k.overflow {
		flags |= 1
	}
	if k.stream {
		flags |= 2
	}
	return append(dst, flags)
}

// take returns the points of the window that just ended and starts a new
// one. Series no bundle used for a whole window are dropped (their sets
// reused; every bundle lets go of its series, found again on next use, and
// overflow bundles are dropped), which bounds the series by the tuples
// active in two consecutive windows; a held tuple keeps only its bundle
// until it expires. The result is reused by the next call.
func (a *aggregator) take() ([]point, []uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.snap, a.bucketBuf, a.exBuf = a.snap[:0], a.bucketBuf[:0], a.exBuf[:0]
	for i := range a.fams {
		fs, f := &a.fams[i], &a.prof.families[i]
		for _, set := range a.groups[fs.group].touched {
			s := set.at(fs.slot)
			if !s.touched() {
				continue // another family of the set was updated, not this one
			}
			p := point{fam: int32(i), enc: set.enc, total: s.total(), sum: s.sum(), count: s.count(),
				bucketsStart: int32(len(a.bucketBuf)), exStart: int32(len(a.exBuf))}
			x := set.extraAt(fs.slot)
			ex := x.exemplars()
			for j := range ex {
				if e := &ex[j]; e.set {
					a.exBuf = append(a.exBuf, *e)
					e.set = false
				}
			}
			p.exEnd = int32(len(a.exBuf))
			if x != nil && x.exp != nil {
				h := x.exp
				off, counts := h.buckets()
				a.bucketBuf = appendExpo(a.bucketBuf, expoPoint{scale: h.scale, offset: off, n: len(counts), zero: h.zero}, counts)
				h.reset()
			}
			buckets := set.bucketsOf(fs, f)
			a.bucketBuf = append(a.bucketBuf, buckets...)
			a.snap = append(a.snap, p)
			*s = series{}
			clear(buckets)
		}
	}
	for i := range a.groups {
		g := &a.groups[i]
		for _, set := range g.touched {
			set.touched = false
		}
		clear(g.touched)
		g.touched = g.touched[:0]
	}
	// A series stays while a bundle that holds it was used this window;
	// the bundle's tuple and gateway stay held.
	for _, b := range a.bundles {
		if b.seen {
			for _, set := range b.sets {
				if set != nil {
					set.seen = true
				}
			}
			b.seen = false
			b.window = a.window
			if b.gw != "" {
				a.gateways[b.gw] = heldGateway{key: b.gw, window: a.window}
			}
		}
	}
	a.expireHeldLocked()
	a.window++
	evicted := false
	for i := range a.groups {
		g := &a.groups[i]
		for h, head := range g.sets {
			kept, removed := g.unchainUnseen(head)
			switch {
			case kept == nil:
				delete(g.sets, h)
			case kept != head:
				g.sets[h] = kept
			}
			evicted = evicted || removed
		}
	}
	if evicted {
		// Drop every pointer to a set: an evicted set is reused.
		for key, b := range a.bundles {
			if b.held {
				clear(b.sets)
			} else {
				a.dropBundle(key, b)
			}
		}
	}
	return a.snap, a.bucketBuf
}

// unchainUnseen drops the sets no bundle used this window from a hash
// chain (released for reuse), clears seen on the others, and returns the
// chain's new head.
func (g *group) unchainUnseen(head *seriesSet) (kept *seriesSet, removed bool) {
	var last *seriesSet
	for set := head; set != nil; {
		next := set.next
		if !set.seen {
			removed = true
			g.release(set)
			set = next
			continue
		}
		set.seen = false
		if last == nil {
			kept = set
		} else {
			last.next = set
		}
		last = set
		set = next
	}
	if last != nil {
		last.next = nil
	}
	return kept, removed
}

// expireHeldLocked lets go of tuples and gateways unused for
// expiryWindows windows, so new ones can be held in their place.
func (a *aggregator) expireHeldLocked() {
	if a.lim.expiryWindows <= 0 {
		return
	}
	cutoff := a.window - a.lim.expiryWindows // last used in cutoff or before: idle for expiryWindows windows
	for k, b := range a.bundles {
		if b.held && b.window <= cutoff {
			a.dropBundle(k, b)
			a.nHeld--
		}
	}
	for k, g := range a.gateways {
		if g.window <= cutoff {
			delete(a.gateways, k)
		}
	}
}

// merge adds points back, used when a flush failed with a retryable error.
func (a *aggregator) merge(points []point, buckets []uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range points {
		fs := &a.fams[p.fam]
		a.famBuf = append(a.famBuf[:0], p.enc...)
		set := a.setAt(&a.groups[fs.group], a.famBuf, p.enc)
		set.seen = true
		s := set.at(fs.slot)
		s.addTo(p.total, p.sum, p.count)
		held := set.bucketsOf(fs, &a.prof.families[p.fam])
		for i, c := range p.counts(buckets, len(held)) {
			held[i] += c
		}
		if x := set.extraAt(fs.slot); x != nil && x.exp != nil {
			e, counts := p.expo(buckets)
			x.exp.merge(e.scale, e.offset, counts, e.zero)
		}
		if s.touch() {
			a.touchLocked(set, fs.group)
		}
	}
}

// gatewayID is the resource a point is reported under (the otel profile's
// service.namespace and service.name; empty for the kong and apisix
// profiles, whose series carry only the gateway plugin's labels).
type gatewayID struct{ namespace, service string }

// toMetrics renders one window as delta points: monotonic sums and
// histograms, one ResourceMetrics per gateway, one metric per family name.
func (a *aggregator) toMetrics(points []point, buckets []uint64, start, now pcommon.Timestamp) pmetric.Metrics {
	md := pmetric.NewMetrics()
	type metricKey struct {
		res  gatewayID
		name string
	}
	scopes := make(map[gatewayID]pmetric.MetricSlice)
	metrics := make(map[metricKey]pmetric.Metric)
	k := new(tupleKey) // one per call: the label writers, called through func values, keep it on the heap
	// attrsLen is, per family, how many attributes its last point got: the
	// next one's map is made that size at once, instead of growing from
	// one entry (four allocations and twice the bytes for five labels).
	attrsLen := make([]int, len(a.prof.families))
	for i := range points {
		p := &points[i]
		f := &a.prof.families[p.fam]
		*k = p.tuple()
		id := gatewayID{k.namespace, k.gateway}
		ms, ok := scopes[id]
		if !ok {
			rm := md.ResourceMetrics().AppendEmpty()
			if id.service != "" {
				rm.Resource().Attributes().PutStr("service.name", id.service)
			}
			if id.namespace != "" {
				rm.Resource().Attributes().PutStr("service.namespace", id.namespace)
			}
			if a.identity.Key != "" && id.service != "" {
				// target_info of a gateway resource names the collector too.
				rm.Resource().Attributes().PutStr(a.identity.Key, a.identity.Value)
			}
			sm := rm.ScopeMetrics().AppendEmpty()
			sm.Scope().SetName(metadata.ScopeName)
			ms = sm.Metrics()
			scopes[id] = ms
		}
		mk := metricKey{id, f.name}
		m, ok := metrics[mk]
		if !ok {
			m = ms.AppendEmpty()
			m.SetName(f.name)
			m.SetUnit(f.unit)
			m.SetDescription(f.desc)
			switch {
			case f.expoSize > 0:
				m.SetEmptyExponentialHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
			case f.hist:
				m.SetEmptyHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
			default:
				sum := m.SetEmptySum()
				sum.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
				sum.SetIsMonotonic(true)
			}
			metrics[mk] = m
		}
		var attrs pcommon.Map
		switch {
		case f.expoSize > 0:
			dp := m.ExponentialHistogram().DataPoints().AppendEmpty()
			dp.SetStartTimestamp(start)
			dp.SetTimestamp(now)
			dp.SetCount(p.count)
			dp.SetSum(p.sum)
			e, counts := p.expo(buckets)
			dp.SetScale(e.scale)
			dp.SetZeroCount(e.zero)
			dp.Positive().SetOffset(e.offset)
			dp.Positive().BucketCounts().FromRaw(counts)
			a.exemplars(dp.Exemplars(), p, now)
			attrs = dp.Attributes()
		case f.hist:
			dp := m.Histogram().DataPoints().AppendEmpty()
			dp.SetStartTimestamp(start)
			dp.SetTimestamp(now)
			dp.SetCount(p.count)
			dp.SetSum(p.sum)
			dp.ExplicitBounds().FromRaw(f.bounds)
			dp.BucketCounts().FromRaw(p.counts(buckets, len(f.bounds)+1))
			a.exemplars(dp.Exemplars(), p, now)
			attrs = dp.Attributes()
		default:
			dp := m.Sum().DataPoints().AppendEmpty()
			dp.SetStartTimestamp(start)
			dp.SetTimestamp(now)
			if f.double {
				dp.SetDoubleValue(p.total)
			} else {
				// Requests, bytes and tokens: whole numbers.
				dp.SetIntValue(int64(p.total))
			}
			attrs = dp.Attributes()
		}
		attrs.EnsureCapacity(attrsLen[p.fam])
		if k.overflow {
			attrs.PutBool("otel.metric.overflow", true)
			if f.constKey != "" {
				attrs.PutStr(f.constKey, f.constVal)
			}
		} else {
			writeLabels(f, k, attrs)
		}
		if f.spanDims && !k.overflow {
			for i, sd := range a.dims.span {
				if v := k.dims[i]; v != "" || sd.def != nil {
					attrs.PutStr(sd.name, v)
				}
			}
		}
		if a.nodeLabel != "" && !k.overflow {
			attrs.PutStr(a.nodeLabel, k.node)
		}
		if a.identity.Key != "" {
			attrs.PutStr(a.identity.Key, a.identity.Value)
		}
		attrsLen[p.fam] = attrs.Len()
	}
	return md
}

// exemplars writes a histogram point's exemplars.
func (a *aggregator) exemplars(dst pmetric.ExemplarSlice, p *point, now pcommon.Timestamp) {
	for _, x := range a.exBuf[p.exStart:p.exEnd] {
		ex := dst.AppendEmpty()
		ex.SetTimestamp(now)
		ex.SetDoubleValue(x.value)
		ex.SetTraceID(x.trace)
		ex.SetSpanID(x.span)
	}
}

// writeLabels writes a point's attributes in the gateway's label order, the
// family's constant attribute at its place among them (pcommon.Map keeps
// insertion order, and the exporter can keep it: label_order as_received).
func writeLabels(f *family, k *tupleKey, attrs pcommon.Map) {
	if f.constKey == "" || f.constAt < 0 {
		f.labels(k, attrs)
		if f.constKey != "" {
			attrs.PutStr(f.constKey, f.constVal)
		}
		return
	}
	labels := pcommon.NewMap() // once per flushed point, not per event
	f.labels(k, labels)
	i := 0
	for key, v := range labels.All() {
		if i == f.constAt {
			attrs.PutStr(f.constKey, f.constVal)
		}
		v.CopyTo(attrs.PutEmpty(key))
		i++
	}
	if i <= f.constAt {
		attrs.PutStr(f.constKey, f.constVal)
	}
}
