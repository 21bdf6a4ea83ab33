package promstream

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Exposition summarises one text 0.0.4 body: what was exposed, so the report
// can show that contenders are compared on the same series.
type Exposition struct {
	Bytes    int
	Lines    int            // all lines
	Comments int            // # HELP / # TYPE lines
	Samples  int            // sample lines
	Families map[string]int // sample lines per family (histogram lines count under the family name)
	Types    map[string]string
	// Canon maps a canonical series (name + labels sorted by name, le
	// normalised) to its value.
	Canon map[string]float64
	// PrefixBytes is the total length of `name{labels}` over the
	// kong_http_requests_total lines.
	RequestPrefixBytes int
}

// Parse reads a text 0.0.4 body. Label values in this workload contain no
// escapes; Parse does not unescape.
func Parse(body []byte) (*Exposition, error) {
	e := &Exposition{Bytes: len(body), Families: map[string]int{}, Types: map[string]string{}, Canon: make(map[string]float64, 300000)}
	var labels []string
	for len(body) > 0 {
		nl := bytes.IndexByte(body, '\n')
		if nl < 0 {
			return nil, fmt.Errorf("last line has no newline")
		}
		line := body[:nl]
		body = body[nl+1:]
		e.Lines++
		if len(line) == 0 {
			continue
		}
		if line[0] == '#' {
			e.Comments++
			if f := strings.Fields(string(line)); len(f) == 4 && f[1] == "TYPE" {
				e.Types[f[2]] = f[3]
			}
			continue
		}
		e.Samples++
		sp := bytes.LastIndexByte(line, ' ')
		if sp < 0 {
			return nil, fmt.Errorf("no value: %q", line)
		}
		v, err := strconv.ParseFloat(string(line[sp+1:]), 64)
		if err != nil {
			return nil, fmt.Errorf("bad value in %q: %w", line, err)
		}
		series := line[:sp]
		name := series
		labels = labels[:0]
		if i := bytes.IndexByte(series, '{'); i >= 0 {
			name = series[:i]
			inner := series[i+1 : len(series)-1]
			for len(inner) > 0 {
				eq := bytes.IndexByte(inner, '=')
				if eq < 0 || len(inner) < eq+2 || inner[eq+1] != '"' {
					return nil, fmt.Errorf("bad labels in %q", line)
				}
				rest := inner[eq+2:]
				q := bytes.IndexByte(rest, '"')
				if q < 0 {
					return nil, fmt.Errorf("bad labels in %q", line)
				}
				ln, lv := string(inner[:eq]), string(rest[:q])
				if ln == "le" {
					if f, err := strconv.ParseFloat(lv, 64); err == nil {
						lv = strconv.FormatFloat(f, 'g', -1, 64)
					}
				}
				labels = append(labels, ln+"="+lv)
				inner = rest[q+1:]
				if len(inner) > 0 && inner[0] == ',' {
					inner = inner[1:]
				}
			}
		}
		sort.Strings(labels)
		key := string(name) + "{" + strings.Join(labels, ",") + "}"
		if _, dup := e.Canon[key]; dup {
			return nil, fmt.Errorf("duplicate series %s", key)
		}
		e.Canon[key] = v
		fam := string(name)
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(fam, suf); ok && base == LatencyName {
				fam = base
			}
		}
		e.Families[fam]++
		if fam == RequestsName {
			e.RequestPrefixBytes += len(series)
		}
	}
	return e, nil
}

// Diff compares e with the reference: series in both with equal values
// (relative tolerance 1e-12), missing, extra, and value differences.
func (e *Exposition) Diff(ref *Exposition) (match, missing, extra, diff int) {
	for k, rv := range ref.Canon {
		v, ok := e.Canon[k]
		switch {
		case !ok:
			missing++
		case v == rv || math.Abs(v-rv) <= 1e-12*math.Max(math.Abs(v), math.Abs(rv)):
			match++
		default:
			diff++
		}
	}
	for k := range e.Canon {
		if _, ok := ref.Canon[k]; !ok {
			extra++
		}
	}
	return match, missing, extra, diff
}

// FamilySummary renders "name=lines,..." in a fixed order.
func (e *Exposition) FamilySummary() string {
	names := make([]string, 0, len(e.Families))
	for n := range e.Families {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteString(" ")
		}
		short := strings.TrimPrefix(n, "kong_")
		fmt.Fprintf(&b, "%s(%s)=%d", short, e.Types[n], e.Families[n])
	}
	return b.String()
}
