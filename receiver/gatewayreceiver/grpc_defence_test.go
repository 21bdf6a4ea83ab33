package gatewayreceiver

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/otel/attribute"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/admission"
)

// resetter speaks HTTP/2 by hand to do what the 2023 "rapid reset" attack
// (CVE-2023-44487) does: open an Export call and reset it at once, as fast
// as the connection takes them. It reads (and drops) what the server sends,
// answering its settings and pings, so the server never waits on it.
type resetter struct {
	nc     net.Conn
	fr     *http2.Framer
	wr     sync.Mutex
	block  []byte
	next   uint32
	opened atomic.Int64
	goaway atomic.Bool
	done   chan struct{}
}

func dialResetter(t *testing.T, addr string) *resetter {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", exportMethod}, {":authority", "x"},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	c := &resetter{nc: nc, fr: http2.NewFramer(nc, nc), block: hb.Bytes(), next: 1, done: make(chan struct{})}
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	c.wr.Lock()
	err = c.fr.WriteSettings()
	c.wr.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	go c.read()
	return c
}

func (c *resetter) read() {
	defer close(c.done)
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.wr.Lock()
				_ = c.fr.WriteSettingsAck()
				c.wr.Unlock()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				c.wr.Lock()
				_ = c.fr.WritePing(true, f.Data)
				c.wr.Unlock()
			}
		case *http2.GoAwayFrame:
			c.goaway.Store(true)
		}
	}
}

// reset opens and resets n calls, each HEADERS followed by its RST_STREAM;
// false once the connection is gone.
func (c *resetter) reset(n int) bool {
	c.wr.Lock()
	defer c.wr.Unlock()
	for range n {
		id := c.next
		c.next += 2
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.block, EndHeaders: true}); err != nil {
			return false
		}
		if err := c.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			return false
		}
		c.opened.Add(1)
	}
	return true
}

// TestGRPCRapidResetDoesNotRefuseOthers: calls reset as soon as they are
// opened (the rapid reset attack) hold no receiving slot: 8 connections
// resetting calls as fast as they can while a gRPC client exports, and
// every one of that client's exports is served at its first try.
func TestGRPCRapidResetDoesNotRefuseOthers(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, nil)
	conn := dialGRPC(t, h.grpcAddr)
	good := protoBody(t, kongExport("GET", "/ok", 200))
	var resp []byte
	if err := conn.Invoke(context.Background(), exportMethod, &good, &resp, grpc.ForceCodecV2(bytesCodec{})); err != nil {
		t.Fatalf("export before the attack: %v", err)
	}

	ctx, stop := context.WithCancel(context.Background())
	var attackers sync.WaitGroup
	rs := make([]*resetter, 8)
	for i := range rs {
		rs[i] = dialResetter(t, h.grpcAddr)
		attackers.Add(1)
		go func(c *resetter) {
			defer attackers.Done()
			for ctx.Err() == nil && c.reset(64) {
			}
		}(rs[i])
	}
	// Wait until the attack is under way, then export while it lasts.
	for deadline := time.Now().Add(10 * time.Second); rs[0].opened.Load() < 1000; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the attackers opened no calls")
		}
	}
	// 4 exporters, each a call at a time, for 3 s.
	var exports, refused atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	until := time.Now().Add(3 * time.Second)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(until) {
				var resp []byte
				exports.Add(1)
				if err := conn.Invoke(context.Background(), exportMethod, &good, &resp, grpc.ForceCodecV2(bytesCodec{})); err != nil {
					refused.Add(1)
					firstErr.CompareAndSwap(nil, status.Convert(err).Message())
				}
			}
		}()
	}
	wg.Wait()
	stop()
	attackers.Wait()
	var opened int64
	for _, c := range rs {
		opened += c.opened.Load()
	}
	t.Logf("%d calls opened and reset by 8 connections during %d exports", opened, exports.Load())
	if n := refused.Load(); n != 0 {
		t.Errorf("%d of %d exports refused during the attack (%.1f %%), want none; first: %v",
			n, exports.Load(), 100*float64(n)/float64(exports.Load()), firstErr.Load())
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertCounts(t, countsOf(t, sink.AllMetrics()), map[string]int64{"kong GET /ok 200": exports.Load() + 1 - refused.Load()})
}

