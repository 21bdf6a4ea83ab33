package series

import (
	"context"
	"encoding/binary"
)

// snapshot is a big series' state, copied under its page lock so that the
// series can be written with the lock released, in pieces, and still from
// one consistent state (its buckets, _sum, _count and _created together).
// It copies numbers only: what the series never writes in place (its
// label text, its protobuf labels, its bounds and their texts, all
// immutable once the series has them) it shares. A histogram of 50,000
// buckets costs 400 KB of counts here, against some 5 MB of text; the
// slices are reused from scrape to scrape (released past maxRetained).
type snapshot struct {
	v       view
	d       Dist
	rare    distRare
	native  Native
	ex      exemplars
	counts  []uint64
	values  []float64
	pos     []uint64
	neg     []uint64
	exList  []bucketExemplar
	scratch []byte // the protobuf size pass
}

// takeSnapshot copies what rendering s reads into wr.snap; the caller holds
// s's page lock.
func (wr *Writer) takeSnapshot(f *Family, s *Series, q *Query, proto bool, created int64) {
	sn := &wr.snap
	sn.v = wr.viewOf(f, s, q, proto, created)
	if d := s.dist; d != nil {
		sn.counts = append(sn.counts[:0], d.Counts...)
		sn.d = Dist{Count: d.Count, Sum: d.Sum, HasSum: d.HasSum, Bounds: d.Bounds, Counts: sn.counts}
		if r := d.rare; r != nil {
			sn.rare = distRare{}
			if r.values != nil {
				sn.values = append(sn.values[:0], r.values...)
				sn.rare.values = sn.values
			}
			if n := r.native; n != nil {
				sn.native = *n
				sn.pos = append(sn.pos[:0], n.Pos...)
				sn.neg = append(sn.neg[:0], n.Neg...)
				sn.native.Pos, sn.native.Neg = sn.pos, sn.neg
				sn.rare.native = &sn.native
			}
			sn.d.rare = &sn.rare
		}
		sn.v.d = &sn.d
	}
	if x := sn.v.ex; x != nil {
		sn.exList = append(sn.exList[:0], x.list...)
		sn.ex = exemplars{list: sn.exList, bounds: x.bounds}
		sn.v.ex = &sn.ex
	}
}

// release drops the references the snapshot holds into the table, and the
// slices a huge series grew past maxRetained.
func (sn *snapshot) release() {
	sn.v, sn.d, sn.rare, sn.native, sn.ex = view{}, Dist{}, distRare{}, Native{}, exemplars{}
	clear(sn.exList)
	if cap(sn.counts)*8 > maxRetained {
		sn.counts = nil
	}
	if cap(sn.values)*8 > maxRetained {
		sn.values = nil
	}
	if cap(sn.pos)*8 > maxRetained {
		sn.pos = nil
	}
	if cap(sn.neg)*8 > maxRetained {
		sn.neg = nil
	}
	if cap(sn.exList)*64 > maxRetained {
		sn.exList = nil
	}
	if cap(sn.scratch) > maxRetained {
		sn.scratch = nil
	}
}

// writeTextSnapshot writes the snapshot's lines, flushing whenever the
// buffer passes flushAt.
func (wr *Writer) writeTextSnapshot(ctx context.Context, f *Family, q *Query) error {
	var c cursor
	for {
		var done bool
		wr.buf, done = wr.appendLines(wr.buf, f, &wr.snap.v, q, &c, wr.flushSize())
		if len(wr.buf) >= wr.flushSize() {
			if err := wr.flush(); err != nil {
				return err
			}
			if err := checkScrape(ctx, q); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
	}
}

// writeProtoSnapshot writes the snapshot as a MetricFamily message of its
// own, flushing whenever the buffer passes flushAt. A message is preceded
// by its length, so the value message is rendered twice: once in pieces
// into a scratch buffer to measure it, then in pieces into the buffer.
func (wr *Writer) writeProtoSnapshot(ctx context.Context, f *Family, q *Query) error {
	sn := &wr.snap
	v := &sn.v
	field, hasValue := protoValueField(f.typ, v)
	size := 0
	if hasValue {
		var c cursor
		for done := false; !done; {
			sn.scratch, done = appendProtoValueBody(sn.scratch[:0], f.typ, v, &c, wr.flushSize())
			size += len(sn.scratch)
		}
	}
	metric := len(v.labels)
	if hasValue {
		metric += uvarintSize(field<<3|2) + uvarintSize(uint64(size)) + size
	}
	if v.ts > 0 {
		metric += uvarintSize(6<<3) + uvarintSize(uint64(v.ts/1e6))
	}
	sn.scratch = appendProtoFamilyHeader(sn.scratch[:0], f, q)
	family := len(sn.scratch) + uvarintSize(4<<3|2) + uvarintSize(uint64(metric)) + metric
	wr.buf = binary.AppendUvarint(wr.buf, uint64(family))
	wr.buf = append(wr.buf, sn.scratch...)
	wr.buf = appendTag(wr.buf, 4, 2)
	wr.buf = binary.AppendUvarint(wr.buf, uint64(metric))
	wr.buf = append(wr.buf, v.labels...)
	if hasValue {
		wr.buf = appendTag(wr.buf, field, 2)
		wr.buf = binary.AppendUvarint(wr.buf, uint64(size))
		var c cursor
		written := 0
		for done := false; !done; {
			start := len(wr.buf)
			wr.buf, done = appendProtoValueBody(wr.buf, f.typ, v, &c, wr.flushSize())
			written += len(wr.buf) - start
			if len(wr.buf) >= wr.flushSize() {
				if err := wr.flush(); err != nil {
					return err
				}
				if err := checkScrape(ctx, q); err != nil {
					return err
				}
			}
		}
		if written != size {
			return errSize
		}
	}
	if v.ts > 0 {
		wr.buf = appendVarint(wr.buf, 6, uint64(v.ts/1e6)) // Metric.timestamp_ms
	}
	return nil
}
