package traffic

// Limits are an aggregator's bounds on what it holds, across flush windows.
type Limits struct {
	// MaxTuples bounds the distinct tuples held (max_series; 0: none).
	// Events of a new tuple beyond it are folded into its gateway's
	// overflow tuple.
	MaxTuples int
	// MaxGateways bounds the distinct gateway resources (namespace,
	// service.name) held (0: none). Events of a new gateway beyond it are
	// folded into one overflow tuple without a resource.
	MaxGateways int
	// ExpiryWindows: a tuple or gateway unseen for this many flush windows
	// is no longer held (0: never).
	ExpiryWindows int64
	// MaxLabelBytes cuts each string of a tuple to this many bytes (0:
	// none, in tests that do not set it).
	MaxLabelBytes int
}

// held is what an aggregator holds under its Limits: the handles of the
// tuples admitted under MaxTuples (n of them, held) and of overflow tuples,
// by encodeTuple of the tuple (one map, so a new tuple costs one lookup and
// one insert), and the gateways admitted under MaxGateways, each with the
// last window it was used in. A held tuple's handle stays, so the bounds
// hold across windows, until ExpiryWindows without an event; its rows are
// let go when they are evicted (found again on next use: epoch).
type held struct {
	lim      Limits
	handles  map[string]*handle
	n        int
	gateways map[string]heldGateway
	// window counts the windows Take ended: it is the current window's
	// number, which add stamps on the handles it uses.
	window int64
	// epoch moves on when Take has evicted rows, which it reuses: a
	// handle whose epoch is older lets go of its rows on its next use
	// (and finds them again), so no handle uses a reused row. The lazy
	// form of clearing every handle's rows at each eviction, which walked
	// every handle under the lock.
	epoch uint32
	// free are dropped handles, emptied, reused before chunk, the last
	// chunk of handles allocated, of which the first used are taken (an
	// index, as table.used); rowsChunk holds the row pointers of chunk's
	// handles. chunks are every chunk allocated, which Take's sweep walks
	// by index.
	free      []*handle
	chunk     []handle
	rowsChunk []*row
	used      int
	chunks    [][]handle
}

// heldGateway is a gateway admitted under MaxGateways: its key (the string
// every handle of the gateway shares, so a new tuple of a known gateway
// needs no copy of it) and the last window it was used in.
type heldGateway struct {
	key    string
	window int64
}

// overflowTuple is the tuple every event of a new tuple is folded into
// once MaxTuples tuples are held: per gateway resource, its series carry
// only otel.metric.overflow=true.
func overflowTuple(k tuple) tuple {
	return tuple{namespace: k.namespace, gateway: k.gateway, overflow: true}
}

// gatewayOverflow is the one tuple of every gateway (resource) beyond
// MaxGateways: no resource, only otel.metric.overflow=true.
var gatewayOverflow = tuple{overflow: true}

// maxHandlesHint caps the handles map's initial size (about 2.8 MiB of map
// at 65,536 entries).
const maxHandlesHint = 1 << 16

// handlesHint is the handles map's initial size: the most tuples the
// bounds allow (MaxTuples, plus an overflow tuple per gateway and one for
// the rest), so that new tuples never grow the map below maxHandlesHint.
// About 2.8 MiB for the default bounds (capped at 65,536), allocated up
// front; 0 without MaxTuples.
func handlesHint(lim Limits) int {
	if lim.MaxTuples <= 0 {
		return 0
	}
	return min(lim.MaxTuples+lim.MaxGateways+1, maxHandlesHint)
}

