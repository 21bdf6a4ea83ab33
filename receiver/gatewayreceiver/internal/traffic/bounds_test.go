package traffic

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// max_series holds across flush windows: a new route in every window does
// not get a new tuple once max_series tuples are held, until held ones
// expire (tuple_expiry without an event).
func TestMaxSeriesHoldsAcrossWindows(t *testing.T) {
	a := testAggregator(&otelProfile, Limits{MaxTuples: 5, MaxGateways: 10, ExpiryWindows: 3})
	add := func(gw, route string) {
		a.Add([]gateway.Event{otelEvent(gw, route)})
	}
	for w := range 4 {
		for r := range 5 {
			add("kong", "/w"+strconv.Itoa(w)+"-"+strconv.Itoa(r))
		}
		got := requestsByTuple(a.Take())
		if w == 0 && len(got) != 5 {
			t.Fatalf("window 0: %v, want 5 held routes", got)
		}
		if w > 0 && (len(got) != 1 || got["kong overflow"] != 5) {
			t.Fatalf("window %d: %v, want all 5 new routes in kong's overflow tuple", w, got)
		}
		// Window 0's routes stay held until 3 windows passed without them.
		if want := map[bool]int{true: 5, false: 0}[w < 3]; a.HeldTuples() != want {
			t.Fatalf("after window %d: held %d tuples, want %d", w, a.HeldTuples(), want)
		}
	}
	// They expired: a new route is held again.
	add("kong", "/new")
	if got := requestsByTuple(a.Take()); got["kong /new"] != 1 {
		t.Fatalf("after expiry: %v, want /new held", got)
	}
	if a.counts.Overflowed != 15 {
		t.Errorf("overflowed = %d, want 15", a.counts.Overflowed)
	}
}

// A new service.name per span cannot mint tuples: beyond max_gateways the
// events of further gateways share one overflow tuple with no resource, and
// each held gateway has at most one overflow tuple of its own.
func TestMaxGatewaysBoundsResources(t *testing.T) {
	a := testAggregator(&otelProfile, Limits{MaxTuples: 4, MaxGateways: 3, ExpiryWindows: 10})
	for g := range 1000 {
		for r := range 3 {
			a.Add([]gateway.Event{otelEvent("gw-"+strconv.Itoa(g), "/r"+strconv.Itoa(r))})
		}
	}
	handles := len(a.held.handles)
	got := requestsByTuple(a.Take())
	want := map[string]int64{"gw-0 /r0": 1, "gw-0 /r1": 1, "gw-0 /r2": 1, "gw-1 /r0": 1, "gw-1 overflow": 2, "gw-2 overflow": 3, " overflow": 997 * 3}
	if len(got) != len(want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%q = %d, want %d", k, got[k], v)
		}
	}
	// 4 held tuples, 2 per-gateway overflow tuples, 1 for the rest.
	if handles != 7 {
		t.Errorf("%d tuples in memory, want 7", handles)
	}
}

