package exposition

import (
	"math"
	"testing"
)

func TestAppendHeader(t *testing.T) {
	cases := []struct {
		name, help string
		typ        Type
		want       string
	}{
		{"a_total", "", TypeCounter, "# TYPE a_total counter\n"},
		{"g", "Line one\nsays \"hi\" \\o/", TypeGauge,
			"# HELP g Line one\\nsays \"hi\" \\\\o/\n# TYPE g gauge\n"},
		{"u", "x", TypeUntyped, "# HELP u x\n# TYPE u untyped\n"},
	}
	for _, c := range cases {
		if got := string(AppendHeader(nil, c.name, c.help, c.typ)); got != c.want {
			t.Errorf("AppendHeader(%q, %q) = %q, want %q", c.name, c.help, got, c.want)
		}
	}
}

func TestAppendSeriesPrefix(t *testing.T) {
	cases := []struct {
		labels []Label
		want   string
	}{
		{nil, "m"},
		{[]Label{{Name: "a", Value: ""}}, "m"},
		{[]Label{{Name: "a", Value: "x"}, {Name: "b", Value: ""}, {Name: "c", Value: "y"}}, `m{a="x",c="y"}`},
		{[]Label{{Name: "v", Value: "quote\" back\\ nl\n"}}, `m{v="quote\" back\\ nl\n"}`},
		{[]Label{{Name: "u", Value: "ünïcode ✓"}}, `m{u="ünïcode ✓"}`},
	}
	for _, c := range cases {
		if got := string(AppendSeriesPrefix(nil, "m", c.labels)); got != c.want {
			t.Errorf("AppendSeriesPrefix(%v) = %q, want %q", c.labels, got, c.want)
		}
	}
}

func TestAppendFloat(t *testing.T) {
	cases := map[float64]string{
		0:            "0",
		1:            "1",
		-1:           "-1",
		42:           "42",
		0.25:         "0.25",
		1e6:          "1e+06",
		123456789:    "1.23456789e+08",
		math.NaN():   "NaN",
		math.Inf(1):  "+Inf",
		math.Inf(-1): "-Inf",
	}
	for v, want := range cases {
		if got := string(AppendSample(nil, v)); got != " "+want+"\n" {
			t.Errorf("AppendSample(%v) = %q, want %q", v, got, " "+want+"\n")
		}
	}
}

func TestAppendDoesNotAllocateWithRoom(t *testing.T) {
	buf := make([]byte, 0, 4096)
	labels := []Label{{Name: "job", Value: "kong"}, {Name: "http_route", Value: "/anything"}, {Name: "code", Value: "200"}}
	allocs := testing.AllocsPerRun(100, func() {
		b := AppendSeriesPrefix(buf[:0], "gateway_requests_total", labels)
		_ = AppendSample(b, 12345.5)
	})
	if allocs != 0 {
		t.Fatalf("allocated %.1f times per series, want 0", allocs)
	}
}

func TestAppendCreated(t *testing.T) {
	for _, c := range []struct {
		ns   int64
		want string
	}{
		{1_700_000_000_000_000_000, " 1700000000.0\n"},
		{1_700_000_000_250_000_000, " 1700000000.25\n"},
		{1_700_000_000_000_000_001, " 1700000000.000000001\n"},
		{999_999_999, " 0.999999999\n"},
	} {
		if got := string(AppendCreated(nil, c.ns)); got != c.want {
			t.Errorf("AppendCreated(%d) = %q, want %q", c.ns, got, c.want)
		}
	}
}
