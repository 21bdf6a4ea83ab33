package traffic

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"

	ckpt "github.com/otelgateway/otelgateway/internal/checkpoint"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// seriesKey is one series over windows: a family and a label set.
type seriesKey struct {
	fam int32
	enc string
}

// seriesSum is what the windows held of one series, summed.
type seriesSum struct {
	total, sum float64
	count      uint64
	buckets    []uint64
}

// addWindow adds w's points to sums (copied: w is reused by the next Take).
func addWindow(sums map[seriesKey]*seriesSum, w *Window) {
	for i := range w.points {
		p := &w.points[i]
		f := &w.a.fams[p.fam]
		k := seriesKey{p.fam, p.enc}
		s := sums[k]
		if s == nil {
			s = &seriesSum{buckets: make([]uint64, f.explicitBuckets())}
			sums[k] = s
		}
		s.total += p.total
		s.sum += p.sum
		s.count += p.count
		for j, c := range p.counts(w.buckets, f.explicitBuckets()) {
			s.buckets[j] += c
		}
	}
}

// byFamily sums series sums per family (the label sets an overflow tuple
// takes depend on which tuples came first).
func byFamily(sums map[seriesKey]*seriesSum) map[seriesKey]*seriesSum {
	out := map[seriesKey]*seriesSum{}
	for k, s := range sums {
		fk := seriesKey{fam: k.fam}
		o := out[fk]
		if o == nil {
			o = &seriesSum{buckets: make([]uint64, len(s.buckets))}
			out[fk] = o
		}
		o.total += s.total
		o.sum += s.sum
		o.count += s.count
		for j, c := range s.buckets {
			o.buckets[j] += c
		}
	}
	return out
}

// Take works in steps and lets Add in between (issue 28 item 2: no long
// ingest pause at flush): events added on several goroutines while windows
// are taken must each be counted in exactly one window, whatever the
// window does next (emitted, merged back after a failed flush, or merged
// back from its checkpoint encoding), with tuples expiring, rows evicted
// and reused, and tuples folded into overflow beyond the bounds. Every
// series' totals over all windows must equal a serial aggregator's.
func TestTakeConcurrentWithAdd(t *testing.T) {
	defer func(d, s int) { drainStep, sweepStep = d, s }(drainStep, sweepStep)
	drainStep, sweepStep = 32, 128 // many steps, and many Adds between them
	for _, c := range []struct {
		name string
		lim  Limits
		// perSeries: the bounds fold no tuple, so each series' totals are
		// exact; else only each family's are.
		perSeries bool
	}{
		{"expiring", Limits{ExpiryWindows: 1, MaxLabelBytes: defaultMaxLabelBytes}, true},
		{"unbounded", Limits{}, true},
		{"overflow", Limits{MaxTuples: 150, MaxGateways: 2, ExpiryWindows: 1, MaxLabelBytes: defaultMaxLabelBytes}, false},
	} {
		t.Run(c.name, func(t *testing.T) { takeConcurrentWithAdd(t, c.lim, c.perSeries) })
	}
}

