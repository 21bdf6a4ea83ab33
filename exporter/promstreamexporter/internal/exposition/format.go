package exposition

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Format is a wire format the exporter can write.
type Format uint8

const (
	// FormatText004 is the Prometheus text format 0.0.4.
	FormatText004 Format = iota
	// FormatText100 is the text format 1.0.0: the 0.0.4 grammar plus quoted
	// UTF-8 names (only with escaping=allow-utf-8).
	FormatText100
	// FormatOpenMetrics100 is OpenMetrics 1.0.0 (`# EOF`, `_total`, unknown).
	FormatOpenMetrics100
	// FormatOpenMetrics001 is OpenMetrics 0.0.1: the same body as 1.0.0.
	FormatOpenMetrics001
	// FormatProtoDelim is the Prometheus protobuf format, length-delimited
	// MetricFamily messages; the one format that carries native histograms.
	FormatProtoDelim
	numFormats
)

// String names the format for telemetry (a bounded attribute value).
func (f Format) String() string {
	switch f {
	case FormatText100:
		return "text_1.0.0"
	case FormatOpenMetrics100:
		return "openmetrics_1.0.0"
	case FormatOpenMetrics001:
		return "openmetrics_0.0.1"
	case FormatProtoDelim:
		return "protobuf"
	default:
		return "text_0.0.4"
	}
}

// OpenMetrics reports whether f is one of the OpenMetrics versions.
func (f Format) OpenMetrics() bool {
	return f == FormatOpenMetrics100 || f == FormatOpenMetrics001
}

// Escaping is how names outside the legacy Prometheus grammar are written
// (prometheus/docs escaping_schemes.md).
type Escaping uint8

const (
	// EscapeUnderscores replaces every invalid character with '_'; the
	// default when a scraper names no scheme, and the only one 0.0.4 allows.
	EscapeUnderscores Escaping = iota
	// EscapeNone sends UTF-8 names as they are (escaping=allow-utf-8).
	EscapeNone
	// EscapeDots writes '.' as "_dot_", '_' as "__" and others as "__".
	EscapeDots
	// EscapeValues prefixes "U__" and writes invalid characters as _<hex>_.
	EscapeValues
	NumEscapings
)

func (e Escaping) model() model.EscapingScheme {
	switch e {
	case EscapeNone:
		return model.NoEscaping
	case EscapeDots:
		return model.DotsEscaping
	case EscapeValues:
		return model.ValueEncodingEscaping
	default:
		return model.UnderscoreEscaping
	}
}

// Text format 1.0.0 is not in expfmt's list of named formats.
const fmtText100 expfmt.Format = "text/plain; version=1.0.0; charset=utf-8"

// accepted lists what the exporter writes, in the order expfmt tries them for
// each clause of the Accept header (the scraper's weights decide first).
var accepted = []expfmt.Format{
	expfmt.FmtProtoDelim,
	expfmt.FmtOpenMetrics_1_0_0,
	expfmt.FmtOpenMetrics_0_0_1,
	fmtText100,
	expfmt.FmtText,
}

// Negotiated is the outcome of content negotiation for one scrape.
type Negotiated struct {
	Format      Format
	Escaping    Escaping
	ContentType string
}

// Negotiate picks the format and escaping scheme the way Prometheus 3
// expects: the Accept clause with the highest weight that we support wins;
// with none, text 0.0.4. expfmt only negotiates here; it never encodes.
// Text 0.0.4 cannot carry UTF-8 names, so it always escapes (underscores
// unless the scraper asked for dots or values).
func Negotiate(h http.Header) Negotiated {
	accept := h.Get("Accept")
	if n, ok := negotiated.Load(accept); ok {
		return n.(Negotiated)
	}
	n := negotiate(h)
	// A scraper sends the same Accept header on every scrape: remember the
	// outcome (parsing it is most of a scrape's allocations), for a bounded
	// number of distinct headers so hostile clients cannot grow the cache.
	if negotiatedCount.Add(1) <= maxNegotiated {
		negotiated.Store(accept, n)
	}
	return n
}

const maxNegotiated = 64

var (
	negotiated      sync.Map // Accept header → Negotiated
	negotiatedCount atomic.Int64
)

func negotiate(h http.Header) Negotiated {
	f := expfmt.NegotiateAccept(h, accepted...)
	n := Negotiated{Escaping: escapingOf(f.ToEscapingScheme())}
	base := string(f)
	if i := strings.Index(base, "; escaping="); i >= 0 {
		base = base[:i]
	}
	switch expfmt.Format(base) {
	case expfmt.FmtProtoDelim:
		n.Format = FormatProtoDelim
		base = string(expfmt.FmtProtoDelim)
	case expfmt.FmtOpenMetrics_1_0_0:
		n.Format = FormatOpenMetrics100
	case expfmt.FmtOpenMetrics_0_0_1:
		n.Format = FormatOpenMetrics001
	case fmtText100:
		n.Format = FormatText100
	default:
		n.Format = FormatText004
		base = string(expfmt.FmtText)
		if n.Escaping == EscapeNone {
			n.Escaping = EscapeUnderscores
		}
	}
	n.ContentType = base + "; escaping=" + n.Escaping.model().String()
	return n
}

func escapingOf(s model.EscapingScheme) Escaping {
	switch s {
	case model.NoEscaping:
		return EscapeNone
	case model.DotsEscaping:
		return EscapeDots
	case model.ValueEncodingEscaping:
		return EscapeValues
	default:
		return EscapeUnderscores
	}
}

// EscapeName writes a metric or label name under scheme e. Legacy-valid
// names come back unchanged (and unallocated) under every scheme.
func EscapeName(name string, e Escaping) string {
	if model.LegacyValidation.IsValidMetricName(name) {
		return name
	}
	return model.EscapeName(name, e.model())
}

// IsLegacyName reports whether name needs no escaping under any scheme.
func IsLegacyName(name string) bool { return model.LegacyValidation.IsValidMetricName(name) }

// EscapeLabelName is EscapeName for label names, which unlike metric names
// may not contain ':'.
func EscapeLabelName(name string, e Escaping) string {
	if model.LegacyValidation.IsValidLabelName(name) {
		return name
	}
	s := model.EscapeName(name, e.model())
	if e != EscapeNone {
		s = strings.ReplaceAll(s, ":", "_")
	}
	return s
}
