package promstream

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// scrapeRuns is how many timed scrapes each contender gets in the report
// (after one warm-up), sized to keep the whole report near a minute.
var scrapeRuns = map[string]int{Ours: 21, LowerBound: 21, Victoria: 7, ClientGolang: 5, Contrib: 3}

// allocRuns is how many scrapes the MemStats deltas are averaged over.
var allocRuns = map[string]int{Ours: 10, LowerBound: 10, Victoria: 3, ClientGolang: 2, Contrib: 1}

type result struct {
	key      string
	setup    time.Duration
	first    FirstScrape
	expo     *Exposition
	match    [4]int // match, missing, extra, diff vs the lower bound
	plain    Timing
	allocs   Allocs
	gz       *Timing
	gzAllocs Allocs
	idle     *Latencies
	busy     *Latencies
	enc      map[Change]map[ScrapeKind]Encoded
}

// encodingRuns is how many rounds of each kind of scrape MeasureEncodings
// makes for ours.
const encodingRuns = 9

// encodingChanges are the cases MeasureEncodings measures.
var encodingChanges = []Change{Unchanged, EighthOfRoutes, AllRoutes}

// TestReport runs every contender once, one at a time (each is shut down
// before the next starts), and prints the comparison table with ratios
// against ours. Run with -v.
func TestReport(t *testing.T) {
	if testing.Short() {
		t.Skip("report takes about a minute")
	}
	closeCurrent(t)
	w := Kong10k
	results := map[string]*result{}
	// The lower bound first: it is the reference series set.
	order := []string{LowerBound, Ours, Contrib, ClientGolang, Victoria}
	for _, key := range order {
		r := &result{key: key}
		results[key] = r
		t0 := time.Now()
		s, err := Start(key, w)
		if err != nil {
			t.Fatalf("start %s: %v", key, err)
		}
		r.setup = time.Since(t0)
		func() {
			defer func() {
				if err := s.Close(); err != nil {
					t.Errorf("close %s: %v", key, err)
				}
				runtime.GC()
			}()
			if r.first, err = MeasureFirstScrape(s.Addr); err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			body, _, err := Fetch(s.Addr, false)
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			if r.expo, err = Parse(body); err != nil {
				t.Fatalf("%s: parse: %v", key, err)
			}
			body = nil
			m, mi, ex, d := r.expo.Diff(results[LowerBound].expo)
			r.match = [4]int{m, mi, ex, d}
			if r.plain, err = TimeScrapes(s.Addr, false, scrapeRuns[key]); err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			if r.allocs, err = MeasureAllocs(s.Addr, false, allocRuns[key]); err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			if key == Ours || key == ClientGolang {
				gz, err := TimeScrapes(s.Addr, true, scrapeRuns[key])
				if err != nil {
					t.Fatalf("%s gzip: %v", key, err)
				}
				r.gz = &gz
				if gz.Gzip {
					if r.gzAllocs, err = MeasureAllocs(s.Addr, true, allocRuns[key]); err != nil {
						t.Fatalf("%s gzip: %v", key, err)
					}
					plain, _, err := Fetch(s.Addr, true)
					if err != nil {
						t.Fatalf("%s gzip: %v", key, err)
					}
					ge, err := Parse(plain)
					if err != nil || ge.Samples != r.expo.Samples {
						t.Errorf("%s gzip body: %v, %d samples, want %d", key, err, ge.Samples, r.expo.Samples)
					}
				}
			}
			if s.Consume != nil {
				idle, err := MeasureIngest(s, w, 5000, false, 0, 0, 0)
				if err != nil {
					t.Fatalf("%s ingest: %v", key, err)
				}
				busy, err := MeasureIngest(s, w, 5000, true, 3, 20*time.Second, 100000)
				if err != nil {
					t.Fatalf("%s ingest under scrape: %v", key, err)
				}
				r.idle, r.busy = &idle, &busy
			}
			if key == Ours {
				if r.enc, err = MeasureEncodings(s, w, encodingRuns, encodingChanges); err != nil {
					t.Fatalf("%s encodings: %v", key, err)
				}
				for _, c := range encodingChanges {
					if e := r.enc[c][ScrapeKind{"zstd", -1}]; e.Encoding != "zstd" {
						t.Errorf("%s: a zstd scrape was answered with Content-Encoding %q", key, e.Encoding)
					}
				}
			}
		}()
	}
	retOurs, err := MeasureRetained(Ours, w)
	if err != nil {
		t.Fatal(err)
	}
	retContrib, err := MeasureRetained(Contrib, w)
	if err != nil {
		t.Fatal(err)
	}
	small := w.Scaled(10)
	s, err := Start(Ours, small)
	if err != nil {
		t.Fatal(err)
	}
	smallAllocs, err := MeasureAllocs(s.Addr, false, 50)
	if err != nil {
		t.Fatal(err)
	}
	smallBody, _, err := Fetch(s.Addr, false)
	if err != nil {
		t.Fatal(err)
	}
	smallExpo, err := Parse(smallBody)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
	printReport(os.Stdout, w, results, retOurs, retContrib, smallExpo, smallAllocs)
}

