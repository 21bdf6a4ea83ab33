package receiver

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
)

// walkPath visits every span and every attribute key and value of an export
// straight from the protobuf bytes, building nothing: the lower bound of a
// receiver that reads the fields it needs without unmarshalling into pdata.
type walkPath struct{ sink int }

func (p *walkPath) Export(body []byte) error {
	n, err := walk(body, 0, p)
	if err == nil && n != SpansPerExport {
		err = errors.New("protowire walk: wrong span count")
	}
	return err
}
func (p *walkPath) Close() error   { return nil }
func (p *walkPath) Counted() int64 { return -1 }

// Message levels (opentelemetry-proto collector/trace/v1, trace/v1,
// resource/v1 and common/v1 field numbers).
const (
	levelRequest  = iota // ExportTraceServiceRequest: resource_spans = 1
	levelRS              // ResourceSpans: resource = 1, scope_spans = 2
	levelResource        // Resource: attributes = 1
	levelScope           // ScopeSpans: spans = 2
	levelSpan            // Span: attributes = 9
	levelKeyValue        // KeyValue: key = 1, value = 2
	levelAnyValue        // AnyValue: string_value = 1, int_value = 3, double_value = 4
)

// below names the level a length-delimited field descends into; -1 for none.
func below(level int, num protowire.Number) int {
	switch {
	case level == levelRequest && num == 1:
		return levelRS
	case level == levelRS && num == 1:
		return levelResource
	case level == levelRS && num == 2:
		return levelScope
	case level == levelResource && num == 1, level == levelSpan && num == 9:
		return levelKeyValue
	case level == levelScope && num == 2:
		return levelSpan
	case level == levelKeyValue && num == 2:
		return levelAnyValue
	}
	return -1
}

// walk returns the spans under b, a message of the given level.
func walk(b []byte, level int, p *walkPath) (int, error) {
	spans := 0
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return 0, protowire.ParseError(m)
			}
			if level == levelAnyValue { // an int or double value
				p.sink += m
			}
			b = b[m:]
			continue
		}
		v, m := protowire.ConsumeBytes(b)
		if m < 0 {
			return 0, protowire.ParseError(m)
		}
		b = b[m:]
		next := below(level, num)
		if next < 0 {
			if level == levelKeyValue || level == levelAnyValue {
				p.sink += len(v) // a key or a string value
			}
			continue
		}
		k, err := walk(v, next, p)
		if err != nil {
			return 0, err
		}
		if next == levelSpan {
			spans++
		} else {
			spans += k
		}
	}
	return spans, nil
}