// TestGRPCConnectionHoldsItsShare: one connection holds at most its share
// of the receiving slots (16 of 32 at the default bounds): its calls past
// that are refused at once, naming the share, while another client's
// exports are served at their first try; once its oldest call has been
// receiving for a second, a new call of that connection takes its slot.
func TestGRPCConnectionHoldsItsShare(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) { c.GRPCReceiveTimeout = 0 })
	slots, share := h.r.grpc.receiving.Slots(), h.r.grpc.receiving.Share()
	if share != 16 || slots != 32 {
		t.Fatalf("%d receiving slots, %d per connection; want 32, 16", slots, share)
	}
	a := dialStalling(t, h.grpcAddr)
	ids := make([]uint32, slots)
	for i := range ids {
		ids[i] = a.stall(1<<20, 32<<10)
	}
	for _, id := range ids[share:] {
		if e := a.wait(id, 5*time.Second); e.code != codes.Unavailable || !strings.Contains(e.message, "this connection holds 16 of the 32 receiving slots") {
			t.Errorf("call %d past the connection's share: %+v, want Unavailable naming the share", id, e)
		}
	}
	if n := h.r.grpc.receiving.Len(); n != share {
		t.Fatalf("%d calls receiving, want the connection's %d", n, share)
	}
	conn := dialGRPC(t, h.grpcAddr)
	good := protoBody(t, kongExport("GET", "/ok", 200))
	for range 3 {
		var resp []byte
		if err := conn.Invoke(context.Background(), exportMethod, &good, &resp, grpc.ForceCodecV2(bytesCodec{})); err != nil {
			t.Fatalf("another client's export while one connection holds its share: %v", err)
		}
	}
	time.Sleep(admission.ShedAge + 100*time.Millisecond) // the age the rule is about
	late := a.stall(1<<20, 32<<10)
	if e := a.wait(ids[0], 5*time.Second); e.code != codes.DeadlineExceeded {
		t.Errorf("the connection's oldest call: %+v, want DeadlineExceeded", e)
	}
	for _, id := range append(ids[1:share], late) {
		if !a.open(id) {
			t.Errorf("call %d ended; only the connection's oldest had to", id)
		}
	}
	if n := h.r.grpc.receiving.Len(); n != share {
		t.Errorf("%d calls receiving, want %d", n, share)
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertCounts(t, countsOf(t, sink.AllMetrics()), map[string]int64{"kong GET /ok 200": 3})
	for outcome, want := range map[string]int64{"stalled": 1, "throttled": int64(slots - share), "accepted": 3} {
		if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("transport", "grpc"), attribute.String("outcome", outcome)); n != want {
			t.Errorf("grpc %s requests = %d, want %d", outcome, n, want)
		}
	}
}

// TestGRPCIdleConnectionsAreClosed: a connection that has completed its
// HTTP/2 handshake and opens no call is sent GOAWAY and closed after
// max_connection_idle; one that never completes the handshake (no client
// preface) is closed after grpcHandshakeTimeout.
func TestGRPCIdleConnectionsAreClosed(t *testing.T) {
	defer func(d time.Duration) { grpcHandshakeTimeout = d }(grpcHandshakeTimeout)
	grpcHandshakeTimeout = 300 * time.Millisecond
	const idle = 300 * time.Millisecond
	h := start(t, new(consumertest.MetricsSink), func(c *Config) {
		c.Protocols.GRPC.Get().Keepalive.Get().ServerParameters.Get().MaxConnectionIdle = idle
	})
	dialed := time.Now() // before the server accepts
	silent, err := net.Dial("tcp", h.grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silent.Close() })
	silentClosed := make(chan time.Time, 1)
	go func() {
		_, _ = io.Copy(io.Discard, silent) // the server's settings, then its close
		silentClosed <- time.Now()
	}()
	opened := time.Now()
	c := dialResetter(t, h.grpcAddr)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("an idle connection still open after 10 s, max_connection_idle %v", idle)
	}
	if took := time.Since(opened); took < idle || !c.goaway.Load() {
		t.Errorf("idle connection closed after %v, GOAWAY %v; want GOAWAY after %v", took, c.goaway.Load(), idle)
	}
	select {
	case at := <-silentClosed:
		if took := at.Sub(dialed); took < grpcHandshakeTimeout {
			t.Errorf("a connection without the client preface closed after %v, before the %v handshake timeout", took, grpcHandshakeTimeout)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("a connection without the client preface still open after 10 s, handshake timeout %v", grpcHandshakeTimeout)
	}
	// A client whose connection was closed so reconnects at its next call.
	conn := dialGRPC(t, h.grpcAddr)
	good := protoBody(t, kongExport("GET", "/ok", 200))
	var resp []byte
	for i := range 2 {
		if err := conn.Invoke(context.Background(), exportMethod, &good, &resp, grpc.ForceCodecV2(bytesCodec{})); err != nil {
			t.Fatalf("export %d: %v", i, err)
		}
		if i == 0 {
			for deadline := time.Now().Add(10 * time.Second); conn.GetState() != connectivity.Idle; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("client connection %v after max_connection_idle, want closed (idle)", conn.GetState())
				}
			}
		}
	}
}