func takeConcurrentWithAdd(t *testing.T, lim Limits, perSeries bool) {
	const (
		adders  = 4
		batch   = 40
		routes  = 400
		windows = 60 // taken while the adders add
	)
	// Events of 3 gateways' routes, some with GenAI fields (rows of a
	// second view, shared by the routes of a provider and model), some
	// traced (exemplars); each adder its own random sequence.
	event := func(rng *rand.Rand) gateway.Event {
		r := rng.IntN(routes)
		e := otelEvent("gw"+strconv.Itoa(r%3), "/r"+strconv.Itoa(r))
		e.StatusCode = []int64{200, 404, 503}[rng.IntN(3)]
		e.TotalMS, e.UpstreamMS = float64(rng.IntN(3000)), float64(rng.IntN(50))
		e.RequestSize, e.ResponseSize = int64(rng.IntN(100)), int64(rng.IntN(1000))
		if r%5 == 0 {
			e.GenAI.Provider, e.GenAI.RequestModel = "openai", "m"+strconv.Itoa(r%2)
			e.GenAI.InputTokens, e.GenAI.OutputTokens = int64(rng.IntN(500)), int64(rng.IntN(500))
		}
		if rng.IntN(4) == 0 {
			e.TraceID, e.SpanID = [16]byte{byte(r)}, [8]byte{1}
		}
		return e
	}
	a := testAggregator(&otelProfile, lim)
	added := make([][]gateway.Event, adders)
	// Each window lets each adder add a batch (a token), while the window
	// before it is being taken: the adders run during the Takes, and every
	// window has events.
	tokens := make(chan struct{}, 2*adders)
	var wg sync.WaitGroup
	for g := range adders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range tokens {
				evs := make([]gateway.Event, batch)
				for i := range evs {
					evs[i] = event(rng)
				}
				a.Add(evs)
				added[g] = append(added[g], evs...)
			}
		}()
	}

	got := map[seriesKey]*seriesSum{}
	rng := rand.New(rand.NewPCG(7, 7))
	merged, restored := 0, 0
	for i := 0; i <= windows; i++ {
		if i < windows {
			for range adders {
				tokens <- struct{}{}
			}
		} else {
			close(tokens)
			wg.Wait() // the last window takes what is left
		}
		w := a.Take()
		switch n := rng.IntN(4); {
		case i == windows || n < 2:
			addWindow(got, w)
		case n == 2: // a retryable flush error: the next windows carry it
			a.Merge(w)
			merged++
		default: // a restart: the window comes back from its checkpoint
			d := ckpt.Decoder{B: w.AppendPoints(nil, w.Len())}
			back := a.ReadPoints(&d)
			if d.Err != nil {
				t.Fatal(d.Err)
			}
			a.Merge(back)
			restored++
		}
	}
	n := 0
	for _, evs := range added {
		n += len(evs)
	}
	t.Logf("%d events, %d windows (%d merged back, %d restored), %d series", n, windows+1, merged, restored, len(got))

	ref := testAggregator(&otelProfile, Limits{MaxLabelBytes: lim.MaxLabelBytes})
	for _, evs := range added {
		ref.Add(evs)
	}
	want := map[seriesKey]*seriesSum{}
	addWindow(want, ref.Take())
	if !perSeries {
		got, want = byFamily(got), byFamily(want)
	}
	for k, ws := range want {
		gs := got[k]
		if gs == nil {
			t.Errorf("%s %q: missing (want %+v)", a.fams[k.fam].name, k.enc, *ws)
			continue
		}
		if gs.total != ws.total || gs.count != ws.count || !slices.Equal(gs.buckets, ws.buckets) ||
			math.Abs(gs.sum-ws.sum) > 1e-9*math.Abs(ws.sum) {
			t.Errorf("%s %q: got %+v, want %+v", a.fams[k.fam].name, k.enc, *gs, *ws)
		}
	}
	for k, gs := range got {
		if want[k] == nil {
			t.Errorf("%s %q: not added, got %+v", a.fams[k.fam].name, k.enc, *gs)
		}
	}
}

// An Add between two of Take's steps goes on without waiting for the whole
// Take (issue 28 item 2: at a million tuples Take held the lock for
// seconds), and its event is in exactly one window: the one being taken
// when its row was not drained yet, else the next.
func TestAddBetweenTakeSteps(t *testing.T) {
	defer func(d int) { drainStep, yieldHook = d, nil }(drainStep)
	drainStep = 1
	a := testAggregator(&otelProfile, Limits{})
	const routes = 5
	for i := range routes {
		a.Add([]gateway.Event{otelEvent("kong", "/r"+strconv.Itoa(i))})
	}
	// After the first step, /r0's row is drained and /r4's is not: an
	// event of each is added then.
	steps := 0
	yieldHook = func(a *Aggregator) {
		if steps++; steps == 2 {
			a.Add([]gateway.Event{otelEvent("kong", "/r0"), otelEvent("kong", "/r4")})
		}
	}
	first := requestsByTuple(a.Take())
	yieldHook = nil
	second := requestsByTuple(a.Take())
	if steps < routes {
		t.Fatalf("Take let Add in %d times, want at least %d (one per row)", steps, routes)
	}
	want := map[string]int64{"kong /r0": 1, "kong /r1": 1, "kong /r2": 1, "kong /r3": 1, "kong /r4": 2}
	if !maps.Equal(first, want) {
		t.Errorf("window taken: %v, want %v", first, want)
	}
	if want := map[string]int64{"kong /r0": 1}; !maps.Equal(second, want) {
		t.Errorf("next window: %v, want %v", second, want)
	}
}

