package gateway

import (
	"context"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter"
	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/processor/cumulativeprocessor"
)

// promPipeline is what follows the receiver for pushed metrics: the
// cumulative processor (deltas become cumulative) and the promstream
// exporter, set as a collector serving a gateway's own names runs it, with
// that gateway's compatibility preset: no unit or type suffixes, no scope
// labels, labels in the order sent, empty labels kept, le as Kong and Envoy
// spell them; for envoy, counters named as sent (x beside x_total).
type promPipeline struct {
	next consumer.Metrics
	url  string
}

func newPromPipeline(t *testing.T, compatibility string) *promPipeline {
	t.Helper()
	ctx := context.Background()
	ef := promstreamexporter.NewFactory()
	ecfg := ef.CreateDefaultConfig().(*promstreamexporter.Config)
	addr := testutil.FreeAddr(t)
	ecfg.ServerConfig.NetAddr.Endpoint = addr
	ecfg.Compatibility = compatibility
	exp, err := ef.CreateMetrics(ctx, exportertest.NewNopSettings(component.MustNewType("promstream")), ecfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exp.Shutdown(context.Background()) })
	pf := cumulativeprocessor.NewFactory()
	proc, err := pf.CreateMetrics(ctx, processortest.NewNopSettings(component.MustNewType("cumulative")), pf.CreateDefaultConfig(), exp)
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proc.Shutdown(context.Background()) })
	return &promPipeline{next: proc, url: "http://" + addr + "/metrics"}
}

func (p *promPipeline) push(t *testing.T, md pmetric.Metrics) {
	t.Helper()
	if err := p.next.ConsumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
}

func (p *promPipeline) scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(p.url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readMetricsJSON reads an OTLP/JSON fixture.
func readMetricsJSON(t testing.TB, path string) pmetric.Metrics {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	md, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(b)
	if err != nil {
		t.Fatal(err)
	}
	return md
}

// expoLine is one sample line of a text exposition, parsed.
type expoLine struct {
	name   string
	labels [][2]string
	value  float64
	raw    string
}

// canonical spells the line with numbers (value and le) in Go's shortest
// form and without an empty label block: two lines that Prometheus stores
// as the same sample with the same value have the same canonical form,
// whatever number spelling and `{}` their writer chose.
func (l expoLine) canonical() string {
	var b strings.Builder
	b.WriteString(l.name)
	if len(l.labels) > 0 {
		b.WriteByte('{')
		for i, kv := range l.labels {
			if i > 0 {
				b.WriteByte(',')
			}
			v := kv[1]
			if kv[0] == "le" && v != "+Inf" {
				f, err := strconv.ParseFloat(v, 64)
				if err == nil {
					v = strconv.FormatFloat(f, 'g', -1, 64)
				}
			}
			b.WriteString(kv[0] + "=" + strconv.Quote(v))
		}
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(strconv.FormatFloat(l.value, 'g', -1, 64))
	return b.String()
}

// expoFamily is one family of an exposition: its TYPE and sample lines in
// the order written.
type expoFamily struct {
	typ   string
	lines []expoLine
}

// dropLabelText matches the exporter's context labels, which it writes
// first (job, then instance), in a sample line.
var dropLabelText = regexp.MustCompile(`^([^{ ]+)\{(?:job="(?:[^"\\]|\\.)*",?)?(?:instance="(?:[^"\\]|\\.)*",?)?`)

// parseExposition reads a Prometheus text exposition (0.0.4) into families
// in the order they appear, leaving out the labels in drop.
func parseExposition(t *testing.T, text string, drop ...string) ([]string, map[string]*expoFamily) {
	t.Helper()
	var order []string
	fams := map[string]*expoFamily{}
	var cur *expoFamily
	for _, line := range strings.Split(text, "\n") {
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(line)
			if len(f) != 4 {
				t.Fatalf("bad TYPE line %q", line)
			}
			if _, dup := fams[f[2]]; dup {
				t.Fatalf("family %s written twice", f[2])
			}
			cur = &expoFamily{typ: f[3]}
			fams[f[2]] = cur
			order = append(order, f[2])
			continue
		case strings.HasPrefix(line, "#"):
			continue
		}
		if cur == nil {
			t.Fatalf("sample before any TYPE: %q", line)
		}
		l := parseSample(t, line)
		if n := len(l.labels); n > 0 {
			l.labels = slices.DeleteFunc(l.labels, func(kv [2]string) bool { return slices.Contains(drop, kv[0]) })
			if len(l.labels) < n {
				// The line as written without the dropped labels (the
				// exporter writes its own, job and instance, first).
				l.raw = dropLabelText.ReplaceAllString(line, "$1{")
				l.raw = strings.Replace(l.raw, "{}", "", 1)
			}
		}
		cur.lines = append(cur.lines, l)
	}
	return order, fams
}

func parseSample(t *testing.T, line string) expoLine {
	t.Helper()
	l := expoLine{raw: line}
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		t.Fatalf("not a sample line: %q", line)
	}
	l.name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for rest[0] != '}' {
			eq := strings.IndexByte(rest, '=')
			if eq <= 0 || rest[eq+1] != '"' {
				t.Fatalf("bad labels in %q", line)
			}
			name := rest[:eq]
			rest = rest[eq+2:]
			var v strings.Builder
			for j := 0; ; j++ {
				if j >= len(rest) {
					t.Fatalf("unterminated label value in %q", line)
				}
				c := rest[j]
				if c == '\\' {
					j++
					switch rest[j] {
					case 'n':
						v.WriteByte('\n')
					default:
						v.WriteByte(rest[j])
					}
					continue
				}
				if c == '"' {
					rest = rest[j+1:]
					break
				}
				v.WriteByte(c)
			}
			l.labels = append(l.labels, [2]string{name, v.String()})
			rest = strings.TrimPrefix(rest, ",")
		}
		rest = rest[1:]
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
	if err != nil {
		t.Fatalf("bad value in %q: %v", line, err)
	}
	l.value = f
	return l
}

