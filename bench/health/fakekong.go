package health

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The fake Kong Admin API is a minimal copy of the main module's
// internal/testutil.FakeKong (internal packages of another module cannot be
// imported): the happy path only, GET /upstreams and
// GET /upstreams/{id}/health in Kong's paginated shapes
// (docs/gateways.md §1b), every page rendered once at start so serving
// costs little CPU. It runs in a child process (this test binary re-executed
// with envFakeKong set), so the receiver's CPU time (getrusage of this
// process) does not include the fake's; the child reports its own on
// GET /_rusage.

const (
	envFakeKong = "HEALTHBENCH_FAKEKONG" // "upstreams,targetsPerUpstream" in the child
	fakeNodeID  = "cbb297c0-14a9-46bc-ad91-1d0ef9b42df9"
)

// Scale of the benchmark: 10k upstreams × 2 targets, one address
// each, all HEALTHY: 20k rows, 80k kong_upstream_target_health series.
const (
	Upstreams  = 10_000
	TargetsPer = 2
)

type fakeKongServer struct {
	upstreamPages map[string][]byte // request URI → body
	healthPages   map[string][]byte

	// What the poller sent: requests served, the most in flight at once,
	// the first and last arrival (GET /_stats).
	mu              sync.Mutex
	count, inFlight int
	peak            int
	first, last     time.Time
}

func upstreamName(i int) string { return fmt.Sprintf("upstream-%05d", i) }

// targetIP numbers the targets 10.a.b.c across the whole fake.
func targetIP(k int) string {
	return "10." + strconv.Itoa(k>>16&255) + "." + strconv.Itoa(k>>8&255) + "." + strconv.Itoa(k&255)
}

func offsetParam(i int) string {
	return strings.ReplaceAll(base64.StdEncoding.EncodeToString([]byte(`["`+strconv.Itoa(i)+`"]`)), "=", "%3D")
}

// newFakeKong renders every page for the page sizes in sizes (every
// health page fits in one).
func newFakeKong(upstreams, targetsPer int, sizes ...int) *fakeKongServer {
	f := &fakeKongServer{upstreamPages: map[string][]byte{}, healthPages: make(map[string][]byte, upstreams)}
	for _, size := range sizes {
		f.renderList(upstreams, size)
	}
	k := 0
	for i := range upstreams {
		id := "id-" + upstreamName(i)
		b := []byte(`{"data":[`)
		for j := range targetsPer {
			ip := targetIP(k)
			k++
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":"t-`+strconv.Itoa(j)+`","target":"`+ip+`:8000","weight":100,"health":"HEALTHY","created_at":1700000000.123,"upstream":{"id":"`+id+`"},"tags":null,`+
				`"data":{"host":"`+ip+`","port":8000,"dns":"A","nodeWeight":100,"weight":{"total":100,"unavailable":0,"available":100},`+
				`"addresses":[{"ip":"`+ip+`","port":8000,"weight":100,"health":"HEALTHY"}]}}`...)
		}
		f.healthPages[id] = appendNext(b, "/upstreams/"+id+"/health", targetsPer, targetsPer, 1000)
	}
	return f
}

// renderList renders the upstream list's pages of size size.
func (f *fakeKongServer) renderList(upstreams, size int) {
	for off := 0; off < upstreams; off += size {
		end := min(off+size, upstreams)
		b := []byte(`{"data":[`)
		for i := off; i < end; i++ {
			if i > off {
				b = append(b, ',')
			}
			b = append(b, `{"id":"id-`+upstreamName(i)+`","name":"`+upstreamName(i)+`","algorithm":"round-robin","slots":10000,"hash_on":"none","created_at":1700000000,"tags":null}`...)
		}
		b = appendNext(b, "/upstreams", end, upstreams, size)
		uri := "/upstreams?size=" + strconv.Itoa(size)
		if off > 0 {
			uri = "/upstreams?offset=" + offsetParam(off) + "&size=" + strconv.Itoa(size)
		}
		f.upstreamPages[uri] = b
	}
}