// A handle may still point at a row Take's sweep has just evicted (its
// tuple was idle for a window, and stays held): an Add of the tuple before
// the sweep ends must find the row again, not count into the evicted one
// (which is emptied and reused).
func TestAddDuringEviction(t *testing.T) {
	defer func(s int) { sweepStep, yieldHook = s, nil }(sweepStep)
	sweepStep = rowsPerChunk // a step per chunk of rows
	a := testAggregator(&otelProfile, Limits{})
	// /idle's row is in the first chunk; the busy routes' fill a second
	// one, swept after /idle's row is evicted.
	busy := make([]gateway.Event, 2*rowsPerChunk)
	for i := range busy {
		busy[i] = otelEvent("kong", "/busy"+strconv.Itoa(i))
	}
	a.Add([]gateway.Event{otelEvent("kong", "/idle")})
	a.Add(busy)
	a.Take()
	a.Add(busy)
	added := 0
	yieldHook = func(a *Aggregator) {
		if len(a.tables[0].dead) > 0 && added == 0 { // /idle's row is evicted, not released yet
			a.Add([]gateway.Event{otelEvent("kong", "/idle")})
			added++
		}
	}
	if got := requestsByTuple(a.Take()); got["kong /idle"] != 0 {
		t.Fatalf("idle window: /idle counted %d, want 0", got["kong /idle"])
	}
	yieldHook = nil
	if added != 1 {
		t.Fatalf("added %d times while the row was evicted, want 1", added)
	}
	if got := requestsByTuple(a.Take()); got["kong /idle"] != 1 || len(got) != 1 {
		t.Fatalf("window after: %v, want /idle counted once", got)
	}
}

// exemplarSpans lists, per route, the span ids of the exemplars of each of
// the window's histogram points.
func exemplarSpans(w *Window) map[string][][]byte {
	out := map[string][][]byte{}
	for _, p := range w.points {
		if !w.a.fams[p.fam].hist {
			continue
		}
		var spans []byte
		for _, x := range w.exemplars[p.exStart:p.exEnd] {
			spans = append(spans, x.span[0])
		}
		r := p.tuple().route
		out[r] = append(out[r], spans)
	}
	return out
}

// Exemplars kept between two of Take's steps land in the right window, as
// counts do (TestAddBetweenTakeSteps), and those of the next window survive
// the Take: the rows drained already keep theirs apart from the buffer Take
// empties when it is done (exemplarStore.flip). With one buffer the next
// window's exemplar was emptied with the window that ended, and the next
// traced requests overwrote it.
func TestExemplarsBetweenTakeSteps(t *testing.T) {
	defer func(d int) { drainStep, yieldHook = d, nil }(drainStep)
	drainStep = 1
	a := testAggregator(&otelProfile, Limits{})
	traced := func(route string, span byte) gateway.Event {
		e := otelEvent("kong", route)
		e.TraceID, e.SpanID = [16]byte{1}, [8]byte{span}
		return e
	}
	const routes = 5
	for i := range routes {
		a.Add([]gateway.Event{traced("/r"+strconv.Itoa(i), byte(i))})
	}
	steps := 0
	yieldHook = func(a *Aggregator) {
		if steps++; steps == 2 { // /r0's row is drained, /r4's is not
			late := traced("/r4", 104)
			late.TotalMS = 5000 // another bucket than /r4's first request's
			a.Add([]gateway.Event{traced("/r0", 100), late})
		}
	}
	first := exemplarSpans(a.Take())
	yieldHook = nil
	// The next window's traced requests, on other rows, before it is
	// taken: more than the entries the window taken had.
	for i := 1; i < routes; i++ {
		a.Add([]gateway.Event{traced("/r"+strconv.Itoa(i), byte(200+i))})
	}
	for i := range 50 {
		a.Add([]gateway.Event{traced("/x"+strconv.Itoa(i), 50)})
	}
	second := exemplarSpans(a.Take())
	check := func(what, route string, got [][]byte, want ...byte) {
		t.Helper()
		if len(got) == 0 {
			t.Errorf("%s: %s has no histogram point", what, route)
		}
		for _, spans := range got {
			if !slices.Equal(spans, want) {
				t.Errorf("%s: %s's histogram point has exemplars of spans %v, want %v", what, route, spans, want)
			}
		}
	}
	check("window taken", "/r0", first["/r0"], 0)
	check("window taken", "/r4", first["/r4"], 4, 104) // both buckets', in bucket order
	check("next window", "/r0", second["/r0"], 100)
	for i := 1; i < routes; i++ {
		check("next window", "/r"+strconv.Itoa(i), second["/r"+strconv.Itoa(i)], byte(200+i))
	}
}
