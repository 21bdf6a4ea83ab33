// Package exposition writes the Prometheus text exposition format 0.0.4.
//
// Everything here appends to a caller-owned []byte and never allocates beyond
// growing it, so callers pre-render what they can (a series' label block) once
// and append only values on the scrape path. Input is assumed valid: metric
// and label names must already match the Prometheus grammar (the exporter
// translates names with prometheus/otlptranslator before they get here).
//
// Format reference: https://prometheus.io/docs/instrumenting/exposition_formats/
package exposition // import "github.com/otelgateway/otelgateway/internal/exposition"

import (
	"math"
	"strconv"
)

// ContentTypeText004 is the Content-Type of the Prometheus text format 0.0.4.
const ContentTypeText004 = "text/plain; version=0.0.4; charset=utf-8"

// Type is a Prometheus metric family type as written on a # TYPE line.
type Type uint8

const (
	TypeUntyped Type = iota
	TypeCounter
	TypeGauge
)

// String returns the keyword used on # TYPE lines.
func (t Type) String() string {
	switch t {
	case TypeCounter:
		return "counter"
	case TypeGauge:
		return "gauge"
	default:
		return "untyped"
	}
}

// AppendHeader appends the # HELP (when help is not empty) and # TYPE lines of
// a family. In 0.0.4 HELP escapes only backslash and newline.
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

// Label is one rendered label pair.
type Label struct {
	Name, Value string
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
// quote is set (label values; HELP in 0.0.4 leaves quotes alone).
func appendEscaped(dst []byte, s string, quote bool) []byte {
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