// admit finds the handle of a tuple that has none (a.buf.key holds its
// encoding; a held tuple always has one): a new tuple is held if
// MaxTuples and MaxGateways allow, else its events go to its gateway's
// overflow tuple, or to the one tuple of gateways beyond MaxGateways, and
// *k becomes that tuple.
func (a *Aggregator) admit(k *tuple) *handle {
	h := &a.held
	gw := ""
	if k.namespace != "" || k.gateway != "" {
		a.buf.gw = append(append(append(a.buf.gw[:0], k.namespace...), 0), k.gateway...)
		if g, ok := h.gateways[string(a.buf.gw)]; ok {
			gw = g.key // the map's own copy: a new tuple of a held gateway allocates no key
		} else if h.lim.MaxGateways > 0 && len(h.gateways) >= h.lim.MaxGateways {
			a.counts.Overflowed++
			a.counts.GatewaysOverflowed++
			*k = gatewayOverflow
			return a.overflowHandle(k, "")
		} else {
			gw = string(a.buf.gw)
			h.gateways[gw] = heldGateway{key: gw, window: h.window}
		}
	}
	if h.lim.MaxTuples > 0 && h.n >= h.lim.MaxTuples {
		a.counts.Overflowed++
		*k = overflowTuple(*k)
		return a.overflowHandle(k, gw)
	}
	b := h.newHandle(string(a.buf.key), len(a.tables))
	b.gw, b.held, b.window = gw, true, h.window
	h.n++
	return b
}

// overflowHandle is the handle of overflow tuple k, created on first use.
func (a *Aggregator) overflowHandle(k *tuple, gw string) *handle {
	a.buf.key = encodeTuple(a.buf.key[:0], k)
	if b := a.held.handles[string(a.buf.key)]; b != nil {
		return b
	}
	b := a.held.newHandle(string(a.buf.key), len(a.tables))
	b.gw = gw
	return b
}

// sweepHandles is the part of Take's sweep over handles that lets go of
// tuples unused for ExpiryWindows windows (so new ones can be held in their
// place) and of overflow handles unused in window ended (found again on
// next use), and keeps the gateways of the others; the caller holds a.mu.
// It walks the handle chunks from chunk ci and returns where it stopped
// (len(h.chunks) when done), after at most sweepStep handles, so that Take
// can let Add in between steps. Handles Add makes or reuses meanwhile are
// stamped with a later window, and kept.
func (h *held) sweepHandles(ci int, ended int64) int {
	cutoff := ended - h.lim.ExpiryWindows // last used in cutoff or before: idle for ExpiryWindows windows
	for n := 0; ci < len(h.chunks) && n < sweepStep; ci++ {
		chunk := h.chunks[ci]
		n += len(chunk)
		for i := range chunk {
			b := &chunk[i]
			switch {
			case b.key == "": // free, or not used yet
			case b.window >= ended:
				if b.gw != "" {
					h.gateways[b.gw] = heldGateway{key: b.gw, window: ended}
				}
			case !b.held:
				h.drop(b.key, b)
			case h.lim.ExpiryWindows > 0 && b.window <= cutoff:
				h.drop(b.key, b)
				h.n--
			}
		}
	}
	return ci
}

// expireGateways lets go of the gateways unused for ExpiryWindows windows
// up to window ended (sweepHandles kept the used ones' windows).
func (h *held) expireGateways(ended int64) {
	cutoff := ended - h.lim.ExpiryWindows
	for k, g := range h.gateways {
		if g.window <= cutoff {
			delete(h.gateways, k)
		}
	}
}

// HeldTuples is the number of tuples held against MaxTuples.
func (a *Aggregator) HeldTuples() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held.n
}

// newHandle creates the handle of the tuple encoded as key, its rows not
// found yet (resolve does, per view, on first use).
func (h *held) newHandle(key string, views int) *handle {
	var b *handle
	if n := len(h.free); n > 0 {
		b = h.free[n-1]
		h.free[n-1] = nil
		h.free = h.free[:n-1]
	} else {
		if h.used == len(h.chunk) {
			h.chunk = make([]handle, handlesPerChunk)
			h.rowsChunk = make([]*row, handlesPerChunk*views)
			h.chunks = append(h.chunks, h.chunk)
			h.used = 0
		}
		i := h.used
		h.used++
		b = &h.chunk[i]
		b.rows = h.rowsChunk[i*views : (i+1)*views : (i+1)*views]
	}
	b.key, b.epoch = key, h.epoch
	h.handles[key] = b
	return b
}

// drop lets go of the handle of key and keeps it, emptied (key "": Take's
// sweep skips it), for reuse. Nothing else refers to a handle: add holds
// one only while it records an event.
func (h *held) drop(key string, b *handle) {
	delete(h.handles, key)
	rows := b.rows // kept for reuse
	clear(rows)
	*b = handle{rows: rows}
	h.free = append(h.free, b)
}
