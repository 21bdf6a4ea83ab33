package gateway

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// readPdata reduces every ResourceSpans of td (see Count) and maps each
// (endResource); it returns how many spans it examined.
func (c *SpanCounter) readPdata(td ptrace.Traces) (examined int) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		c.res, c.spans, c.attrs = c.res[:0], c.spans[:0], c.attrs[:0]
		c.res = appendKnown(c.res, rs.Resource().Attributes())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			scope := detectScope(ss.Scope().Name())
			spans := ss.Spans()
			examined += spans.Len()
			for k := 0; k < spans.Len(); k++ {
				c.addPdataSpan(spans.At(k), scope)
			}
		}
		c.endResource()
	}
	return examined
}

func (c *SpanCounter) addPdataSpan(s ptrace.Span, scope Kind) {
	lo := len(c.attrs)
	c.attrs = appendKnown(c.attrs, s.Attributes())
	c.spans = append(c.spans, spanRec{
		trace: s.TraceID(), id: s.SpanID(), parent: s.ParentSpanID(),
		kind: int32(s.Kind()), status: int32(s.Status().Code()),
		name: s.Name(), traceState: s.TraceState().AsRaw(), start: uint64(s.StartTimestamp()), end: uint64(s.EndTimestamp()),
		scope: scope, attrLo: int32(lo), attrHi: int32(len(c.attrs)),
	})
}

// appendKnown appends the attributes of m that a mapper reads.
func appendKnown(dst attrs, m pcommon.Map) attrs {
	for k, v := range m.All() {
		if key := lookupAttrKey(k); key != akNone {
			dst = append(dst, keyedOf(key, valueOf(v)))
		}
	}
	return dst
}

// valueOf reduces a pdata value; bytes are copied (rare: no gateway sends
// them), everything else borrows.
func valueOf(v pcommon.Value) value {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return value{typ: vStr, str: v.Str()}
	case pcommon.ValueTypeInt:
		return value{typ: vInt, num: uint64(v.Int())}
	case pcommon.ValueTypeDouble:
		return value{typ: vDouble, num: math.Float64bits(v.Double())}
	case pcommon.ValueTypeBool:
		if v.Bool() {
			return value{typ: vBool, num: 1}
		}
		return value{typ: vBool}
	case pcommon.ValueTypeBytes:
		return value{typ: vBytes, str: string(v.Bytes().AsRaw())}
	case pcommon.ValueTypeEmpty:
		return value{}
	}
	return value{typ: vOther}
}
