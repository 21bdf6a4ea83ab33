package e2e

// A hostile gRPC client, speaking HTTP/2 by hand (no gRPC client stalls on
// purpose): it opens Export calls that announce a message, send most of it
// (following flow control, as a real client must) and stop.

import (
	"bytes"
	"encoding/binary"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

const exportPath = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// stallConn is one connection of stalled calls.
type stallConn struct {
	nc net.Conn
	fr *http2.Framer
	wr sync.Mutex // the framer's writes

	mu      sync.Mutex
	cond    *sync.Cond
	initial int            // the server's initial stream window
	window  map[uint32]int // send window per stream; 0: the connection's
	ended   map[uint32]stallEnd
	closed  bool
	next    uint32
}

// stallEnd is how the server ended a call: its grpc-status, or a reset.
type stallEnd struct {
	status string // "" for a reset
	at     time.Time
}

func dialStallConn(t *testing.T, addr string) *stallConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := &stallConn{nc: nc, fr: http2.NewFramer(nc, nc), initial: 65535,
		window: map[uint32]int{0: 65535}, ended: map[uint32]stallEnd{}, next: 1}
	c.cond = sync.NewCond(&c.mu)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	c.write(func() error { return c.fr.WriteSettings() })
	go c.read()
	return c
}

func (c *stallConn) close() { _ = c.nc.Close() }

func (c *stallConn) write(f func() error) bool {
	c.wr.Lock()
	defer c.wr.Unlock()
	return f() == nil
}

func (c *stallConn) read() {
	defer func() {
		c.mu.Lock()
		c.closed = true
		c.cond.Broadcast()
		c.mu.Unlock()
	}()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
				c.mu.Lock()
				c.initial = int(v)
				c.mu.Unlock()
			}
			c.write(func() error { return c.fr.WriteSettingsAck() })
		case *http2.PingFrame:
			if !f.IsAck() {
				c.write(func() error { return c.fr.WritePing(true, f.Data) })
			}
		case *http2.WindowUpdateFrame:
			c.mu.Lock()
			c.window[f.StreamID] += int(f.Increment)
			c.cond.Broadcast()
			c.mu.Unlock()
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				status := "?"
				for _, hf := range f.RegularFields() {
					if hf.Name == "grpc-status" {
						status = hf.Value
					}
				}
				c.end(f.StreamID, status)
			}
		case *http2.RSTStreamFrame:
			c.end(f.StreamID, "")
		}
	}
}

func (c *stallConn) end(id uint32, status string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.ended[id]; !ok {
		c.ended[id] = stallEnd{status: status, at: time.Now()}
	}
	c.cond.Broadcast()
}

// stall opens a call announcing announced bytes and sends sent of them,
// waiting for window as the server grants it; it returns once they are
// sent, or the call has ended, or the connection is gone.
func (c *stallConn) stall(announced, sent int) uint32 {
	c.mu.Lock()
	id := c.next
	c.next += 2
	c.window[id] = c.initial
	c.mu.Unlock()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", exportPath}, {":authority", "e2e"},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	if !c.write(func() error {
		return c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
	}) {
		return id
	}
	msg := make([]byte, 5+sent)
	binary.BigEndian.PutUint32(msg[1:5], uint32(announced))
	for len(msg) > 0 {
		c.mu.Lock()
		n := 0
		for {
			if _, ended := c.ended[id]; ended || c.closed {
				c.mu.Unlock()
				return id
			}
			if n = min(len(msg), 16384, c.window[id], c.window[0]); n > 0 {
				break
			}
			c.cond.Wait()
		}
		c.window[id] -= n
		c.window[0] -= n
		c.mu.Unlock()
		if !c.write(func() error { return c.fr.WriteData(id, false, msg[:n]) }) {
			return id
		}
		msg = msg[n:]
	}
	return id
}

// endedBy returns how call id ended, and whether it has.
func (c *stallConn) endedBy(id uint32) (stallEnd, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.ended[id]
	return e, ok
}

// grpcStatusName names a grpc-status value for logs.
func grpcStatusName(s string) string {
	switch s {
	case "":
		return "reset"
	case "1":
		return "CANCELLED"
	case "4":
		return "DEADLINE_EXCEEDED"
	case "14":
		return "UNAVAILABLE"
	}
	if _, err := strconv.Atoi(s); err == nil {
		return "status " + s
	}
	return s
}
