package series

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"unsafe"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
)

// The Prometheus protobuf format (io.prometheus.client.MetricFamily, as
// length-delimited messages) is written by hand: each field is a tag and a
// value, and building dto structs per series per scrape is the cost this
// exporter exists to avoid. Field numbers are those of
// prometheus/client_model metrics.proto.

// Native holds an exponential histogram in the form of a Prometheus native
// histogram: schema, zero bucket and one span of consecutive buckets per
// side (a span may contain empty buckets, which the format allows).
type Native struct {
	Schema        int32
	ZeroThreshold float64
	ZeroCount     uint64
	// PosOffset and NegOffset are Prometheus bucket indexes of the first
	// bucket of each span (Prometheus index i covers (base^(i-1), base^i]).
	PosOffset, NegOffset int32
	Pos, Neg             []uint64 // absolute counts per bucket
}

// Family type numbers of MetricType.
func protoType(t exposition.Type) uint64 {
	switch t {
	case exposition.TypeCounter:
		return 0
	case exposition.TypeGauge:
		return 1
	case exposition.TypeSummary:
		return 2
	case exposition.TypeHistogram:
		return 4
	default:
		return 3
	}
}

func appendTag(dst []byte, field, wire uint64) []byte {
	return binary.AppendUvarint(dst, field<<3|wire)
}

