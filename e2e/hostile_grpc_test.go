package e2e

// Hostile HTTP/2 on the gRPC port of the built collector at the receiver's
// default settings (hostileConfig): the rapid reset attack (CVE-2023-44487)
// while a real OTLP/gRPC exporter sends spans, and connections that open
// and stay silent, with or without the HTTP/2 handshake.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The receiver's gRPC defaults these attacks are held to (receiver README,
// Configuration, and "Connections that stay silent").
const (
	// defaultGRPCMaxConnIdle: keepalive.server_parameters.max_connection_idle.
	defaultGRPCMaxConnIdle = time.Minute
	// grpcHandshakeTimeout: a connection that has not sent the HTTP/2
	// client preface is closed this long after it was accepted.
	grpcHandshakeTimeout = 10 * time.Second
	// goawayPingWait: after its first GOAWAY gRPC waits for the answer to
	// a ping (at most 5 s) before its last GOAWAY and the close.
	goawayPingWait = 5 * time.Second
	// resetAttack is how long the rapid reset attack lasts, resetConns the
	// connections it uses.
	resetAttack = 10 * time.Second
	resetConns  = 8
	// resetRSSBound: the collector's RSS while calls are reset as fast as 8
	// connections can (gRPC stops reading a connection at
	// max_concurrent_streams unfinished handlers).
	resetRSSBound = 256 * mib
	// resetScrapeBound: a full scrape while 2 cores serve the attack.
	resetScrapeBound = 3 * time.Second
)

// h2Conn is a hand-written HTTP/2 client connection on the gRPC port. With
// the handshake it answers settings and pings, records a GOAWAY, and can
// open and reset Export calls as fast as the socket takes them; without it
// it sends nothing at all. closed is when the server closed it.
type h2Conn struct {
	nc     net.Conn
	fr     *http2.Framer
	wr     sync.Mutex
	block  []byte
	next   uint32
	opened time.Time

	resets atomic.Int64
	goaway atomic.Bool
	closed chan time.Time // one value, when the read side ends
}

func dialH2(t *testing.T, addr string, handshake bool) *h2Conn {
	t.Helper()
	opened := time.Now()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	c := &h2Conn{nc: nc, opened: opened, next: 1, closed: make(chan time.Time, 1)}
	if !handshake {
		go func() {
			_, _ = io.Copy(io.Discard, nc) // the server's settings, then its close
			c.closed <- time.Now()
		}()
		return c
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", exportPath}, {":authority", "e2e"},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	c.block = hb.Bytes()
	c.fr = http2.NewFramer(nc, nc)
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if !c.write(func() error { return c.fr.WriteSettings() }) {
		t.Fatal("writing the client settings failed")
	}
	go c.read()
	return c
}

func (c *h2Conn) write(f func() error) bool {
	c.wr.Lock()
	defer c.wr.Unlock()
	return f() == nil
}

func (c *h2Conn) read() {
	defer func() { c.closed <- time.Now() }()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.write(func() error { return c.fr.WriteSettingsAck() })
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				c.write(func() error { return c.fr.WritePing(true, f.Data) })
			}
		case *http2.GoAwayFrame:
			c.goaway.Store(true)
		}
	}
}

// resetBurst opens n Export calls, each HEADERS at once followed by its
// RST_STREAM (CANCEL); false once the connection is gone.
func (c *h2Conn) resetBurst(n int) bool {
	c.wr.Lock()
	defer c.wr.Unlock()
	for range n {
		id := c.next
		c.next += 2
		if c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.block, EndHeaders: true}) != nil ||
			c.fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
			return false
		}
		c.resets.Add(1)
	}
	return true
}

