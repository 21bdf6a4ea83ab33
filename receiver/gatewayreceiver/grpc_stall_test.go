package gatewayreceiver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configauth"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/otel/attribute"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/otelgateway/otelgateway/internal/testutil"
)

// stallingClient speaks HTTP/2 by hand to do what no gRPC client does:
// open Export calls that announce a message, send part of it and stop.
// It answers pings (a well-behaved transport otherwise) and records how
// each call ended.
type stallingClient struct {
	t  *testing.T
	fr *http2.Framer
	nc net.Conn
	wr sync.Mutex // the framer's writes

	mu    sync.Mutex
	ended map[uint32]callEnd
	next  uint32
	cond  *sync.Cond

	// authorization is sent as the calls' authorization header ("": none).
	authorization string
}

// callEnd is how the server ended a call: its grpc-status and message, or
// a stream reset.
type callEnd struct {
	code    codes.Code
	message string
	reset   bool
}

func dialStalling(t *testing.T, addr string) *stallingClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	c := &stallingClient{t: t, nc: nc, fr: http2.NewFramer(nc, nc), ended: map[uint32]callEnd{}, next: 1}
	c.cond = sync.NewCond(&c.mu)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	c.write(func() error { return c.fr.WriteSettings() })
	go c.read()
	return c
}

func (c *stallingClient) write(f func() error) {
	c.wr.Lock()
	defer c.wr.Unlock()
	if err := f(); err != nil {
		c.t.Errorf("writing a frame: %v", err)
	}
}

func (c *stallingClient) read() {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.mu.Lock()
			c.cond.Broadcast()
			c.mu.Unlock()
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
		case *http2.MetaHeadersFrame:
			if !f.StreamEnded() {
				continue // the response headers; the status is in the trailers
			}
			code, _ := strconv.Atoi(f.PseudoValue("status"))
			end := callEnd{code: codes.Unknown}
			if code == 0 || code == 200 {
				if n, err := strconv.Atoi(headerValue(f, "grpc-status")); err == nil {
					end.code = codes.Code(n)
				}
				end.message = headerValue(f, "grpc-message")
			}
			c.end(f.StreamID, end)
		case *http2.RSTStreamFrame:
			c.end(f.StreamID, callEnd{reset: true})
		}
	}
}

func headerValue(f *http2.MetaHeadersFrame, name string) string {
	for _, hf := range f.RegularFields() {
		if hf.Name == name {
			return hf.Value
		}
	}
	return ""
}

func (c *stallingClient) end(id uint32, e callEnd) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, seen := c.ended[id]; !seen {
		c.ended[id] = e
	}
	c.cond.Broadcast()
}

// stall opens a call announcing a message of announced bytes and sends
// sent of them (within the initial window: no flow control to follow).
func (c *stallingClient) stall(announced, sent int) uint32 {
	c.mu.Lock()
	id := c.next
	c.next += 2
	c.mu.Unlock()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	fields := [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", exportMethod}, {":authority", "x"},
		{"content-type", "application/grpc"}, {"te", "trailers"}}
	if c.authorization != "" {
		fields = append(fields, [2]string{"authorization", c.authorization})
	}
	for _, kv := range fields {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	msg := make([]byte, 5+sent)
	binary.BigEndian.PutUint32(msg[1:5], uint32(announced))
	c.write(func() error {
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
			return err
		}
		for len(msg) > 0 {
			n := min(len(msg), 16384)
			if err := c.fr.WriteData(id, false, msg[:n]); err != nil {
				return err
			}
			msg = msg[n:]
		}
		return nil
	})
	return id
}

// wait returns how call id ended, failing the test if it has not within d.
func (c *stallingClient) wait(id uint32, d time.Duration) callEnd {
	c.t.Helper()
	deadline := time.Now().Add(d)
	timer := time.AfterFunc(d, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer timer.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if e, ok := c.ended[id]; ok {
			return e
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("call %d not ended after %v", id, d)
		}
		c.cond.Wait()
	}
}

// open reports whether call id has not ended yet.
func (c *stallingClient) open(id uint32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ended := c.ended[id]
	return !ended
}

