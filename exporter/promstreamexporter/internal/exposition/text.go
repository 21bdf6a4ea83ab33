// Package exposition is the promstream exporter's exposition formats: the
// registry of formats it can write and their content negotiation
// (format.go, one file per format), and the text writing the text formats
// share (this file: escaping, numbers, # TYPE / # HELP headers). It lives
// under the exporter because nothing else writes expositions.
//
// Everything here appends to a caller-owned []byte and never allocates beyond
// growing it, so callers pre-render what they can (a series' label block) once
// and append only values on the scrape path. Input is assumed valid: metric
// and label names must already match the Prometheus grammar (the exporter
// translates names with prometheus/otlptranslator before they get here).
//
// Format reference: https://prometheus.io/docs/instrumenting/exposition_formats/
package exposition // import "github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/common/model"
)

// ContentTypeText004 is the Content-Type of the Prometheus text format 0.0.4.
const ContentTypeText004 = "text/plain; version=0.0.4; charset=utf-8"

// Type is a Prometheus metric family type as written on a # TYPE line.
type Type uint8

const (
	TypeUntyped Type = iota
	TypeCounter
	TypeGauge
	TypeHistogram
	TypeSummary
)

// String returns the keyword used on 0.0.4 # TYPE lines.
func (t Type) String() string {
	switch t {
	case TypeCounter:
		return "counter"
	case TypeGauge:
		return "gauge"
	case TypeHistogram:
		return "histogram"
	case TypeSummary:
		return "summary"
	default:
		return "untyped"
	}
}

// AppendHeader appends the # HELP (when help is not empty) and # TYPE lines of
// a family in the text format. In 0.0.4 HELP escapes only backslash and
// newline. name must already be escaped (or quoted) for the scrape.
func AppendHeader(dst []byte, name, help string, t Type) []byte {
	if help != "" {
		dst = append(dst, "# HELP "...)
		dst = append(dst, name...)
		dst = append(dst, ' ')
		dst = appendEscaped(dst, help, false)
		dst = append(dst, '\n')
	}
	dst = append(dst, "# TYPE "...)
	dst = append(dst, name...)
	dst = append(dst, ' ')
	dst = append(dst, t.String()...)
	return append(dst, '\n')
}

// AppendOpenMetricsHeader appends the # TYPE and # HELP lines of a family in
// OpenMetrics: untyped is "unknown", and a counter's family name drops the
// "_total" its samples carry. A counter whose name lacks "_total" cannot be
// an OpenMetrics counter and is written as unknown, as expfmt does. HELP
// escapes the double quote too.
func AppendOpenMetricsHeader(dst []byte, name, help string, t Type) []byte {
	keyword := t.String()
	switch {
	case t == TypeUntyped:
		keyword = "unknown"
	case t == TypeCounter && IsTotalName(name):
		name = name[:len(name)-len("_total")]
	case t == TypeCounter:
		keyword = "unknown"
	}
	dst = append(dst, "# TYPE "...)
	dst = append(dst, name...)
	dst = append(dst, ' ')
	dst = append(dst, keyword...)
	dst = append(dst, '\n')
	if help != "" {
		dst = append(dst, "# HELP "...)
		dst = append(dst, name...)
		dst = append(dst, ' ')
		dst = appendEscaped(dst, help, true)
		dst = append(dst, '\n')
	}
	return dst
}

// IsTotalName reports whether a counter named name is an OpenMetrics
// counter: its name ends in "_total" after a family name of its own (a
// counter called "_total" alone would be family "", which no parser reads,
// and is written unknown).
func IsTotalName(name string) bool {
	return len(name) > len("_total") && strings.HasSuffix(name, "_total")
}

// OpenMetricsEOF ends every OpenMetrics exposition.
const OpenMetricsEOF = "# EOF\n"

// AppendCanonical appends v as OpenMetrics canonical numbers are written for
// le and quantile: Go's %g, with ".0" added when that has no dot or exponent
// ("1.0", "0.5", "1e-05", "+Inf"). Prometheus parses it in every format.
func AppendCanonical(dst []byte, v float64) []byte {
	switch {
	case math.IsInf(v, +1):
		return append(dst, "+Inf"...)
	case math.IsInf(v, -1):
		return append(dst, "-Inf"...)
	case math.IsNaN(v):
		return append(dst, "NaN"...)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, v, 'g', -1, 64)
	for _, c := range dst[start:] {
		if c == '.' || c == 'e' {
			return dst
		}
	}
	return append(dst, '.', '0')
}

// AppendLabelPairs appends `a="x",b="y"` (no braces): the part of a series'
// identity rendered once at insert. Empty values are skipped. Label names are
// escaped under e; with EscapeNone a name outside the legacy grammar is
// quoted, as text 1.0.0 and OpenMetrics with allow-utf-8 require.
func AppendLabelPairs(dst []byte, labels []Label, e Escaping) []byte {
	return appendLabelPairs(dst, labels, e, false)
}

// AppendAllLabelPairs is AppendLabelPairs keeping empty values (`label=""`),
// as some gateways' own exporters write them.
func AppendAllLabelPairs(dst []byte, labels []Label, e Escaping) []byte {
	return appendLabelPairs(dst, labels, e, true)
}

