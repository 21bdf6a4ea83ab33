package gateway

import (
	"bytes"
	"errors"
	"strconv"
)

// OTLP JSON is decoded by pdata, which keeps a struct per element: a span
// written as {} (3 bytes with its comma) becomes some 220 bytes, so a 20 MiB
// body of empty spans held over 4 GB of the collector's memory, where a
// weight per body byte charged 80 MiB. OTLPJSONCost estimates what the
// decoding holds from the elements themselves, before pdata sees a byte.

// DecodeCost is what decoding an OTLP export into pdata holds, estimated.
type DecodeCost struct {
	// Bytes is the estimate: twice the body's bytes (pdata copies its
	// strings, and its decoder keeps a buffer of about the body's size)
	// plus, per element of the arrays below, what pdata keeps for it.
	Bytes int64
	// Spans counts the elements of "spans" arrays, Points the data points
	// of a metrics export; Elements those of every array counted (spans
	// and points included).
	Spans, Points, Elements int64
}

// otlpArray is an OTLP JSON array whose elements pdata keeps a struct for.
type otlpArray uint8

const (
	arrayOther otlpArray = iota // nothing kept per element (pdata skips unknown fields)
	arrayResourceSpans
	arrayScopeSpans
	arraySpans
	arrayEvents
	arrayLinks
	arrayAttributes
	arrayValues
	// Metrics (otlp_metrics_cost.go).
	arrayResourceMetrics
	arrayScopeMetrics
	arrayMetrics
	arrayNumberPoints
	arrayHistPoints
	arrayExpPoints
	arraySummaryPoints
	arrayExemplars
	arrayQuantiles
	// arrayPoints: a JSON "dataPoints" array, whatever its metric's type
	// (the scan does not know it): costed as the dearest kind.
	arrayPoints
)

// elementBytes is what pdata (v1.71.0) keeps per element of each array,
// measured on this machine (heap after a collection, empty elements, per
// element: resourceSpans 137.5, scopeSpans 121.5, spans 217.5, events 73.5,
// links 89.5, attributes 45.3, kvlist values 45.3, array values 18.5;
// an attribute with a key and a string value 61–79 B, of which its strings
// are in the body's share), rounded up.
var elementBytes = [...]int64{
	arrayOther:         0,
	arrayResourceSpans: 144,
	arrayScopeSpans:    128,
	arraySpans:         224,
	arrayEvents:        80,
	arrayLinks:         96,
	arrayAttributes:    48,
	arrayValues:        48,

	arrayResourceMetrics: metricsElementBytes[arrayResourceMetrics],
	arrayScopeMetrics:    metricsElementBytes[arrayScopeMetrics],
	arrayMetrics:         metricsElementBytes[arrayMetrics],
	arrayNumberPoints:    metricsElementBytes[arrayNumberPoints],
	arrayHistPoints:      metricsElementBytes[arrayHistPoints],
	arrayExpPoints:       metricsElementBytes[arrayExpPoints],
	arraySummaryPoints:   metricsElementBytes[arraySummaryPoints],
	arrayExemplars:       metricsElementBytes[arrayExemplars],
	arrayQuantiles:       metricsElementBytes[arrayQuantiles],
	arrayPoints:          metricsElementBytes[arrayExpPoints],
}

// otlpArrayOf is the array a key names: the field names pdata's JSON
// decoder matches (exactly, after unescaping), both spellings where it
// accepts both.
func otlpArrayOf(key []byte) otlpArray {
	if bytes.IndexByte(key, '\\') >= 0 {
		// pdata unescapes keys: "sp\u0061ns" is "spans" to it.
		s, err := strconv.Unquote(`"` + string(key) + `"`)
		if err != nil {
			return arrayOther
		}
		key = []byte(s)
	}
	switch string(key) {
	case "resourceSpans", "resource_spans":
		return arrayResourceSpans
	case "scopeSpans", "scope_spans":
		return arrayScopeSpans
	case "spans":
		return arraySpans
	case "events":
		return arrayEvents
	case "links":
		return arrayLinks
	case "attributes":
		return arrayAttributes
	case "values":
		return arrayValues
	}
	if a, ok := metricsJSONArrays[string(key)]; ok {
		return a
	}
	return arrayOther
}

// OTLPJSONCost estimates what decoding OTLP JSON body b into pdata holds
// (DecodeCost), and checks, in the same pass, that b nests no deeper than
// maxDepth (as CheckJSONDepth). It scans b once, allocating only for a key
// with an escape; it does not check that b is valid JSON (pdata does), and
// counts an element of a named array wherever that array sits, which may
// count more than pdata keeps, never less.
func OTLPJSONCost(b []byte, maxDepth int) (DecodeCost, error) {
	// open holds, per open container, the array it is (arrayOther for an
	// object or an array of no interest); pending is the array the last
	// key names, until the value after its colon starts.
	open := make([]otlpArray, 0, 64)
	var (
		c       DecodeCost
		pending otlpArray
	)
	for i := 0; i < len(b); i++ {
		switch ch := b[i]; ch {
		case ' ', '\t', '\n', '\r', ':':
			continue
		case '"':
			end := stringEnd(b, i+1)
			j := end + 1
			for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\n' || b[j] == '\r') {
				j++
			}
			pending = arrayOther
			if j < len(b) && b[j] == ':' {
				pending = otlpArrayOf(b[i+1 : min(end, len(b))])
			}
			i = end
			continue
		case '{', '[':
			if len(open) >= maxDepth {
				return c, errors.New("JSON nested deeper than " + strconv.Itoa(maxDepth) + " levels at byte " + strconv.Itoa(i))
			}
			kind := arrayOther
			if ch == '{' {
				if n := len(open); n > 0 && open[n-1] != arrayOther {
					parent := open[n-1]
					c.Elements++
					c.Bytes += elementBytes[parent]
					c.count(parent)
				}
			} else {
				kind = pending
			}
			open = append(open, kind)
		case '}', ']':
			if n := len(open); n > 0 {
				open = open[:n-1]
			}
		}
		pending = arrayOther
	}
	c.Bytes += 2 * int64(len(b))
	return c, nil
}