// TestEncodings prints only the report's table of ours by encoding and
// shard (printEncodings), for a quicker look than the whole report. Run
// with -v.
func TestEncodings(t *testing.T) {
	if testing.Short() {
		t.Skip("takes about a minute")
	}
	closeCurrent(t)
	s, err := Start(Ours, Kong10k)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	enc, err := MeasureEncodings(s, Kong10k, encodingRuns, encodingChanges)
	if err != nil {
		t.Fatal(err)
	}
	printEncodings(os.Stdout, enc)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }
func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/1e3) }
func mib(b float64) string      { return fmt.Sprintf("%.2f MiB", b/(1<<20)) }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func printReport(out io.Writer, w Workload, rs map[string]*result, retOurs, retContrib Retained, smallExpo *Exposition, smallAllocs Allocs) {
	p := func(format string, a ...any) { fmt.Fprintf(out, format, a...) }
	ours := rs[Ours]
	p("\n=== promstream bench: kong10k, %s, GOMAXPROCS=%d, %s/%s ===\n", runtime.Version(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH)
	p("workload: %d upstreams x %d targets x %d states = %d health gauges; %d routes x %d codes = %d request counters;\n",
		w.Upstreams, w.TargetsPerUpstream, len(HealthStates), w.HealthSeries(), w.Routes, len(Codes), w.RequestSeries())
	p("          %d latency histograms x (%d bounds + +Inf + _sum + _count) = %d lines; complete exposition = %d sample lines\n\n",
		w.LatencySeries(), len(LatencyBounds), w.LatencySeries()*(len(LatencyBounds)+3), w.SampleLines())

	p("-- exposition check (one identity scrape each; series compared with the lower bound's by name, sorted labels, value) --\n")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "contender\tsetup\tfirst scrape (time, allocs, bytes)\tlines\tsamples\tbytes\tmatch/missing/extra/diff\tsample lines per family (TYPE)")
	for _, key := range Contenders {
		r := rs[key]
		e := r.expo
		fmt.Fprintf(tw, "%s\t%s\t%s, %d, %s\t%d\t%d\t%d\t%d/%d/%d/%d\t%s\n", Titles[key], ms(r.setup),
			ms(r.first.Duration), r.first.Objects, mib(float64(r.first.Bytes)), e.Lines, e.Samples, e.Bytes,
			r.match[0], r.match[1], r.match[2], r.match[3], e.FamilySummary())
	}
	tw.Flush()
	complete := ours.expo.Samples == w.SampleLines() && ours.match[1] == 0
	if !complete {
		p("NOTE: ours exposes %d of %d sample lines (%d missing vs the lower bound): the time ratios below compare\n"+
			"      unequal work; the ns/sample column and the ratio per sample line are the like-for-like figures.\n",
			ours.expo.Samples, w.SampleLines(), ours.match[1])
	}
	p("\n")

	p("-- uncompressed scrape over loopback HTTP (raw HTTP/1.1 client reads the whole body; median of N after 1 warm-up) --\n")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "contender\tmedian\tmin\tN\tns/sample\tvs ours (time)\tvs ours (per sample)\ttarget\tresult\tallocs/scrape\tof which net/http chunk hdrs\tallocs excl. chunk hdrs\talloc bytes/scrape\tpeak heap growth\t")
	perSample := func(r *result) float64 { return float64(r.plain.Median) / float64(r.expo.Samples) }
	for _, key := range Contenders {
		r := rs[key]
		var ratio, ratioPS float64
		var target, res string
		switch key {
		case Ours:
			target, res = "allocs ≤ 100, heap ≤ 1 MiB", verdict(r.allocs.Objects <= 100 && r.allocs.PeakHeap <= 1<<20)
			if res != "met" && r.allocs.Objects-r.allocs.Chunks <= 100 && r.allocs.PeakHeap <= 1<<20 {
				res = "MISSED (met excl. chunk hdrs)"
			}
		case LowerBound:
			ratio = float64(ours.plain.Median) / float64(r.plain.Median)
			ratioPS = perSample(ours) / perSample(r)
			target, res = "ours ≤ 2x", verdict(ratio <= 2 && ratioPS <= 2)
		default:
			ratio = float64(r.plain.Median) / float64(ours.plain.Median)
			ratioPS = perSample(r) / perSample(ours)
			min := map[string]float64{Contrib: 40, ClientGolang: 20, Victoria: 3}[key]
			target, res = fmt.Sprintf("≥ %gx", min), verdict(ratio >= min && ratioPS >= min)
		}
		rs1, rs2 := "-", "-"
		if ratio > 0 {
			rs1, rs2 = fmt.Sprintf("%.2fx", ratio), fmt.Sprintf("%.2fx", ratioPS)
			if key == LowerBound {
				rs1, rs2 = "ours/lb "+rs1, "ours/lb "+rs2
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.1f\t%s\t%s\t%s\t%s\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t\n", Titles[key], ms(r.plain.Median), ms(r.plain.Min), r.plain.N,
			perSample(r), rs1, rs2, target, res, r.allocs.Objects, r.allocs.Chunks, r.allocs.Objects-r.allocs.Chunks, r.allocs.Bytes, mib(float64(r.allocs.PeakHeap)))
	}
	tw.Flush()
	p("allocation independence (ours): kong10k %.0f allocs/scrape (%.0f chunk headers) for %d samples; kong1k %.0f allocs/scrape (%.0f chunk headers) for %d samples\n\n",
		ours.allocs.Objects, ours.allocs.Chunks, ours.expo.Samples, smallAllocs.Objects, smallAllocs.Chunks, smallExpo.Samples)

	p("-- gzip scrape (Accept-Encoding: gzip; compressed body read, not decompressed) --\n")
	cg := rs[ClientGolang]
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "contender\tmedian\tmin\tN\tbytes on wire\tallocs/scrape\talloc bytes/scrape\tpeak heap growth\t")
	for _, key := range []string{Ours, ClientGolang} {
		r := rs[key]
		if !r.gz.Gzip {
			fmt.Fprintf(tw, "%s\tnot supported (answered without Content-Encoding: gzip)\t\t\t\t\t\t\t\n", Titles[key])
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.0f\t%.0f\t%s\t\n", Titles[key], ms(r.gz.Median), ms(r.gz.Min), r.gz.N, r.gz.Bytes,
			r.gzAllocs.Objects, r.gzAllocs.Bytes, mib(float64(r.gzAllocs.PeakHeap)))
	}
	tw.Flush()
	if ours.gz.Gzip && cg.gz.Gzip {
		ratio := float64(cg.gz.Median) / float64(ours.gz.Median)
		p("client_golang/ours gzip: %.2fx (target ≥ 8x): %s\n\n", ratio, verdict(ratio >= 8))
	} else {
		p("client_golang/ours gzip: n/a, ours does not support gzip (target ≥ 8x): MISSED\n\n")
	}

	printEncodings(out, ours.enc)

	p("-- ingest isolation: ConsumeMetrics of a %d-route batch (30 counter + 10 histogram points, existing series), 200µs apart --\n", IngestBatchRoutes)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "contender\tcalls idle\tidle p50\tidle p99\tidle max\tcalls busy\tscrapes\tbusy p50\tbusy p99\tbusy max\tcalls > 1 ms\tp99 busy/idle\ttarget\tresult\tbusy: mutex wait, max sched delay, GCs\t")
	for _, key := range []string{Ours, Contrib} {
		r := rs[key]
		ratio := float64(r.busy.P99) / float64(r.idle.P99)
		target, res := "≤ 1.5x, max ≤ 1 ms", verdict(ratio <= 1.5 && r.busy.Max <= time.Millisecond)
		if key == Contrib {
			target, res = "(issue: ~2x)", "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%d\t%.2fx\t%s\t%s\t%s, %s, %d\t\n", Titles[key], r.idle.N, us(r.idle.P50), us(r.idle.P99), us(r.idle.Max),
			r.busy.N, r.busy.Scrapes, us(r.busy.P50), us(r.busy.P99), us(r.busy.Max), r.busy.Over1ms, ratio, target, res,
			us(r.busy.MutexWait), us(r.busy.SchedMax), r.busy.GCs)
	}
	tw.Flush()
	p("\n")

	p("-- memory: live heap growth (after GC) per stored counter series vs its rendered `name{labels}` block --\n")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "contender\tseries\tbytes/series\tlabel block bytes\tratio\ttarget\tresult\t")
	for _, x := range []struct {
		key string
		r   Retained
	}{{Ours, retOurs}, {Contrib, retContrib}} {
		ratio := x.r.BytesPerSeries / x.r.PrefixLen
		target, res := "≤ 3x", verdict(ratio <= 3)
		if x.key != Ours {
			target, res = "(context)", "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f\t%.2fx\t%s\t%s\t\n", Titles[x.key], x.r.Series, x.r.BytesPerSeries, x.r.PrefixLen, ratio, target, res)
	}
	tw.Flush()
	p("%s\n", strings.Repeat("=", 40))
}