// expoDiff says what diffExpositions forgives.
type expoDiff struct {
	// dropGot are labels of got left out (the exporter's job and instance:
	// Prometheus sets both for its own target anyway).
	dropGot []string
	// extraGot are families only got may have (the exporter's target_info).
	extraGot []string
}

// diffExpositions compares got with want family by family: the same
// families with the same TYPE, and in each the same lines in canonical
// form, in any order (Envoy sorts its series, the exporter keeps them in
// the order first seen: the formats do not order series). It returns the
// number of lines that are byte for byte the same, and of want's lines.
func diffExpositions(t *testing.T, got, want string, d expoDiff) (identical, total int) {
	t.Helper()
	_, g := parseExposition(t, got, d.dropGot...)
	wantOrder, w := parseExposition(t, want)
	for _, name := range wantOrder {
		wf := w[name]
		gf, ok := g[name]
		if !ok {
			t.Errorf("family %s (%s, %d lines) missing", name, wf.typ, len(wf.lines))
			continue
		}
		if gf.typ != wf.typ {
			t.Errorf("family %s: TYPE %s, want %s", name, gf.typ, wf.typ)
		}
		gl, wl := canonicalLines(gf), canonicalLines(wf)
		for _, l := range wl {
			if !slices.Contains(gl, l) {
				t.Errorf("family %s: missing line\n  %s", name, l)
			}
		}
		for _, l := range gl {
			if !slices.Contains(wl, l) {
				t.Errorf("family %s: extra line\n  %s", name, l)
			}
		}
		raw := map[string]bool{}
		for _, l := range gf.lines {
			raw[l.raw] = true
		}
		for _, l := range wf.lines {
			total++
			if raw[l.raw] {
				identical++
			}
		}
	}
	for name := range g {
		if _, ok := w[name]; !ok && !slices.Contains(d.extraGot, name) {
			t.Errorf("extra family %s", name)
		}
	}
	return identical, total
}

func canonicalLines(f *expoFamily) []string {
	out := make([]string, len(f.lines))
	for i, l := range f.lines {
		out[i] = l.canonical()
	}
	slices.Sort(out)
	return out
}