// TestHostileGRPC: 100 connections that never send the HTTP/2 client
// preface and 100 that complete the handshake and open no call are opened
// first; then 8 connections open and reset Export calls as fast as they can
// for 10 s while an OTLP/gRPC exporter (retries off, 4 calls at a time on
// its one connection) exports Envoy spans. Every one of the exporter's
// calls must succeed at its first try and be counted exactly, as must the
// good HTTP traffic; the silent connections must be closed after the
// handshake timeout, the idle ones sent GOAWAY and closed after
// max_connection_idle.
func TestHostileGRPC(t *testing.T) {
	const (
		silentConns = 100
		idleConns   = 100
		margin      = 5 * time.Second
	)
	h := startHostileRun(t, "")
	silent := make([]*h2Conn, silentConns)
	for i := range silent {
		silent[i] = dialH2(t, h.col.grpcAddr, false)
	}
	idle := make([]*h2Conn, idleConns)
	for i := range idle {
		idle[i] = dialH2(t, h.col.grpcAddr, true)
	}

	// The legitimate exporter's batch: 10 Envoy traces (20 spans, 10 roots
	// counted), exported as a whole on every call.
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", grpcGoodJob))))
	const perBatch = 10
	for range perBatch {
		emitEnvoyTrace(tp.Tracer("envoy"), gatewayRequest{method: "GET", path: "/grpc-good", status: 200})
	}
	batch := rec.Ended()
	exp, err := otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpoint(h.col.grpcAddr), otlptracegrpc.WithInsecure(),
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = exp.Shutdown(context.Background()) }()
	if err := exp.ExportSpans(context.Background(), batch); err != nil {
		t.Fatalf("an export before the attack: %v", err)
	}
	var okCalls, refused atomic.Int64
	okCalls.Add(1)

	ctx, stop := context.WithTimeout(context.Background(), resetAttack)
	defer stop()
	attackers := make([]*h2Conn, resetConns)
	var wg sync.WaitGroup
	for i := range attackers {
		attackers[i] = dialH2(t, h.col.grpcAddr, true)
		wg.Add(1)
		go func(c *h2Conn) {
			defer wg.Done()
			for ctx.Err() == nil && c.resetBurst(64) {
			}
		}(attackers[i])
	}
	var mu sync.Mutex
	var lat []time.Duration
	var errs []string
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				start := time.Now()
				err := exp.ExportSpans(context.Background(), batch)
				mu.Lock()
				lat = append(lat, time.Since(start))
				if err != nil {
					refused.Add(1)
					if len(errs) < 5 {
						errs = append(errs, err.Error())
					}
				} else {
					okCalls.Add(1)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	var resets int64
	for _, c := range attackers {
		resets += c.resets.Load()
		_ = c.nc.Close()
	}
	calls := okCalls.Load() + refused.Load() - 1
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("rapid reset: %d calls opened and reset by %d connections in %v; the exporter's %d calls: %d refused at first try (%.1f %%), latency p50 %v max %v",
		resets, resetConns, resetAttack, calls, refused.Load(), 100*float64(refused.Load())/float64(max(calls, 1)),
		lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
	if refused.Load() != 0 {
		t.Errorf("%d of the exporter's %d calls refused during the rapid reset attack, want none: %s", refused.Load(), calls, strings.Join(errs, "; "))
	}
	if calls < 10 {
		t.Errorf("the exporter made %d calls in %v of attack, want at least 10", calls, resetAttack)
	}

	// Silent connections: closed at the handshake timeout after their dial.
	alive := func(cs []*h2Conn, at map[*h2Conn]time.Time) int {
		n := 0
		for _, c := range cs {
			if _, ok := at[c]; ok {
				continue
			}
			select {
			case when := <-c.closed:
				at[c] = when
			default:
				n++
			}
		}
		return n
	}
	silentAt, idleAt := map[*h2Conn]time.Time{}, map[*h2Conn]time.Time{}
	t.Logf("after the attack (%v after they were opened): %d of %d silent and %d of %d idle gRPC connections open",
		time.Since(silent[0].opened).Round(time.Second), alive(silent, silentAt), silentConns, alive(idle, idleAt), idleConns)
	eventually(t, time.Until(silent[silentConns-1].opened.Add(grpcHandshakeTimeout+margin)), "every connection without the client preface closed", func() (bool, string) {
		n := alive(silent, silentAt)
		return n == 0, fmt.Sprintf("%d of %d open %v after the first was opened", n, silentConns, time.Since(silent[0].opened).Round(time.Second))
	})
	for _, c := range silent {
		if took := silentAt[c].Sub(c.opened); took < grpcHandshakeTimeout-time.Second {
			t.Errorf("a connection without the client preface closed after %v, before the %v handshake timeout", took, grpcHandshakeTimeout)
		}
	}
	// Idle connections: GOAWAY and closed after max_connection_idle.
	eventually(t, time.Until(idle[idleConns-1].opened.Add(defaultGRPCMaxConnIdle+goawayPingWait+margin)), "every idle gRPC connection closed", func() (bool, string) {
		n := alive(idle, idleAt)
		return n == 0, fmt.Sprintf("%d of %d open %v after the first was opened", n, idleConns, time.Since(idle[0].opened).Round(time.Second))
	})
	var first, last time.Duration
	for i, c := range idle {
		took := idleAt[c].Sub(c.opened)
		if i == 0 || took < first {
			first = took
		}
		last = max(last, took)
		if !c.goaway.Load() || took < defaultGRPCMaxConnIdle-time.Second {
			t.Errorf("an idle connection closed after %v, GOAWAY %v; want GOAWAY after %v", took, c.goaway.Load(), defaultGRPCMaxConnIdle)
		}
	}
	t.Logf("%d silent connections closed by the collector, %d idle ones sent GOAWAY and closed %v to %v after they were opened",
		silentConns, idleConns, first.Round(100*time.Millisecond), last.Round(100*time.Millisecond))

	// The exporter's spans, counted exactly, and the good HTTP traffic.
	want := expectedCounts{}
	want.add(map[string]string{"job": grpcGoodJob, "http_request_method": "GET", "http_response_status_code": "200"}, int(okCalls.Load())*perBatch)
	eventually(t, convergeTimeout, "the exporter's spans on the exporter, exactly", func() (bool, string) {
		got, _, err := scrapeFamily(h.col, metricName, func(l string) bool { return strings.Contains(l, `job="`+grpcGoodJob+`"`) })
		if err != nil {
			return false, err.Error()
		}
		diff := diffCounts(got, want.exported())
		return diff == "", diff
	})
	waitTelemetry(t, h.col, telemetryName, map[string]string{"outcome": "accepted", "transport": "grpc"}, float64(okCalls.Load()))
	h.finish(t, resetRSSBound, 0, resetScrapeBound)
}

// grpcGoodJob is the service.name (job) of TestHostileGRPC's exporter.
const grpcGoodJob = "grpc-good"