func appendNext(b []byte, base string, end, total, size int) []byte {
	if end >= total {
		return append(b, `],"next":null,"node_id":"`+fakeNodeID+`"}`...)
	}
	return append(b, `],"offset":"`+strings.ReplaceAll(offsetParam(end), "%3D", "=")+`","next":"`+base+"?offset="+offsetParam(end)+"&size="+strconv.Itoa(size)+`","node_id":"`+fakeNodeID+`"}`...)
}

func (f *fakeKongServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/_rusage":
		u, s := rusage()
		_, _ = fmt.Fprintf(w, "%d %d", u, s)
		return
	case "/_stats":
		f.mu.Lock()
		_, _ = fmt.Fprintf(w, "%d %d %d %d", f.count, f.peak, f.first.UnixNano(), f.last.UnixNano())
		if r.URL.Query().Get("reset") != "" {
			f.count, f.peak, f.first, f.last = 0, f.inFlight, time.Time{}, time.Time{}
		}
		f.mu.Unlock()
		return
	}
	now := time.Now()
	f.mu.Lock()
	f.count++
	f.inFlight++
	f.peak = max(f.peak, f.inFlight)
	if f.first.IsZero() {
		f.first = now
	}
	f.last = now
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	var body []byte
	if r.URL.Path == "/upstreams" {
		body = f.upstreamPages[r.URL.RequestURI()]
	} else if id, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/upstreams/"), "/health"); ok {
		body = f.healthPages[id]
	}
	if body == nil {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"message":"Not found"}`))
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_, _ = w.Write(body)
}

// rusage is this process's user and system CPU time.
func rusage() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// runFakeKongChild is the child's main: serve on a loopback port, print
// its address, and exit when stdin closes (the parent stopped or died).
func runFakeKongChild(spec string) {
	var n, per int
	if _, err := fmt.Sscanf(spec, "%d,%d", &n, &per); err != nil {
		fmt.Fprintln(os.Stderr, "fake kong:", err)
		os.Exit(2)
	}
	srv := httptest.NewServer(newFakeKong(n, per, 100, 1000))
	fmt.Println(srv.Listener.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
	srv.Close()
}

// FakeKong is the running child process.
type FakeKong struct {
	URL   string
	cmd   *exec.Cmd
	stdin io.Closer
}

// StartFakeKong starts the fake in a child process.
func StartFakeKong(upstreams, targetsPer int) (*FakeKong, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envFakeKong+"="+strconv.Itoa(upstreams)+","+strconv.Itoa(targetsPer))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = stdin.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("fake kong did not start: %w", err)
	}
	addr := strings.TrimSpace(line)
	if _, _, err := net.SplitHostPort(addr); err != nil {
		_ = stdin.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("fake kong printed %q", line)
	}
	return &FakeKong{URL: "http://" + addr, cmd: cmd, stdin: stdin}, nil
}

// CPU is the child's user+system CPU time so far.
func (f *FakeKong) CPU() (time.Duration, error) {
	c := http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(f.URL + "/_rusage")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var u, s int64
	if _, err := fmt.Fscanf(resp.Body, "%d %d", &u, &s); err != nil {
		return 0, err
	}
	return time.Duration(u + s), nil
}

// Close stops the child and waits for it.
func (f *FakeKong) Close() error {
	if f == nil || f.cmd == nil {
		return nil
	}
	err := f.stdin.Close()
	werr := f.cmd.Wait()
	f.cmd = nil
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		return errors.Join(err, werr)
	}
	return err
}

// AdminStats is what the poller sent the fake since the last reset.
type AdminStats struct {
	Requests     int
	PeakInFlight int
	First, Last  time.Time
}

// Stats reads the fake's request statistics, and resets them when reset.
func (f *FakeKong) Stats(reset bool) (AdminStats, error) {
	c := http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	u := f.URL + "/_stats"
	if reset {
		u += "?reset=1"
	}
	resp, err := c.Get(u)
	if err != nil {
		return AdminStats{}, err
	}
	defer resp.Body.Close()
	var s AdminStats
	var first, last int64
	if _, err := fmt.Fscanf(resp.Body, "%d %d %d %d", &s.Requests, &s.PeakInFlight, &first, &last); err != nil {
		return s, err
	}
	if s.Requests > 0 {
		s.First, s.Last = time.Unix(0, first), time.Unix(0, last)
	}
	return s, nil
}
