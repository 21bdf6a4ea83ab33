package traffic

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"

	ckpt "github.com/otelgateway/otelgateway/internal/checkpoint"
)

// A window's points, as the receiver's checkpoint keeps them (its points
// section), little-endian, lengths and counts as uvarints:
//
//	n, then per point: family index, label set (encodeTuple,
//	length-prefixed), f64 total, f64 sum, count, buckets: n then n
//	uvarints, and for an exponential family: scale, offset (varints),
//	zero count.
//
// Exemplars are not kept. The family indexes and bucket layouts mean
// something only under the configuration that wrote them: Fingerprint
// tells whether a checkpoint was.

// Fingerprint hashes what the meaning of saved points depends on: family
// indexes, bucket layouts, tuple fields and the labels every point
// carries.
func (a *Aggregator) Fingerprint() uint64 {
	h := fnv.New64a()
	w := func(s string) { _, _ = h.Write(append([]byte(s), 0)) }
	w(a.prof.name)
	for _, f := range a.fams {
		w(f.name)
		w(strconv.Itoa(f.expoSize))
		for _, b := range f.bounds {
			w(strconv.FormatFloat(b, 'g', -1, 64))
		}
	}
	d := a.dims
	w(fmt.Sprint(d.Service, d.Upstream, d.Target, d.Consumer, d.Source, d.PreferName, d.Node))
	if d.PerConsumer {
		w("per_consumer") // only when set: a checkpoint of a config without it still matches
	}
	for _, sd := range d.Span {
		w(sd.Name)
		if sd.Default != nil {
			w("=" + *sd.Default)
		}
	}
	w(a.labels.collector.Key + "=" + a.labels.collector.Value)
	w(a.labels.node)
	return h.Sum64()
}

// AppendPoints appends the first n points of w, encoded.
func (w *Window) AppendPoints(dst []byte, n int) []byte {
	dst = binary.AppendUvarint(dst, uint64(n))
	for i := range w.points[:n] {
		p := &w.points[i]
		f := &w.a.fams[p.fam]
		dst = binary.AppendUvarint(dst, uint64(p.fam))
		dst = binary.AppendUvarint(dst, uint64(len(p.enc)))
		dst = append(dst, p.enc...)
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(p.total))
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(p.sum))
		dst = binary.AppendUvarint(dst, p.count)
		var counts []uint64
		var e expoPoint
		switch {
		case f.expoSize > 0:
			e, counts = p.expo(w.buckets)
		case f.hist:
			counts = p.counts(w.buckets, len(f.bounds)+1)
		}
		dst = binary.AppendUvarint(dst, uint64(len(counts)))
		for _, b := range counts {
			dst = binary.AppendUvarint(dst, b)
		}
		if f.expoSize > 0 {
			dst = binary.AppendVarint(dst, int64(e.scale))
			dst = binary.AppendVarint(dst, int64(e.offset))
			dst = binary.AppendUvarint(dst, e.zero)
		}
	}
	return dst
}

// ReadPoints reads points AppendPoints wrote into a new window of a's. A
// point that is not one of a's (family, label set, bucket layout) fails d;
// the window is then not to be used.
func (a *Aggregator) ReadPoints(d *ckpt.Decoder) *Window {
	w := &Window{a: a}
	for m := d.Count(8); m > 0 && d.Err == nil; m-- {
		w.points = append(w.points, w.readPoint(d))
	}
	return w
}

// readPoint reads one point, its buckets appended to w's.
func (w *Window) readPoint(d *ckpt.Decoder) point {
	fams := w.a.fams
	fam := d.Uvarint()
	if d.Err != nil || fam >= uint64(len(fams)) {
		d.Fail("family %d of %d", fam, len(fams))
		return point{}
	}
	f := &fams[fam]
	p := point{fam: int32(fam), enc: string(d.Bytes())}
	var k tuple
	if !decodeTuple(p.enc, &k) {
		d.Fail("bad tuple")
	}
	p.total = math.Float64frombits(d.U64())
	p.sum = math.Float64frombits(d.U64())
	p.count = d.Uvarint()
	n := d.Count(1)
	p.bucketsStart = int32(len(w.buckets))
	if f.expoSize > 0 {
		var layout [expoHeader]uint64 // written below, once read (it follows the counts)
		w.buckets = append(w.buckets, layout[:]...)
	}
	for range n {
		w.buckets = append(w.buckets, d.Uvarint())
	}
	switch {
	case f.expoSize > 0:
		e := expoPoint{scale: int32(d.Varint()), offset: int32(d.Varint()), n: n, zero: d.Uvarint()}
		if n > f.expoSize || e.scale > expoMaxScale {
			d.Fail("exponential point of %d buckets at scale %d", n, e.scale)
		}
		ew := expoWords(e)
		copy(w.buckets[p.bucketsStart:], ew[:])
	case f.hist && n != len(f.bounds)+1, !f.hist && n != 0:
		d.Fail("%d buckets for %s", n, f.name)
	}
	return p
}