func appendString(dst []byte, field uint64, s []byte) []byte {
	dst = appendTag(dst, field, 2)
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendDouble(dst []byte, field uint64, v float64) []byte {
	dst = appendTag(dst, field, 1)
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
}

func appendVarint(dst []byte, field, v uint64) []byte {
	dst = appendTag(dst, field, 0)
	return binary.AppendUvarint(dst, v)
}

// appendTimestamp writes a google.protobuf.Timestamp field (seconds = 1,
// nanos = 2) for a time in unix nanoseconds; nothing when it is not
// positive (unknown).
func appendTimestamp(dst []byte, field uint64, unixNano int64) []byte {
	if unixNano <= 0 {
		return dst
	}
	return message(dst, field, func(b []byte) []byte {
		b = appendVarint(b, 1, uint64(unixNano/1e9))
		if nanos := unixNano % 1e9; nanos != 0 {
			b = appendVarint(b, 2, uint64(nanos))
		}
		return b
	})
}

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// message wraps the bytes appended by body as a length-delimited field. It
// reserves the worst-case length prefix and moves the body back when the
// length is shorter, so no second buffer is needed.
func message(dst []byte, field uint64, body func([]byte) []byte) []byte {
	dst = appendTag(dst, field, 2)
	const reserve = binary.MaxVarintLen32
	start := len(dst)
	dst = append(dst, make([]byte, reserve)...)
	dst = body(dst)
	n := len(dst) - start - reserve
	var prefix [binary.MaxVarintLen64]byte
	p := binary.PutUvarint(prefix[:], uint64(n))
	copy(dst[start:], prefix[:p])
	copy(dst[start+p:], dst[start+reserve:])
	return dst[:start+p+n]
}

// protoLabels returns the series' labels as encoded LabelPair fields, built
// on the first protobuf scrape from the text rendering and kept, an exact
// copy (the caller holds the page lock). scratch is the Writer's.
func (s *Series) protoLabels(e exposition.Escaping, scratch *[]byte, f *Family) string {
	utf8 := s.utf8() != ""
	if utf8 && e != exposition.EscapeUnderscores && e != exposition.EscapeNone {
		// The dots or values scheme of a UTF-8 series: rendered at scrape
		// time (labelsFor), so not kept either (rare; allocates).
		return string(encodeLabelPairs(nil, s.labelsFor(e, scratch, f)))
	}
	if x := s.extra; x != nil {
		if cache := x.protoCache(e, utf8); cache.p != nil {
			return cache.String() // the label text is not even read
		}
	}
	rendered := s.labelsFor(e, scratch, f)
	if rendered == "" {
		return "" // no LabelPair, nothing to keep
	}
	if s.extra == nil {
		s.extra = new(seriesExtra)
	}
	// rendered is the series' own (labelsFor wrote nothing into scratch
	// for these schemes), so scratch can hold the encoding.
	cache := s.extra.protoCache(e, utf8)
	*scratch = encodeLabelPairs((*scratch)[:0], rendered)
	*cache = newText(*scratch)
	return cache.String()
}

// protoCache is where the LabelPair encoding of escaping e is kept for a
// series (utf8: one with a UTF-8 rendering).
func (x *seriesExtra) protoCache(e exposition.Escaping, utf8 bool) *text {
	if e == exposition.EscapeNone && utf8 {
		return &x.protoUTF8
	}
	return &x.proto
}

// encodeLabelPairs turns our own rendering `a="x",b="y"` (names possibly
// quoted, values escaped) into LabelPair fields.
func encodeLabelPairs(dst []byte, text string) []byte {
	if dst == nil {
		dst = make([]byte, 0, len(text)+16) // a pair's encoding is 2 bytes longer than its text
	}
	for len(text) > 0 {
		var name, value []byte
		name, text = readToken(text)
		text = text[1:] // '='
		value, text = readToken(text)
		if len(text) > 0 {
			text = text[1:] // ','
		}
		dst = message(dst, 1, func(b []byte) []byte {
			b = appendString(b, 1, name)
			return appendString(b, 2, value)
		})
	}
	return dst
}

// readToken reads a bare name or a quoted, escaped string.
func readToken(b string) (tok []byte, rest string) {
	if len(b) == 0 || b[0] != '"' {
		i := 0
		for i < len(b) && b[i] != '=' && b[i] != ',' {
			i++
		}
		return []byte(b[:i]), b[i:] // once per series, on its first protobuf scrape
	}
	var out []byte
	i := 1
	for ; i < len(b) && b[i] != '"'; i++ {
		if b[i] == '\\' && i+1 < len(b) {
			i++
			if b[i] == 'n' {
				out = append(out, '\n')
				continue
			}
		}
		out = append(out, b[i])
	}
	return out, b[i+1:]
}

// appendProtoFamilyHeader writes a MetricFamily's name, help and type
// fields: each MetricFamily message the writer opens for a family (one per
// page or part of a page; Prometheus's parser reads each on its own).
func appendProtoFamilyHeader(dst []byte, f *Family, q *Query) []byte {
	name := f.names[q.Escaping].base
	if f.names[q.Escaping].quoted {
		name = f.name
	}
	dst = appendString(dst, 1, unsafe.Slice(unsafe.StringData(name), len(name)))
	if f.help != "" {
		dst = appendString(dst, 2, unsafe.Slice(unsafe.StringData(f.help), len(f.help)))
	}
	return appendVarint(dst, 3, protoType(f.typ))
}

// appendProtoSeries writes one series' Metric message (field 4 of the open
// MetricFamily); the caller holds its page lock. Like appendSeries it reads
// the series' fields itself; appendProtoValueBody writes a big series'
// snapshot with the same functions.
func (wr *Writer) appendProtoSeries(dst []byte, f *Family, s *Series, q *Query, created int64) []byte {
	labels := s.protoLabels(q.Escaping, &wr.scratch, f)
	var ts int64
	if f.table.opts.Timestamps {
		ts = s.ts.Load()
	}
	return message(dst, 4, func(b []byte) []byte {
		b = append(b, labels...)
		b = appendProtoValue(b, f.typ, s, created)
		if ts > 0 {
			b = appendVarint(b, 6, uint64(ts/1e6)) // Metric.timestamp_ms
		}
		return b
	})
}

func appendProtoValue(b []byte, t exposition.Type, s *Series, created int64) []byte {
	var c cursor
	switch t {
	case exposition.TypeCounter:
		return message(b, 3, func(b []byte) []byte {
			return appendProtoCounter(b, s.bits.Load(), s.ex, created)
		})
	case exposition.TypeGauge:
		return message(b, 2, func(b []byte) []byte { return appendDouble(b, 1, math.Float64frombits(s.bits.Load())) })
	case exposition.TypeSummary:
		d := s.dist
		if d == nil {
			return b
		}
		return message(b, 4, func(b []byte) []byte {
			b, _ = appendProtoSummary(b, d, created, &c, math.MaxInt)
			return b
		})
	case exposition.TypeHistogram:
		d := s.dist
		if d == nil {
			return b
		}
		return message(b, 7, func(b []byte) []byte {
			b, _ = appendProtoHistogram(b, d, created, s.ex, &c, math.MaxInt)
			return b
		})
	default:
		return message(b, 5, func(b []byte) []byte { return appendDouble(b, 1, math.Float64frombits(s.bits.Load())) })
	}
}

// protoValueField is the Metric field of a series' value message; false
// for a histogram or summary that has no values yet.
func protoValueField(t exposition.Type, v *view) (uint64, bool) {
	switch t {
	case exposition.TypeCounter:
		return 3, true
	case exposition.TypeGauge:
		return 2, true
	case exposition.TypeSummary:
		return 4, v.d != nil
	case exposition.TypeHistogram:
		return 7, v.d != nil
	default:
		return 5, true // untyped
	}
}

// appendProtoValueBody writes the body of a big series' value message from
// its snapshot v, from where c says, and reports whether it wrote the end;
// a histogram or summary stops once dst passes limit after a bucket,
// quantile, exemplar or span delta, so that it is written (and measured,
// snapshot.go) in pieces. Pieces concatenate to exactly the body written in
// one call.
func appendProtoValueBody(b []byte, t exposition.Type, v *view, c *cursor, limit int) ([]byte, bool) {
	switch t {
	case exposition.TypeCounter:
		return appendProtoCounter(b, v.bits, v.ex, v.created), true
	case exposition.TypeSummary:
		return appendProtoSummary(b, v.d, v.created, c, limit)
	case exposition.TypeHistogram:
		return appendProtoHistogram(b, v.d, v.created, v.ex, c, limit)
	default: // gauge, untyped
		return appendDouble(b, 1, math.Float64frombits(v.bits)), true
	}
}

func appendProtoCounter(b []byte, bits uint64, ex *exemplars, created int64) []byte {
	b = appendDouble(b, 1, math.Float64frombits(bits))
	if ex != nil && len(ex.list) > 0 {
		b = appendProtoExemplar(b, 2, &ex.list[0].Exemplar) // Counter.exemplar
	}
	return appendTimestamp(b, 3, created) // Counter.created_timestamp
}

func appendProtoSummary(b []byte, d *Dist, created int64, c *cursor, limit int) ([]byte, bool) {
	if c.phase == 0 {
		b = appendVarint(b, 1, d.Count)
		b = appendDouble(b, 2, d.Sum)
		c.phase = 1
	}
	values := d.Values()
	for c.i < len(values) {
		i := c.i
		b = message(b, 3, func(b []byte) []byte {
			b = appendDouble(b, 1, d.Bounds[i])
			return appendDouble(b, 2, values[i])
		})
		c.i++
		if len(b) >= limit && c.i < len(values) {
			return b, false
		}
	}
	return appendTimestamp(b, 4, created), true // Summary.created_timestamp
}

// Phases of appendProtoHistogram.
const (
	histHead = iota
	histBuckets
	histInf
	histNativeExemplars
	histNative
	histNegDeltas
	histPosSide
	histPosDeltas
)

// appendProtoHistogram writes a Histogram message's body from where c
// says: count, sum, start time, buckets (with their exemplars), the +Inf
// bucket when it has an exemplar, and, for a native histogram, its
// exemplars, schema, zero bucket and spans with their deltas.
func appendProtoHistogram(b []byte, d *Dist, created int64, ex *exemplars, c *cursor, limit int) ([]byte, bool) {
	if c.phase == histHead {
		b = appendVarint(b, 1, d.Count)
		if d.HasSum {
			b = appendDouble(b, 2, d.Sum)
		}
		b = appendTimestamp(b, 15, created) // Histogram.created_timestamp
		c.phase, c.i = histBuckets, 0
	}
	if c.phase == histBuckets {
		for c.i < len(d.Counts) {
			i := c.i
			b = message(b, 3, func(b []byte) []byte {
				b = appendVarint(b, 1, d.Counts[i])
				b = appendDouble(b, 2, d.Bounds[i])
				if ex != nil {
					if e := ex.at(i, &c.j); e != nil {
						b = appendProtoExemplar(b, 3, e) // Bucket.exemplar
					}
				}
				return b
			})
			c.i++
			if len(b) >= limit && c.i < len(d.Counts) {
				return b, false
			}
		}
		c.phase = histInf
	}
	n := d.Native()
	if c.phase == histInf {
		if ex != nil {
			if e := ex.at(len(d.Counts), &c.j); e != nil {
				// The +Inf bucket is optional in protobuf; it is written only
				// to carry its exemplar.
				b = message(b, 3, func(b []byte) []byte {
					b = appendVarint(b, 1, d.Count)
					b = appendDouble(b, 2, math.Inf(1))
					return appendProtoExemplar(b, 3, e)
				})
			}
		}
		if n == nil {
			return b, true
		}
		c.phase, c.i = histNativeExemplars, 0
		if len(b) >= limit {
			return b, false
		}
	}
	if c.phase == histNativeExemplars {
		if ex != nil {
			// Histogram.exemplars: a native histogram's (Prometheus keeps
			// only those with a timestamp).
			for c.i < len(ex.list) {
				e := &ex.list[c.i].Exemplar
				c.i++
				if e.Time > 0 {
					b = appendProtoExemplar(b, 16, e)
					if len(b) >= limit && c.i < len(ex.list) {
						return b, false
					}
				}
			}
		}
		c.phase = histNative
	}
	if c.phase == histNative {
		b = appendVarint(b, 5, zigzag(int64(n.Schema)))
		b = appendDouble(b, 6, n.ZeroThreshold)
		b = appendVarint(b, 7, n.ZeroCount)
		b = appendSpan(b, 9, 10, n.NegOffset, n.Neg)
		c.phase, c.i = histNegDeltas, 0
	}
	if c.phase == histNegDeltas {
		var done bool
		if b, done = appendDeltas(b, n.Neg, c, limit); !done {
			return b, false
		}
		c.phase = histPosSide
	}
	if c.phase == histPosSide {
		b = appendSpan(b, 12, 13, n.PosOffset, n.Pos)
		c.phase, c.i = histPosDeltas, 0
	}
	return appendDeltas(b, n.Pos, c, limit)
}

// appendSpan writes the one span of one side of a native histogram and the
// head of its deltas field (tag and length; appendDeltas writes the
// deltas), or nothing for a side without buckets.
func appendSpan(b []byte, spanField, deltaField uint64, offset int32, counts []uint64) []byte {
	if len(counts) == 0 {
		return b
	}
	b = message(b, spanField, func(b []byte) []byte {
		b = appendVarint(b, 1, zigzag(int64(offset)))
		return appendVarint(b, 2, uint64(len(counts)))
	})
	size := 0
	var prev int64
	for _, c := range counts {
		size += uvarintSize(zigzag(int64(c) - prev))
		prev = int64(c)
	}
	b = appendTag(b, deltaField, 2)
	return binary.AppendUvarint(b, uint64(size))
}

// appendDeltas writes the delta-encoded counts of one side from c.i.
func appendDeltas(b []byte, counts []uint64, c *cursor, limit int) ([]byte, bool) {
	for c.i < len(counts) {
		var prev int64
		if c.i > 0 {
			prev = int64(counts[c.i-1])
		}
		b = binary.AppendUvarint(b, zigzag(int64(counts[c.i])-prev))
		c.i++
		if len(b) >= limit && c.i < len(counts) {
			return b, false
		}
	}
	return b, true
}

var traceIDName, spanIDName = []byte("trace_id"), []byte("span_id")

// appendProtoExemplar writes an Exemplar message (labels trace_id and
// span_id in hex, value, timestamp) as field.
func appendProtoExemplar(b []byte, field uint64, e *Exemplar) []byte {
	return message(b, field, func(b []byte) []byte {
		if e.TraceID != ([16]byte{}) {
			var h [32]byte
			hex.Encode(h[:], e.TraceID[:])
			b = message(b, 1, func(b []byte) []byte {
				b = appendString(b, 1, traceIDName)
				return appendString(b, 2, h[:])
			})
		}
		if e.SpanID != ([8]byte{}) {
			var h [16]byte
			hex.Encode(h[:], e.SpanID[:])
			b = message(b, 1, func(b []byte) []byte {
				b = appendString(b, 1, spanIDName)
				return appendString(b, 2, h[:])
			})
		}
		b = appendDouble(b, 2, e.Value)
		return appendTimestamp(b, 3, e.Time)
	})
}
