package testutil // import "github.com/otelgateway/otelgateway/internal/testutil"

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Fault is how a FakeKong misbehaves.
type Fault int32

// The faults a FakeKong can serve, for every request or one upstream's.
const (
	FaultNone      Fault = iota
	Fault500             // 500 with Kong's error JSON
	FaultHTML            // 200 with an HTML page (a proxy's error page)
	FaultTruncated       // 200 with the first half of the JSON
	FaultWrongJSON       // 200 with JSON of another shape
	FaultLoop            // the upstream list's last `next` points back at its first page
	FaultSlow            // never answers until the client gives up (or Release)
)

// FakeAddress is one balancer address of a target.
type FakeAddress struct {
	IP     string
	Port   int
	Health string // HEALTHY, UNHEALTHY, HEALTHCHECKS_OFF
}

// FakeTarget is one target; a DNSError target has no addresses.
type FakeTarget struct {
	Target    string
	DNSError  bool
	Addresses []FakeAddress
}

type fakeUpstream struct {
	id, name string
	targets  []FakeTarget
	fault    Fault
}

// FakeKong serves the Kong Admin API paths the health poller reads, in
// Kong's real shapes (docs/gateways.md §1b): GET /upstreams and
// GET /upstreams/{id}/health, both paginated with `size`, an opaque
// `offset` and a `next` path (null on the last page), plus node_id.
// Responses are rendered with append, so a 10k-upstream fake costs little
// CPU beside the poller it serves.
type FakeKong struct {
	mu        sync.Mutex
	upstreams []*fakeUpstream
	byID      map[string]*fakeUpstream
	byName    map[string]*fakeUpstream

	fault    atomic.Int32
	requests atomic.Int64
	// Token, when set, must arrive as Kong-Admin-Token (else 401).
	Token   string
	release chan struct{}
	once    sync.Once
}

// NewFakeKong returns a fake with n upstreams ("upstream-00000"…), each with
// targetsPer HEALTHY targets of one address (10.a.b.c:8000).
func NewFakeKong(n, targetsPer int) *FakeKong {
	f := &FakeKong{byID: make(map[string]*fakeUpstream), byName: make(map[string]*fakeUpstream), release: make(chan struct{})}
	k := 0
	for i := range n {
		name := "upstream-" + pad5(i)
		targets := make([]FakeTarget, targetsPer)
		for j := range targets {
			ip := "10." + strconv.Itoa(k>>16&255) + "." + strconv.Itoa(k>>8&255) + "." + strconv.Itoa(k&255)
			k++
			targets[j] = FakeTarget{Target: ip + ":8000", Addresses: []FakeAddress{{IP: ip, Port: 8000, Health: "HEALTHY"}}}
		}
		f.AddUpstream(name, targets)
	}
	return f
}

func pad5(i int) string {
	s := strconv.Itoa(i)
	return strings.Repeat("0", max(0, 5-len(s))) + s
}

// AddUpstream adds (or replaces the targets of) an upstream.
func (f *FakeKong) AddUpstream(name string, targets []FakeTarget) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u := f.byName[name]; u != nil {
		u.targets = targets
		return
	}
	u := &fakeUpstream{id: "id-" + name, name: name, targets: targets}
	f.upstreams = append(f.upstreams, u)
	f.byID[u.id] = u
	f.byName[name] = u
}

// RemoveUpstream deletes an upstream; its health path then answers 404.
func (f *FakeKong) RemoveUpstream(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u := f.byName[name]
	if u == nil {
		return
	}
	delete(f.byName, name)
	delete(f.byID, u.id)
	for i, x := range f.upstreams {
		if x == u {
			f.upstreams = append(f.upstreams[:i], f.upstreams[i+1:]...)
			break
		}
	}
}

// SetHealth sets the health of address a of target t of an upstream.
func (f *FakeKong) SetHealth(upstream string, t, a int, health string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byName[upstream].targets[t].Addresses[a].Health = health
}

// SetFault makes every request misbehave (FaultNone: behave).
func (f *FakeKong) SetFault(fault Fault) { f.fault.Store(int32(fault)) }

// SetUpstreamFault makes one upstream's health requests misbehave.
func (f *FakeKong) SetUpstreamFault(upstream string, fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byName[upstream].fault = fault
}

// Requests is the number of requests served so far.
func (f *FakeKong) Requests() int64 { return f.requests.Load() }

// Release unblocks every FaultSlow request, for a clean server Close.
func (f *FakeKong) Release() { f.once.Do(func() { close(f.release) }) }

const fakeNodeID = "cbb297c0-14a9-46bc-ad91-1d0ef9b42df9"

func (f *FakeKong) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	if f.Token != "" && r.Header.Get("Kong-Admin-Token") != f.Token {
		writeJSON(w, http.StatusUnauthorized, []byte(`{"message":"Invalid credentials. Token or User credentials required"}`))
		return
	}
	size := 100 // Kong's default page size
	if s, err := strconv.Atoi(r.URL.Query().Get("size")); err == nil && s > 0 {
		size = s
	}
	offset := decodeOffset(r.URL.Query().Get("offset"))
	path := r.URL.Path
	fault := Fault(f.fault.Load())
	if path == "/upstreams" {
		f.serveFault(w, r, fault, func() []byte { return f.upstreamPage(size, offset, fault == FaultLoop) })
		return
	}
	id, ok := strings.CutPrefix(path, "/upstreams/")
	id, ok2 := strings.CutSuffix(id, "/health")
	if !ok || !ok2 {
		writeJSON(w, http.StatusNotFound, []byte(`{"message":"Not found"}`))
		return
	}
	f.mu.Lock()
	u := f.byID[id]
	if u != nil && u.fault != FaultNone {
		fault = u.fault
	}
	f.mu.Unlock()
	if u == nil {
		writeJSON(w, http.StatusNotFound, []byte(`{"message":"Not found"}`))
		return
	}
	f.serveFault(w, r, fault, func() []byte { return f.healthPage(u, size, offset) })
}