// TestStalledGRPCCallsAreBounded: gRPC holds what a call's message has sent
// before any handler sees it, so the receiver bounds the calls receiving at
// once (32 at the default bounds, 16 of one connection): past that a new
// call is refused while the receiving ones are young, and takes the oldest
// one's slot once that has been receiving for a second. Nothing of a good
// export is lost after.
func TestStalledGRPCCallsAreBounded(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) { c.GRPCReceiveTimeout = 0 })
	slots, share := h.r.grpc.receiving.Slots(), h.r.grpc.receiving.Share()
	if slots != minReceivingSlots || share != minReceivingSlots/connShareDiv {
		t.Fatalf("receiving slots at the default bounds = %d, %d per connection, want %d, %d", slots, share, minReceivingSlots, minReceivingSlots/connShareDiv)
	}
	// Two connections take their share each, one after the other (so the
	// first one's first call is the oldest); the slots are full.
	var ids []uint32
	var cs []*stallingClient
	for range slots / share {
		c := dialStalling(t, h.grpcAddr)
		for range share {
			cs, ids = append(cs, c), append(ids, c.stall(1<<20, 32<<10))
		}
		for deadline := time.Now().Add(5 * time.Second); h.r.grpc.receiving.Len() != len(ids); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d calls receiving, want %d", h.r.grpc.receiving.Len(), len(ids))
			}
		}
	}
	// 4 more, of a third connection, are refused at once, naming why.
	c := dialStalling(t, h.grpcAddr)
	for range 4 {
		if e := c.wait(c.stall(1<<20, 32<<10), 5*time.Second); e.code != codes.Unavailable || !strings.Contains(e.message, "every one of the 32 receiving slots") {
			t.Errorf("call past the slots: %+v, want Unavailable naming the receiving slots", e)
		}
	}
	if n := h.r.grpc.receiving.Len(); n != slots {
		t.Fatalf("%d calls receiving, want %d", n, slots)
	}
	// A good export: refused too while the stalled calls are young, then,
	// retried after a second, it takes the oldest one's slot.
	conn := dialGRPC(t, h.grpcAddr)
	good := protoBody(t, kongExport("GET", "/ok", 200))
	var resp []byte
	if err := conn.Invoke(context.Background(), exportMethod, &good, &resp, grpc.ForceCodecV2(bytesCodec{})); status.Code(err) != codes.Unavailable {
		t.Fatalf("export while every slot is young: %v, want Unavailable", err)
	}
	time.Sleep(1100 * time.Millisecond)
	if err := conn.Invoke(context.Background(), exportMethod, &good, &resp, grpc.ForceCodecV2(bytesCodec{})); err != nil {
		t.Fatalf("export after a second: %v", err)
	}
	e := cs[0].wait(ids[0], 5*time.Second)
	if e.code != codes.DeadlineExceeded {
		t.Errorf("the oldest stalled call: %+v, want DeadlineExceeded", e)
	}
	for i, id := range ids[1:] {
		if !cs[i+1].open(id) {
			t.Errorf("stalled call %d ended; only the oldest had to", id)
		}
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertCounts(t, countsOf(t, sink.AllMetrics()), map[string]int64{"kong GET /ok 200": 1})
	for outcome, want := range map[string]int64{"stalled": 1, "throttled": 5, "accepted": 1} {
		if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("transport", "grpc"), attribute.String("outcome", outcome)); n != want {
			t.Errorf("grpc %s requests = %d, want %d", outcome, n, want)
		}
	}
}

// TestStalledGRPCCallsAreEnded: a call whose message has not arrived within
// grpc_receive_timeout is ended (DEADLINE_EXCEEDED, counted stalled) and its
// slot freed, and the next export is served.
func TestStalledGRPCCallsAreEnded(t *testing.T) {
	defer func(every time.Duration) { reapEvery = every }(reapEvery)
	reapEvery = 20 * time.Millisecond
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) { c.GRPCReceiveTimeout = 300 * time.Millisecond })
	c := dialStalling(t, h.grpcAddr)
	ids := []uint32{c.stall(1<<20, 32<<10), c.stall(4<<20-64, 0), c.stall(100, 99)}
	for _, id := range ids {
		e := c.wait(id, 5*time.Second)
		if e.code != codes.DeadlineExceeded {
			t.Errorf("stalled call %d: %+v, want DeadlineExceeded", id, e)
		}
	}
	if n := h.r.grpc.receiving.Len(); n != 0 {
		t.Errorf("%d calls still receiving after the timeout", n)
	}
	conn := dialGRPC(t, h.grpcAddr)
	good := protoBody(t, kongExport("GET", "/ok", 200))
	var resp []byte
	if err := conn.Invoke(context.Background(), exportMethod, &good, &resp, grpc.ForceCodecV2(bytesCodec{})); err != nil {
		t.Fatalf("export after the stalled calls ended: %v", err)
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	assertCounts(t, countsOf(t, sink.AllMetrics()), map[string]int64{"kong GET /ok 200": 1})
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("transport", "grpc"), attribute.String("outcome", "stalled")); n != 3 {
		t.Errorf("stalled grpc requests = %d, want 3", n)
	}
}

// TestShutdownEndsStalledGRPCCalls: a call still receiving at shutdown is
// ended (Unavailable: its client retries elsewhere), so it cannot hold the
// graceful stop, and what was counted is flushed.
func TestShutdownEndsStalledGRPCCalls(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, nil) // grpc_receive_timeout 30 s: far away
	conn := dialGRPC(t, h.grpcAddr)
	good := protoBody(t, kongExport("GET", "/ok", 200))
	var resp []byte
	if err := conn.Invoke(context.Background(), exportMethod, &good, &resp, grpc.ForceCodecV2(bytesCodec{})); err != nil {
		t.Fatal(err)
	}
	c := dialStalling(t, h.grpcAddr)
	late := c.stall(1<<20, 1024)
	for deadline := time.Now().Add(5 * time.Second); h.r.grpc.receiving.Len() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls receiving, want the stalled one", h.r.grpc.receiving.Len())
		}
	}
	done := make(chan error, 1)
	go func() { done <- h.r.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown still waits for a call that stalls")
	}
	if e := c.wait(late, 5*time.Second); e.code != codes.Canceled {
		t.Errorf("call receiving at shutdown: %+v, want Canceled", e)
	}
	assertCounts(t, countsOf(t, sink.AllMetrics()), map[string]int64{"kong GET /ok 200": 1})
}

