package health

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"time"
)

// CPU is this process's CPU time (getrusage RUSAGE_SELF, user + system).
func CPU() time.Duration {
	u, s := rusage()
	return u + s
}

// Scrape is one GET /metrics.
type Scrape struct {
	Duration   time.Duration // request sent → last body byte read
	Bytes      int
	Series     int    // kong_upstream_target_health sample lines
	Ones       int    // of those, value 1
	OtherLines int    // any other non-comment line
	Other      string // the first of them
}

var scrapeClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}

// ScrapeOnce scrapes the exporter and counts the health family's samples.
func ScrapeOnce(addr string, buf *bytes.Buffer) (Scrape, error) {
	var s Scrape
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", http.NoBody)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	buf.Reset()
	start := time.Now()
	resp, err := scrapeClient.Do(req)
	if err != nil {
		return s, err
	}
	_, err = io.Copy(buf, resp.Body)
	s.Duration = time.Since(start)
	resp.Body.Close()
	if err != nil {
		return s, err
	}
	if resp.StatusCode != http.StatusOK {
		return s, errors.New("scrape: " + resp.Status)
	}
	s.Bytes = buf.Len()
	sc := bufio.NewScanner(bytes.NewReader(buf.Bytes()))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0 || line[0] == '#':
		case bytes.HasPrefix(line, []byte("kong_upstream_target_health{")):
			s.Series++
			if bytes.HasSuffix(line, []byte(" 1")) {
				s.Ones++
			}
		default:
			s.OtherLines++
			if s.Other == "" {
				s.Other = string(line)
			}
		}
	}
	return s, sc.Err()
}

// CloseIdle drops the scrape client's keep-alive connection.
func CloseIdle() { scrapeClient.CloseIdleConnections() }

// Median of durations (sorts d).
func Median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// AllocShares splits the heap allocations made while f runs by who made
// them, from a MemProfileRate=1 heap profile (every allocation recorded
// with its stack). An allocation belongs to the innermost frame of this
// repository on its stack (the receiver or the exporter and its internal
// packages); "pdata" marks that pdata code sits between that frame and the
// allocation (pdata allocating on our behalf). Stacks without a frame of
// ours are "other" (net/http, the telemetry SDK, the runtime).
type AllocShares struct {
	Receiver, ReceiverPdata, Exporter, ExporterPdata, Other      int64 // objects
	ReceiverB, ReceiverPdataB, ExporterB, ExporterPdataB, OtherB int64 // bytes
}

// Total objects.
func (a AllocShares) Total() int64 {
	return a.Receiver + a.ReceiverPdata + a.Exporter + a.ExporterPdata + a.Other
}

// MeasureAllocShares runs warm, then f, with every allocation profiled,
// and counts f's. warm lets the new rate take hold: each P keeps the
// sampling point drawn under the old rate until it passes it. Profiling
// every allocation slows f down several times: time it separately.
func MeasureAllocShares(warm, f func() error) (AllocShares, error) {
	var a AllocShares
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = old }()
	if err := warm(); err != nil {
		return a, err
	}
	before := memProfile()
	if err := f(); err != nil {
		return a, err
	}
	after := memProfile()
	for stack, r := range after {
		prev := before[stack]
		objs, byts := r.AllocObjects-prev.AllocObjects, r.AllocBytes-prev.AllocBytes
		if objs == 0 {
			continue
		}
		owner, viaPdata := classify(r.Stack())
		switch {
		case owner == "receiver" && viaPdata:
			a.ReceiverPdata, a.ReceiverPdataB = a.ReceiverPdata+objs, a.ReceiverPdataB+byts
		case owner == "receiver":
			a.Receiver, a.ReceiverB = a.Receiver+objs, a.ReceiverB+byts
		case owner == "exporter" && viaPdata:
			a.ExporterPdata, a.ExporterPdataB = a.ExporterPdata+objs, a.ExporterPdataB+byts
		case owner == "exporter":
			a.Exporter, a.ExporterB = a.Exporter+objs, a.ExporterB+byts
		default:
			a.Other, a.OtherB = a.Other+objs, a.OtherB+byts
		}
	}
	return a, nil
}

const (
	repo  = "github.com/otelgateway/otelgateway/"
	pdata = "go.opentelemetry.io/collector/pdata/"
)

// classify walks the stack from the allocation outwards, inlined frames
// expanded (pdata's small accessors are inlined into their callers).
func classify(stack []uintptr) (owner string, viaPdata bool) {
	frames := runtime.CallersFrames(stack)
	for {
		f, more := frames.Next()
		name := f.Function
		switch {
		case strings.HasPrefix(name, pdata):
			viaPdata = true
		case strings.HasPrefix(name, repo+"receiver/"):
			return "receiver", viaPdata
		case strings.HasPrefix(name, repo+"bench/"):
			return "other", viaPdata // this harness (the counting consumer)
		case strings.HasPrefix(name, repo):
			return "exporter", viaPdata
		}
		if !more {
			return "other", viaPdata
		}
	}
}

// memProfile reads the heap profile, published as of the last completed
// GC: two GCs make every allocation so far visible.
func memProfile() map[[32]uintptr]runtime.MemProfileRecord {
	runtime.GC()
	runtime.GC()
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, true)
	for {
		recs = make([]runtime.MemProfileRecord, n+100)
		var ok bool
		n, ok = runtime.MemProfile(recs, true)
		if ok {
			recs = recs[:n]
			break
		}
	}
	m := make(map[[32]uintptr]runtime.MemProfileRecord, len(recs))
	for _, r := range recs {
		m[r.Stack0] = r
	}
	return m
}

// MemAllocs is the MemStats mallocs/bytes delta over f.
func MemAllocs(f func() error) (objects, bytes uint64, err error) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err = f()
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs, after.TotalAlloc - before.TotalAlloc, err
}
