package gateway

import "google.golang.org/protobuf/encoding/protowire"

// A receiver in a traces pipeline unmarshals OTLP protobuf into pdata,
// where an empty span (2 bytes on the wire: its tag and a zero length)
// holds ~220 bytes. OTLPProtoCost estimates what that decoding holds, as
// OTLPJSONCost does for JSON, from the elements on the wire.

// protoField is a message field whose elements pdata keeps a struct for:
// the array it is, and the message its elements are (for the walk).
type protoField struct {
	num  protowire.Number
	kind otlpArray
	msg  protoMsg
}

// protoMsg is an OTLP message the walk descends into.
type protoMsg uint8

const (
	costNone protoMsg = iota
	costRequest
	costResourceSpans
	costResource
	costScopeSpans
	costScope
	costSpan
	costEvent
	costLink
	costKeyValue
	costAnyValue
	costArrayValue
	costKeyValueList
	// Metrics (otlp_metrics_cost.go).
	costMetricsRequest
	costResourceMetrics
	costScopeMetrics
	costMetric
	costNumberData  // Gauge, Sum
	costHistData    // Histogram
	costExpData     // ExponentialHistogram
	costSummaryData // Summary
	costNumberPoint
	costHistPoint
	costExpPoint
	costSummaryPoint
	costExemplar
)

// protoFields are, per message, its fields that hold elements or lead to
// them (opentelemetry-proto v1: trace_service.proto, trace.proto,
// resource.proto, common.proto; 1000 is the deprecated
// instrumentation_library_spans pdata still reads as scope_spans).
var protoFields = [...][]protoField{
	costRequest:       {{1, arrayResourceSpans, costResourceSpans}},
	costResourceSpans: {{1, arrayOther, costResource}, {2, arrayScopeSpans, costScopeSpans}, {1000, arrayScopeSpans, costScopeSpans}},
	costResource:      {{1, arrayAttributes, costKeyValue}},
	costScopeSpans:    {{1, arrayOther, costScope}, {2, arraySpans, costSpan}},
	costScope:         {{3, arrayAttributes, costKeyValue}},
	costSpan:          {{9, arrayAttributes, costKeyValue}, {11, arrayEvents, costEvent}, {13, arrayLinks, costLink}},
	costEvent:         {{3, arrayAttributes, costKeyValue}},
	costLink:          {{4, arrayAttributes, costKeyValue}},
	costKeyValue:      {{2, arrayOther, costAnyValue}},
	costAnyValue:      {{5, arrayOther, costArrayValue}, {6, arrayOther, costKeyValueList}},
	costArrayValue:    {{1, arrayValues, costAnyValue}},
	costKeyValueList:  {{1, arrayValues, costKeyValue}},

	costMetricsRequest:  metricsProtoFields[costMetricsRequest],
	costResourceMetrics: metricsProtoFields[costResourceMetrics],
	costScopeMetrics:    metricsProtoFields[costScopeMetrics],
	costMetric:          metricsProtoFields[costMetric],
	costNumberData:      metricsProtoFields[costNumberData],
	costHistData:        metricsProtoFields[costHistData],
	costExpData:         metricsProtoFields[costExpData],
	costSummaryData:     metricsProtoFields[costSummaryData],
	costNumberPoint:     metricsProtoFields[costNumberPoint],
	costHistPoint:       metricsProtoFields[costHistPoint],
	costExpPoint:        metricsProtoFields[costExpPoint],
	costSummaryPoint:    metricsProtoFields[costSummaryPoint],
	costExemplar:        metricsProtoFields[costExemplar],
}

// maxProtoCostDepth bounds the walk's recursion (AnyValues nest); pdata
// refuses values nested past 100 levels, so deeper bytes never decode.
const maxProtoCostDepth = 128

// OTLPProtoCost estimates what unmarshalling ExportTraceServiceRequest b
// into pdata holds: twice its bytes (pdata copies its strings) plus, per
// element of the repeated fields pdata keeps a struct for (resource_spans,
// scope_spans, spans, events, links, attributes, values), what it keeps for
// one (elementBytes). It reads b's tags and lengths only, allocating
// nothing; it stops where b is malformed (pdata refuses it).
func OTLPProtoCost(b []byte) DecodeCost {
	var c DecodeCost
	protoCost(b, costRequest, 0, &c)
	c.Bytes += 2 * int64(len(b))
	return c
}

func protoCost(b []byte, msg protoMsg, depth int, c *DecodeCost) {
	if depth > maxProtoCostDepth {
		return
	}
	fields := protoFields[msg]
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return
		}
		b = b[n:]
		for _, f := range fields {
			if f.num != num {
				continue
			}
			if f.kind != arrayOther {
				c.Elements++
				c.Bytes += elementBytes[f.kind]
				c.count(f.kind)
			}
			protoCost(v, f.msg, depth+1, c)
			break
		}
	}
}