var changeTitles = map[Change]string{
	Unchanged:      "nothing changed",
	EighthOfRoutes: "1 route in 8 changed",
	AllRoutes:      "every route changed",
}

// printEncodings prints ours' scrapes by encoding and shard (issue 28
// items 4 and 7): gzip and zstd against plain, and each shard against the
// whole, in wall time and CPU, every figure from the same interleaved run.
func printEncodings(out io.Writer, enc map[Change]map[ScrapeKind]Encoded) {
	p := func(format string, a ...any) { fmt.Fprintf(out, format, a...) }
	p("-- ours by encoding and shard (median of %d rounds, kinds interleaved; before each scrape of a changing case its batch\n", encodingRuns)
	p("   is consumed, untimed; cpu = this process's getrusage across the scrape: the server, plus the client reading the body) --\n")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "change\tscrape\twall\tcpu\tbytes on wire\twall vs plain\tcpu vs plain\t")
	name := func(k ScrapeKind) string {
		e := k.Encoding
		if e == "" {
			e = "plain"
		}
		if k.Shard >= 0 {
			return fmt.Sprintf("%s shard %d/%d", e, k.Shard, EncodingShards)
		}
		return e
	}
	for _, c := range encodingChanges {
		m := enc[c]
		if m == nil {
			continue
		}
		for _, k := range []ScrapeKind{{"", -1}, {"gzip", -1}, {"zstd", -1}} {
			e, plain := m[k], m[ScrapeKind{"", -1}]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.2fx\t%.2fx\t\n", changeTitles[c], name(k), ms(e.Wall), ms(e.CPU), e.Bytes,
				float64(e.Wall)/float64(plain.Wall), float64(e.CPU)/float64(plain.CPU))
		}
	}
	tw.Flush()
	for _, c := range encodingChanges {
		m := enc[c]
		if m == nil {
			continue
		}
		plain, gz, zs := m[ScrapeKind{"", -1}], m[ScrapeKind{"gzip", -1}], m[ScrapeKind{"zstd", -1}]
		rw, rc := float64(gz.Wall)/float64(plain.Wall), float64(gz.CPU)/float64(plain.CPU)
		p("gzip/plain, %s: %.2fx wall, %.2fx cpu (target ≤ 1.5x): %s; zstd/plain beside it: %.2fx wall, %.2fx cpu\n",
			changeTitles[c], rw, rc, verdict(rw <= 1.5 && rc <= 1.5), float64(zs.Wall)/float64(plain.Wall), float64(zs.CPU)/float64(plain.CPU))
	}
	p("\n")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "change\tencoding\twhole cpu\tshard cpu (each)\tshard/whole cpu mean\tmax\tshard/whole wall mean\ttarget\tresult\t")
	for _, c := range encodingChanges {
		m := enc[c]
		if m == nil {
			continue
		}
		for _, e := range []string{"", "gzip"} {
			whole := m[ScrapeKind{e, -1}]
			var each []string
			var sumCPU, maxCPU, sumWall float64
			for i := range EncodingShards {
				sh := m[ScrapeKind{e, i}]
				each = append(each, ms(sh.CPU))
				f := float64(sh.CPU) / float64(whole.CPU)
				sumCPU += f
				maxCPU = max(maxCPU, f)
				sumWall += float64(sh.Wall) / float64(whole.Wall)
			}
			mean := sumCPU / EncodingShards
			label := e
			if label == "" {
				label = "plain"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.3f\t%.3f\t%.3f\t≤ 0.27\t%s\t\n", changeTitles[c], label, ms(whole.CPU), strings.Join(each, ", "),
				mean, maxCPU, sumWall/EncodingShards, verdict(mean <= 0.27))
		}
	}
	tw.Flush()
	p("\n")
}