// TestGRPCMetadataIsBounded: a call's metadata is bounded as an HTTP
// request's headers are (1 MiB), not gRPC's 16 MiB; calls within it pass.
func TestGRPCMetadataIsBounded(t *testing.T) {
	h := start(t, new(consumertest.MetricsSink), nil)
	conn := dialGRPC(t, h.grpcAddr)
	good := protoBody(t, kongExport("GET", "/ok", 200))
	var resp []byte
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-big", strings.Repeat("a", 2<<20))
	if err := conn.Invoke(ctx, exportMethod, &good, &resp, grpc.ForceCodecV2(bytesCodec{})); err == nil || !strings.Contains(err.Error(), "1048576") {
		t.Fatalf("a call with 2 MiB of metadata: %v, want refused at 1048576 bytes", err)
	}
	ctx = metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+strings.Repeat("t", 4096))
	if err := conn.Invoke(ctx, exportMethod, &good, &resp, grpc.ForceCodecV2(bytesCodec{})); err != nil {
		t.Fatalf("a call with 4 KiB of metadata: %v", err)
	}
}

// tokenAuth is a server authenticator (extensionauth.Server) that lets
// through calls whose authorization header is "Bearer " + token, and
// counts the headers it saw.
type tokenAuth struct {
	token string
	mu    sync.Mutex
	calls int
}

func (*tokenAuth) Start(context.Context, component.Host) error { return nil }
func (*tokenAuth) Shutdown(context.Context) error              { return nil }

func (a *tokenAuth) Authenticate(ctx context.Context, headers map[string][]string) (context.Context, error) {
	a.mu.Lock()
	a.calls++
	a.mu.Unlock()
	if v := headers["authorization"]; len(v) == 1 && v[0] == "Bearer "+a.token {
		return ctx, nil
	}
	return ctx, errors.New("missing or wrong bearer token")
}

// TestGRPCAuthBeforeTheMessage: with auth: on the gRPC server, a call is
// authenticated on its headers, before gRPC reads its message. A client
// without credentials gets Unauthenticated at once, holds no receiving
// slot however many calls it opens, and is counted (unauthenticated); a
// client with them is served, authenticated once per call.
func TestGRPCAuthBeforeTheMessage(t *testing.T) {
	authID := component.MustNewID("tokenauth")
	auth := &tokenAuth{token: "s3cret"}
	sink := new(consumertest.MetricsSink)
	h := startOn(t, testutil.ExtHost{authID: auth}, sink, func(c *Config) {
		c.Protocols.GRPC.Get().Auth = configoptional.Some(configauth.Config{AuthenticatorID: authID})
	})
	slots := h.r.grpc.receiving.Slots()
	for _, authorization := range []string{"", "Bearer wrong"} {
		c := dialStalling(t, h.grpcAddr)
		c.authorization = authorization
		ids := make([]uint32, slots+4)
		for i := range ids {
			ids[i] = c.stall(1<<20, 32<<10)
		}
		for _, id := range ids {
			if e := c.wait(id, 5*time.Second); e.code != codes.Unauthenticated || !strings.Contains(e.message, "bearer token") {
				t.Errorf("stalled call %d with authorization %q: %+v, want Unauthenticated naming the token", id, authorization, e)
			}
		}
		if n := h.r.grpc.receiving.Len(); n != 0 {
			t.Errorf("%d calls without credentials receiving, want none", n)
		}
	}
	conn := dialGRPC(t, h.grpcAddr)
	good := protoBody(t, kongExport("GET", "/ok", 200))
	var resp []byte
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer s3cret")
	if err := conn.Invoke(ctx, exportMethod, &good, &resp, grpc.ForceCodecV2(bytesCodec{})); err != nil {
		t.Fatalf("export with the token: %v", err)
	}
	if err := conn.Invoke(context.Background(), exportMethod, &good, &resp, grpc.ForceCodecV2(bytesCodec{})); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("export without the token: %v, want Unauthenticated", err)
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertCounts(t, countsOf(t, sink.AllMetrics()), map[string]int64{"kong GET /ok 200": 1})
	refused := int64(2*(slots+4) + 1)
	for outcome, want := range map[string]int64{"unauthenticated": refused, "accepted": 1, "throttled": 0} {
		if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("transport", "grpc"), attribute.String("outcome", outcome)); n != want {
			t.Errorf("grpc %s requests = %d, want %d", outcome, n, want)
		}
	}
	// Once per call: configgrpc's interceptor does not authenticate again.
	if auth.calls != int(refused)+1 {
		t.Errorf("authenticator ran %d times, want %d (once per call)", auth.calls, refused+1)
	}
}
