package exposition

import (
	"strings"
	"testing"
)

// attr and gen build Resolve's input: an attribute's label (translated
// name, value, original key) and a generated one.
func attr(name, value, key string) Label {
	return Label{Name: name, Value: value, Attr: true, Key: key}
}
func gen(name, value string) Label { return Label{Name: name, Value: value} }

// pairs renders labels as `a="x",b="y"` (names as Resolve returned them).
func pairs(labels []Label) string {
	var b strings.Builder
	for i, l := range labels {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l.Name + `="` + l.Value + `"`)
	}
	return b.String()
}

func TestResolve(t *testing.T) {
	cases := []struct {
		name string
		in   []Label
		e    Escaping
		t    Type
		want string
	}{
		{"nothing to resolve", []Label{gen("job", "kong"), attr("http_route", "/a", "http.route")}, EscapeUnderscores, TypeCounter,
			`job="kong",http_route="/a"`},
		{"__name__ is the metric name", []Label{attr("__name__", "x", "__name__"), attr("a", "1", "a")}, EscapeUnderscores, TypeGauge,
			`exported___name__="x",a="1"`},
		{"every __ name is reserved", []Label{attr("__x", "x", "__x"), attr("__", "y", "__")}, EscapeUnderscores, TypeGauge,
			`exported___x="x",exported___="y"`},
		{"le in a histogram", []Label{attr("le", "0.5", "le"), attr("quantile", "q", "quantile")}, EscapeUnderscores, TypeHistogram,
			`exported_le="0.5",quantile="q"`},
		{"quantile in a summary", []Label{attr("le", "0.5", "le"), attr("quantile", "q", "quantile")}, EscapeUnderscores, TypeSummary,
			`le="0.5",exported_quantile="q"`},
		{"le and quantile are free in a gauge", []Label{attr("le", "0.5", "le"), attr("quantile", "q", "quantile")}, EscapeUnderscores, TypeGauge,
			`le="0.5",quantile="q"`},
		{"a generated label keeps its name", []Label{gen("job", "ns/kong"), gen("instance", "n1"), attr("job", "mine", "job"), attr("instance", "i", "instance")}, EscapeUnderscores, TypeCounter,
			`job="ns/kong",instance="n1",exported_job="mine",exported_instance="i"`},
		{"an attribute without a generated label keeps job", []Label{attr("job", "mine", "job")}, EscapeUnderscores, TypeCounter,
			`job="mine"`},
		{"renamed until free", []Label{gen("job", "kong"), attr("job", "a", "job"), attr("exported_job", "b", "exported_job")}, EscapeUnderscores, TypeCounter,
			`job="kong",exported_exported_job="a",exported_job="b"`},
		{"attributes that translate alike join in key order", []Label{attr("a_b", "y", "a_b"), attr("a_b", "x", "a.b")}, EscapeUnderscores, TypeGauge,
			`a_b="x;y"`},
		{"in any arrival order", []Label{attr("a_b", "x", "a.b"), attr("a_b", "y", "a_b")}, EscapeUnderscores, TypeGauge,
			`a_b="x;y"`},
		{"empty values are not joined", []Label{attr("a_b", "", "a.b"), attr("a_b", "y", "a_b"), attr("a_b", "z", "a-b")}, EscapeUnderscores, TypeGauge,
			`a_b="z;y"`},
		{"UTF-8 names stay apart unescaped", []Label{attr("a.b", "x", "a.b"), attr("a_b", "y", "a_b")}, EscapeNone, TypeGauge,
			`a.b="x",a_b="y"`},
		{"and join once escaped", []Label{attr("a.b", "x", "a.b"), attr("a_b", "y", "a_b")}, EscapeUnderscores, TypeGauge,
			`a_b="x;y"`},
		{"escaping that makes a reserved name", []Label{attr("..name..", "x", "..name..")}, EscapeUnderscores, TypeGauge,
			`exported___name__="x"`},
		{"the same name unescaped is free", []Label{attr("..name..", "x", "..name..")}, EscapeNone, TypeGauge,
			`..name..="x"`},
		{"generated labels of one name join in order", []Label{gen("region", "b"), gen("region", "a")}, EscapeUnderscores, TypeGauge,
			`region="b;a"`},
		{"position of the first part", []Label{gen("job", "kong"), attr("z", "1", "z"), attr("le", "2", "le"), attr("a_b", "3", "a_b"), attr("a_b", "4", "a.b")}, EscapeUnderscores, TypeHistogram,
			`job="kong",z="1",exported_le="2",a_b="4;3"`},
	}
	sortedCases := []struct {
		name string
		in   []Label
		want string
	}{
		{"a renamed label sorts by its new name", []Label{attr("a", "1", "a"), gen("job", "kong"), attr("le", "2", "le"), attr("z", "3", "z")},
			`a="1",exported_le="2",job="kong",z="3"`},
		{"without a conflict the order is the caller's", []Label{attr("b", "1", "b"), attr("a", "2", "a")},
			`b="1",a="2"`},
	}
	for _, c := range sortedCases {
		t.Run("sorted/"+c.name, func(t *testing.T) {
			if got := pairs(Resolve(nil, c.in, EscapeUnderscores, TypeHistogram, true)); got != c.want {
				t.Fatalf("Resolve = %s, want %s", got, c.want)
			}
		})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Resolve(nil, c.in, c.e, c.t, false)
			if s := pairs(got); s != c.want {
				t.Fatalf("Resolve = %s, want %s", s, c.want)
			}
			seen := map[string]bool{}
			for _, l := range got {
				if seen[l.Name] || Reserved(l.Name, c.t) {
					t.Fatalf("label %q written twice or reserved in %s", l.Name, pairs(got))
				}
				seen[l.Name] = true
			}
		})
	}
}

// TestResolveManyLabels: a point with thousands of attributes is resolved
// without a quadratic check, and its duplicates still join.
func TestResolveManyLabels(t *testing.T) {
	var in []Label
	for i := range 5000 {
		k := "k" + strings.Repeat("x", i%7) + string(rune('a'+i%26))
		in = append(in, attr(k, "v", k+"#"+string(rune('a'+i%13))))
	}
	got := Resolve(nil, in, EscapeUnderscores, TypeGauge, true)
	seen := map[string]bool{}
	for _, l := range got {
		if seen[l.Name] {
			t.Fatalf("label %q written twice", l.Name)
		}
		seen[l.Name] = true
	}
	if len(got) != 7*26 {
		t.Fatalf("%d labels, want %d", len(got), 7*26)
	}
}

// TestResolveDoesNotAllocate: the labels a gateway sends (legacy names, no
// conflict) are resolved into the caller's buffer without an allocation.
func TestResolveDoesNotAllocate(t *testing.T) {
	in := []Label{gen("job", "kong"), gen("instance", "n1"), attr("http_route", "/a", "http.route"), attr("http_request_method", "GET", "http.request.method")}
	dst := make([]Label, 0, 8)
	if n := testing.AllocsPerRun(100, func() { dst = Resolve(dst[:0], in, EscapeUnderscores, TypeHistogram, true) }); n != 0 {
		t.Fatalf("Resolve allocated %.0f times", n)
	}
}