// TestHeldTupleMemory reports what a held tuple costs (the README's figure):
// 10,000 otel-profile tuples through one window, with the series of the six
// request families, and with GenAI fields the series of all ten; with
// exponential duration histograms; and with every label a client sets at
// its longest.
func TestHeldTupleMemory(t *testing.T) {
	plain := func(route string) gateway.Event { return otelEvent("kong", route) }
	genAI := func(route string) gateway.Event {
		e := otelEvent("kong", route)
		e.GenAI.Provider, e.GenAI.RequestModel, e.GenAI.InputTokens, e.GenAI.OutputTokens = "openai", "gpt-4o", 100, 20
		return e
	}
	// long: every label a client sets at max_label_value_length's default
	// (256 bytes): the most a tuple can cost whatever the input.
	long := func(event func(string) gateway.Event) func(string) gateway.Event {
		return func(route string) gateway.Event {
			e := event(route + strings.Repeat("r", defaultMaxLabelBytes-len(route)))
			e.Gateway, e.Namespace = strings.Repeat("g", defaultMaxLabelBytes), strings.Repeat("n", defaultMaxLabelBytes)
			if e.GenAI.Provider != "" {
				e.GenAI.Provider, e.GenAI.RequestModel = strings.Repeat("p", defaultMaxLabelBytes), strings.Repeat("m", defaultMaxLabelBytes)
			}
			return e
		}
	}
	expo := otelProfile.withDurationHistograms(nil, defaultExpoMaxSize)
	for _, c := range []struct {
		name  string
		prof  *profile
		event func(route string) gateway.Event
		// budget is the most bytes a held tuple may cost: the README's
		// figures (measured 1,143, 2,389, 4,810, 7,316, 1,991, 5,927, and
		// 1,287 and 437 B under the kong and apisix profiles) with ~5 % room.
		budget float64
	}{
		{"otel profile", &otelProfile, plain, 1200},
		{"otel profile, GenAI requests", &otelProfile, genAI, 2500},
		{"otel profile, exponential max_size 160", expo, plain, 5056},
		{"otel profile, exponential max_size 160, GenAI requests", expo, genAI, 7680},
		{"otel profile, 256-byte labels", &otelProfile, long(plain), 2100},
		{"otel profile, 256-byte labels, GenAI requests", &otelProfile, long(genAI), 6200},
		{"kong profile", &kongProfile, plain, 1350},
		{"apisix profile", &apisixProfile, plain, 460},
	} {
		t.Run(c.name, func(t *testing.T) { heldTupleMemory(t, c.name, c.prof, c.event, c.budget) })
	}
}

func heldTupleMemory(t *testing.T, name string, prof *profile, event func(route string) gateway.Event, budget float64) {
	const n = 10_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	a := testAggregator(prof, Limits{MaxTuples: n, MaxGateways: 10, ExpiryWindows: 60})
	for i := range n {
		a.Add([]gateway.Event{event("/route-" + strconv.Itoa(i))})
	}
	a.Take()
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("held tuple, %s: %.0f B each (%d tuples, heap %d B)", name, per, a.HeldTuples(), after.HeapAlloc-before.HeapAlloc)
	if a.HeldTuples() != n {
		t.Fatalf("held %d, want %d", a.HeldTuples(), n)
	}
	if per > budget {
		t.Errorf("a held tuple costs %.0f B, want at most %.0f", per, budget)
	}
	runtime.KeepAlive(a)
}

// TestSeedGatewayMemory reports what the seeds' gateway costs the receiver
// under each profile (the README's Limits table): a Kong with 10,000
// routes, 2 methods and 3 status codes through one window, held at the
// default limits. The otel profile holds 60,000 tuples, the kong and
// apisix profiles 30,000 (their plugins have no method label). budget is
// the most bytes per tuple, the figures measured (1,190, 939 and 618 B,
// the default limits' map of tuples included) with ~5 % room.
func TestSeedGatewayMemory(t *testing.T) {
	for _, c := range []struct {
		prof   *profile
		tuples int
		budget float64
	}{
		{&otelProfile, 60_000, 1250},
		{&kongProfile, 30_000, 990},
		{&apisixProfile, 30_000, 650},
	} {
		t.Run(c.prof.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			a := testAggregator(c.prof, defaultLimits)
			for r := range 10_000 {
				for _, m := range []string{"GET", "POST"} {
					for _, s := range []int64{200, 404, 503} {
						e := otelEvent("kong", "/api/v1/route-"+strconv.Itoa(r)+"/{id}")
						e.Method, e.StatusCode = m, s
						a.Add([]gateway.Event{e})
					}
				}
			}
			a.Take()
			runtime.GC()
			runtime.ReadMemStats(&after)
			held := a.HeldTuples()
			heap := float64(after.HeapAlloc - before.HeapAlloc)
			t.Logf("seed gateway, %s profile: %d tuples, %.1f MiB, %.0f B per tuple", c.prof.name, held, heap/(1<<20), heap/float64(held))
			if held != c.tuples {
				t.Fatalf("held %d tuples, want %d", held, c.tuples)
			}
			if per := heap / float64(held); per > c.budget {
				t.Errorf("%.0f B per tuple, want at most %.0f", per, c.budget)
			}
			runtime.KeepAlive(a)
		})
	}
}