func appendLabelPairs(dst []byte, labels []Label, e Escaping, keepEmpty bool) []byte {
	first := true
	for _, l := range labels {
		if l.Value == "" && !keepEmpty {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = AppendLabelName(dst, l.Name, e)
		dst = append(dst, '=', '"')
		dst = appendEscaped(dst, l.Value, true)
		dst = append(dst, '"')
	}
	return dst
}

// AppendLabelName appends a label name escaped under e, quoted when e is
// EscapeNone and the name is outside the legacy grammar.
func AppendLabelName(dst []byte, name string, e Escaping) []byte {
	if e == EscapeNone && !model.LegacyValidation.IsValidLabelName(name) {
		dst = append(dst, '"')
		dst = appendEscaped(dst, name, true)
		return append(dst, '"')
	}
	return append(dst, EscapeLabelName(name, e)...)
}

// AppendLabelValue appends a quoted, escaped label value.
func AppendLabelValue(dst []byte, v string) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, v, true)
	return append(dst, '"')
}

// AppendSeriesPrefix appends `name{l1="v1",l2="v2"}` (or just `name` when there
// are no labels): the part of a sample line that never changes. Labels are
// written in the order given; empty values are skipped, since Prometheus
// treats an empty label value as an absent label.
func AppendSeriesPrefix(dst []byte, name string, labels []Label) []byte {
	dst = append(dst, name...)
	open := false
	for _, l := range labels {
		if l.Value == "" {
			continue
		}
		if open {
			dst = append(dst, ',')
		} else {
			dst = append(dst, '{')
			open = true
		}
		dst = append(dst, l.Name...)
		dst = append(dst, '=', '"')
		dst = appendEscaped(dst, l.Value, true)
		dst = append(dst, '"')
	}
	if open {
		dst = append(dst, '}')
	}
	return dst
}

// AppendSample appends ` <value>\n` to a pre-rendered series prefix.
func AppendSample(dst []byte, v float64) []byte {
	dst = append(dst, ' ')
	dst = AppendFloat(dst, v)
	return append(dst, '\n')
}

// AppendFloat appends v as the text formats spell it: NaN, +Inf, -Inf, and
// otherwise the shortest representation that round-trips (expfmt's writeFloat).
func AppendFloat(dst []byte, v float64) []byte {
	switch {
	case v == 0:
		return append(dst, '0')
	case v == 1:
		return append(dst, '1')
	case math.IsNaN(v):
		return append(dst, "NaN"...)
	case math.IsInf(v, +1):
		return append(dst, "+Inf"...)
	case math.IsInf(v, -1):
		return append(dst, "-Inf"...)
	}
	return strconv.AppendFloat(dst, v, 'g', -1, 64)
}

// appendEscaped escapes backslash and newline, and the double quote too when
// quote is set (label values; HELP in 0.0.4 leaves quotes alone). Invalid
// UTF-8 becomes U+FFFD: every Prometheus parser rejects the whole scrape for
// one invalid byte, and pdata strings can hold any bytes.
func appendEscaped(dst []byte, s string, quote bool) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			dst = append(dst, '\\', '\\')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '"' && quote:
			dst = append(dst, '\\', '"')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// AppendCreated appends ` <seconds>\n` for a created timestamp given in unix
// nanoseconds: the exact decimal ("1700000000.25", "1700000000.0"), not a
// float64 round trip, which would lose the sub-microsecond digits (and
// expfmt's %g would write whole seconds as "1.7e+09").
func AppendCreated(dst []byte, unixNano int64) []byte {
	dst = append(dst, ' ')
	dst = appendSeconds(dst, unixNano)
	return append(dst, '\n')
}

// AppendTimestamp appends ` <timestamp>` (no newline) for a sample
// timestamp given in unix nanoseconds, truncated to the millisecond as
// Prometheus keeps it: in seconds for OpenMetrics ("1700000000.5", exact,
// where expfmt writes a float such as "1.7000000005e+09"), else in
// milliseconds ("1700000000500").
func AppendTimestamp(dst []byte, unixNano int64, seconds bool) []byte {
	dst = append(dst, ' ')
	ms := unixNano / 1e6
	if seconds {
		return appendSeconds(dst, ms*1e6)
	}
	return strconv.AppendInt(dst, ms, 10)
}

// appendSeconds appends unix nanoseconds as exact decimal seconds.
func appendSeconds(dst []byte, unixNano int64) []byte {
	if unixNano < 0 {
		dst = append(dst, '-')
		unixNano = -unixNano
	}
	dst = strconv.AppendInt(dst, unixNano/1e9, 10)
	dst = append(dst, '.')
	frac := unixNano % 1e9
	if frac == 0 {
		return append(dst, '0')
	}
	var digits [9]byte
	for i := 8; i >= 0; i-- {
		digits[i] = byte('0' + frac%10)
		frac /= 10
	}
	n := 9
	for digits[n-1] == '0' {
		n--
	}
	return append(dst, digits[:n]...)
}