func (f *FakeKong) serveFault(w http.ResponseWriter, r *http.Request, fault Fault, body func() []byte) {
	switch fault {
	case Fault500:
		writeJSON(w, http.StatusInternalServerError, []byte(`{"message":"An unexpected error occurred"}`))
	case FaultHTML:
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"))
	case FaultTruncated:
		b := body()
		writeJSON(w, http.StatusOK, b[:len(b)/2])
	case FaultWrongJSON:
		writeJSON(w, http.StatusOK, []byte(`{"data":{"unexpected":true},"next":null}`))
	case FaultSlow:
		select {
		case <-r.Context().Done():
		case <-f.release:
		}
	default:
		writeJSON(w, http.StatusOK, body())
	}
}

func writeJSON(w http.ResponseWriter, code int, b []byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func encodeOffset(i int) string {
	return base64.StdEncoding.EncodeToString([]byte(`["` + strconv.Itoa(i) + `"]`))
}

func decodeOffset(s string) int {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) < 4 {
		return 0
	}
	i, err := strconv.Atoi(string(b[2 : len(b)-2]))
	if err != nil {
		return 0
	}
	return i
}

// appendNext closes a page: its offset and next, or next null.
func appendNext(b []byte, base string, end, total, size int) []byte {
	if end >= total {
		return append(b, `],"next":null,"node_id":"`+fakeNodeID+`"}`...)
	}
	off := encodeOffset(end)
	b = append(b, `],"offset":"`...)
	b = append(b, off...)
	b = append(b, `","next":"`...)
	b = append(b, base...)
	b = append(b, "?offset="...)
	b = append(b, strings.ReplaceAll(off, "=", "%3D")...)
	b = append(b, "&size="...)
	b = strconv.AppendInt(b, int64(size), 10)
	return append(b, `","node_id":"`+fakeNodeID+`"}`...)
}

func (f *FakeKong) upstreamPage(size, offset int, loop bool) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	end := min(offset+size, len(f.upstreams))
	b := make([]byte, 0, 64+(end-offset)*160)
	b = append(b, `{"data":[`...)
	for i := offset; i < end; i++ {
		u := f.upstreams[i]
		if i > offset {
			b = append(b, ',')
		}
		b = append(b, `{"id":"`...)
		b = append(b, u.id...)
		b = append(b, `","name":"`...)
		b = append(b, u.name...)
		b = append(b, `","algorithm":"round-robin","slots":10000,"hash_on":"none","created_at":1700000000,"tags":null}`...)
	}
	if loop && end >= len(f.upstreams) {
		// A `next` that points back at the first page.
		return append(b, `],"next":"/upstreams?size=`+strconv.Itoa(size)+`","node_id":"`+fakeNodeID+`"}`...)
	}
	return appendNext(b, "/upstreams", end, len(f.upstreams), size)
}

func (f *FakeKong) healthPage(u *fakeUpstream, size, offset int) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	end := min(offset+size, len(u.targets))
	b := make([]byte, 0, 64+(end-offset)*400)
	b = append(b, `{"data":[`...)
	for i := offset; i < end; i++ {
		t := u.targets[i]
		if i > offset {
			b = append(b, ',')
		}
		health := targetHealth(t)
		b = append(b, `{"id":"t-`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `","target":"`...)
		b = append(b, t.Target...)
		b = append(b, `","weight":100,"health":"`...)
		b = append(b, health...)
		b = append(b, `","created_at":1700000000.123,"upstream":{"id":"`...)
		b = append(b, u.id...)
		b = append(b, `"},"tags":null,"data":{"host":"`...)
		host, port, _ := strings.Cut(t.Target, ":")
		b = append(b, host...)
		b = append(b, `","port":`...)
		b = append(b, port...)
		if t.DNSError {
			b = append(b, `,"dns":"dns server error: 3 name error","nodeWeight":100,"weight":{"total":0,"unavailable":0,"available":0},"addresses":{}}}`...)
			continue
		}
		b = append(b, `,"dns":"A","nodeWeight":100,"weight":{"total":100,"unavailable":0,"available":100},"addresses":[`...)
		for j, a := range t.Addresses {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"ip":"`...)
			b = append(b, a.IP...)
			b = append(b, `","port":`...)
			b = strconv.AppendInt(b, int64(a.Port), 10)
			b = append(b, `,"weight":100,"health":"`...)
			b = append(b, a.Health...)
			b = append(b, `"}`...)
		}
		b = append(b, `]}}`...)
	}
	return appendNext(b, "/upstreams/"+u.id+"/health", end, len(u.targets), size)
}

// targetHealth is Kong's target-level summary of its addresses (§1b).
func targetHealth(t FakeTarget) string {
	if t.DNSError {
		return "DNS_ERROR"
	}
	h := "HEALTHCHECKS_OFF"
	for _, a := range t.Addresses {
		switch a.Health {
		case "HEALTHY":
			return "HEALTHY"
		case "UNHEALTHY":
			h = "UNHEALTHY"
		}
	}
	return h
}
