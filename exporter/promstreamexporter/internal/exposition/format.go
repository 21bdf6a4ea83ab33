package exposition

import (
	"cmp"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Format is one registered exposition format, an index into the registry.
// The zero Format is the default format (text 0.0.4), what a scraper gets
// when it accepts nothing we write.
//
// Each format is described once, by the Spec it registers in its own file
// (text004.go, text100.go, openmetrics.go, protodelim.go): its telemetry
// name, its media type (what negotiation matches and the Content-Type
// sent), whether it can carry UTF-8 names, and how its body is written.
// Nothing else lists or counts formats: negotiation, the exporter's
// telemetry and the series writer all read the registry, so a new format is
// one new file.
type Format uint8

// Spec describes a format.
type Spec struct {
	// Name is the format's telemetry attribute value ("text_0.0.4"): short
	// and bounded.
	Name string
	// MediaType is what content negotiation matches against the scraper's
	// Accept header (expfmt's rules: type, subtype and every parameter but
	// charset) and, with "; escaping=<scheme>" appended, the Content-Type
	// of the response.
	MediaType expfmt.Format
	// Preference orders the formats negotiation tries for one Accept
	// clause of equal weight: lower first.
	Preference int
	// Default marks the format used when negotiation matches nothing.
	// Exactly one format is the default; it is Format(0).
	Default bool
	// UTF8 says the format can carry names outside the legacy grammar; a
	// format that cannot always escapes them (underscores unless the
	// scraper asked for dots or values).
	UTF8 bool
	// OpenMetrics marks the OpenMetrics formats, which a Negotiator can
	// leave out (enable_open_metrics: false).
	OpenMetrics bool
	// Body says how the series table writes the format.
	Body Body
}

// Body is how a format's body is written: either length-delimited protobuf
// MetricFamily messages (Proto), or text, one family after another, each
// with its Header, then its sample lines, then the Trailer once at the end.
type Body struct {
	// Proto selects the protobuf writer; the other fields are for text.
	Proto bool
	// Header appends a family's # TYPE and # HELP lines.
	Header func(dst []byte, name, help string, t Type) []byte
	// Trailer is written after the last family ("# EOF\n" in OpenMetrics).
	Trailer string
	// CanonicalBounds keeps le and quantile values canonical ("25.0") even
	// when the table is configured to write the shortest form.
	CanonicalBounds bool
	// Created writes a <name>_created sample (the series' start time, in
	// seconds) after each counter, histogram and summary that has one, as
	// OpenMetrics defines it. The Prometheus text formats have no such
	// line.
	Created bool
	// TimestampSeconds writes sample timestamps (send_timestamps) in
	// seconds, as OpenMetrics defines them; the Prometheus text formats
	// write milliseconds.
	TimestampSeconds bool
	// Exemplars writes a counter's and a histogram bucket's exemplar after
	// its sample (` # {trace_id="…",span_id="…"} value timestamp`), as
	// OpenMetrics defines them. The Prometheus text formats have none.
	Exemplars bool
}

// registry holds the registered formats; slot 0 is the default's.
var registry = make([]Spec, 1)

// byPreference is the registered formats in negotiation order, and
// accepted their media types, what expfmt negotiates among.
var (
	byPreference []Format
	accepted     []expfmt.Format
)

// Register adds a format and returns it. It is meant for package
// initialization (a format file's var) and is not safe for concurrent use,
// nor once a Negotiator exists (the first Negotiate builds one; each
// exporter builds its own): a Negotiator keeps the formats registered when it
// was made. It panics on a spec without a name, media
// type or body writer, on a second default, and past 255 formats: each is a
// programming error in a constant table.
func Register(s Spec) Format {
	switch {
	case s.Name == "" || s.MediaType == "":
		panic("exposition: BUG: a format needs a name and a media type")
	case !s.Body.Proto && s.Body.Header == nil:
		panic("exposition: BUG: format " + s.Name + " has no body writer")
	case s.Default && registry[0].Name != "":
		panic("exposition: BUG: two default formats, " + registry[0].Name + " and " + s.Name)
	case len(registry) > math.MaxUint8:
		panic("exposition: BUG: too many formats")
	}
	f := Format(0)
	if s.Default {
		registry[0] = s
	} else {
		f = Format(len(registry))
		registry = append(registry, s)
	}
	byPreference = append(byPreference, f)
	slices.SortStableFunc(byPreference, func(a, b Format) int {
		return cmp.Compare(registry[a].Preference, registry[b].Preference)
	})
	accepted = accepted[:0]
	for _, f := range byPreference {
		accepted = append(accepted, registry[f].MediaType)
	}
	return f
}

// Formats returns every registered format, the default first.
func Formats() []Format {
	fs := make([]Format, len(registry))
	for i := range fs {
		fs[i] = Format(i)
	}
	return fs
}

// Spec returns the format's description.
func (f Format) Spec() *Spec { return &registry[f] }

// String names the format for telemetry (a bounded attribute value).
func (f Format) String() string { return registry[f].Name }

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

// Negotiated is the outcome of content negotiation for one scrape.
type Negotiated struct {
	Format      Format
	Escaping    Escaping
	ContentType string
}

// Negotiator negotiates among a subset of the registered formats (all of
// them, or all but OpenMetrics), and remembers its outcomes. Build one after
// every format has registered (package initialization).
type Negotiator struct {
	formats  []Format // in negotiation order
	accepted []expfmt.Format
	// A scraper sends the same Accept header on every scrape: outcomes
	// are remembered (parsing it is most of a scrape's allocations), for a
	// bounded number of distinct headers so hostile clients cannot grow
	// the cache.
	cache sync.Map // Accept header → Negotiated
	count atomic.Int64
}

// NewNegotiator returns a negotiator among the registered formats, without
// the OpenMetrics ones unless openMetrics. The default format (text 0.0.4)
// is always one of them.
func NewNegotiator(openMetrics bool) *Negotiator {
	n := &Negotiator{}
	for _, f := range byPreference {
		if registry[f].OpenMetrics && !openMetrics {
			continue
		}
		n.formats = append(n.formats, f)
		n.accepted = append(n.accepted, registry[f].MediaType)
	}
	return n
}

// Negotiate picks the format and escaping scheme the way Prometheus 3
// expects: the Accept clause with the highest weight that we support wins;
// with none, text 0.0.4. expfmt only negotiates here; it never encodes.
// Text 0.0.4 cannot carry UTF-8 names, so it always escapes (underscores
// unless the scraper asked for dots or values).
func (ng *Negotiator) Negotiate(h http.Header) Negotiated {
	accept := h.Get("Accept")
	if n, ok := ng.cache.Load(accept); ok {
		return n.(Negotiated)
	}
	n := ng.negotiate(h)
	if ng.count.Add(1) <= maxNegotiated {
		ng.cache.Store(accept, n)
	}
	return n
}

// Negotiate is Negotiator.Negotiate among every registered format.
func Negotiate(h http.Header) Negotiated {
	allOnce.Do(func() { all = NewNegotiator(true) })
	return all.Negotiate(h)
}

const maxNegotiated = 64

var (
	all     *Negotiator
	allOnce sync.Once
)

func (ng *Negotiator) negotiate(h http.Header) Negotiated {
	got := expfmt.NegotiateAccept(h, ng.accepted...)
	n := Negotiated{Escaping: escapingOf(got.ToEscapingScheme())}
	base := string(got)
	if i := strings.Index(base, "; escaping="); i >= 0 {
		base = base[:i]
	}
	// Format(0), the default, unless a registered media type matched.
	for _, f := range ng.formats {
		if string(registry[f].MediaType) == base {
			n.Format = f
			break
		}
	}
	spec := n.Format.Spec()
	if !spec.UTF8 && n.Escaping == EscapeNone {
		n.Escaping = EscapeUnderscores
	}
	n.ContentType = string(spec.MediaType) + "; escaping=" + n.Escaping.model().String()
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

// ValidName returns name as the text formats can carry it quoted (UTF-8
// names): invalid UTF-8 and NUL bytes, which Prometheus's text parsers
// refuse in a quoted name (and with it the whole scrape), become U+FFFD.
// Names that need no change are returned as they are.
func ValidName(name string) string {
	if utf8.ValidString(name) && strings.IndexByte(name, 0) < 0 {
		return name
	}
	return strings.ReplaceAll(strings.ToValidUTF8(name, "\uFFFD"), "\x00", "\uFFFD")
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
