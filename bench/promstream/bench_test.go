package promstream

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// current holds the one contender that is loaded: benchmarks of one contender
// reuse it across b.N rounds; switching contenders shuts the previous one
// down first, so no contender's heap slows another's garbage collection.
var current *Server

func server(tb testing.TB, key string) *Server {
	tb.Helper()
	if current != nil && current.Key == key {
		return current
	}
	closeCurrent(tb)
	s, err := Start(key, Kong10k)
	if err != nil {
		tb.Fatalf("start %s: %v", key, err)
	}
	current = s
	return s
}

func closeCurrent(tb testing.TB) {
	if current == nil {
		return
	}
	if err := current.Close(); err != nil && tb != nil {
		tb.Errorf("close %s: %v", current.Key, err)
	}
	current = nil
	runtime.GC()
}

// TestMain shuts the last contender down and then checks that every
// goroutine the tests and benchmarks started has stopped.
func TestMain(m *testing.M) {
	code := m.Run()
	closeCurrent(nil)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// BenchmarkScrape times one uncompressed scrape of the kong10k set over
// loopback HTTP, per contender. The client does not allocate, so allocs/op
// and B/op are the server side.
func BenchmarkScrape(b *testing.B) {
	for _, key := range Contenders {
		b.Run(key, func(b *testing.B) { benchScrape(b, key, false) })
	}
}

// BenchmarkScrapeGzip times a scrape with Accept-Encoding: gzip (compressed
// bytes read, not decompressed). A contender that answers uncompressed is
// skipped as "not supported".
func BenchmarkScrapeGzip(b *testing.B) {
	for _, key := range []string{Ours, ClientGolang} {
		b.Run(key, func(b *testing.B) { benchScrape(b, key, true) })
	}
}

func benchScrape(b *testing.B, key string, gz bool) {
	s := server(b, key)
	c := NewClient(s.Addr)
	defer c.Close()
	resp, err := c.Scrape(gz, nil)
	if err != nil {
		b.Fatal(err)
	}
	if gz && !resp.Gzip {
		b.Skipf("%s: gzip not supported (answered without Content-Encoding: gzip)", key)
	}
	b.SetBytes(resp.Bytes)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Scrape(gz, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConsume10Routes times ConsumeMetrics of a 10-route batch (30
// counter points, 10 histogram points, existing series), idle and while
// another goroutine scrapes back to back.
func BenchmarkConsume10Routes(b *testing.B) {
	for _, key := range []string{Ours, Contrib} {
		for _, mode := range []string{"idle", "underScrape"} {
			b.Run(key+"/"+mode, func(b *testing.B) {
				s := server(b, key)
				batch := Kong10k.RouteBatch(Kong10k.Routes/2, Kong10k.Routes/2+IngestBatchRoutes, 1)
				stop := make(chan struct{})
				done := make(chan error, 1)
				if mode == "underScrape" {
					go func() {
						c := NewClient(s.Addr)
						defer c.Close()
						for i := 0; i < 100000; i++ {
							select {
							case <-stop:
								done <- nil
								return
							default:
							}
							if _, err := c.Scrape(false, nil); err != nil {
								done <- err
								return
							}
						}
						done <- nil
					}()
				} else {
					close(done)
				}
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := s.Consume(ctx, batch); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				close(stop)
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// fakeConn replays a canned response; writes are discarded.
type fakeConn struct {
	net.Conn
	r *bytes.Reader
}

func (f *fakeConn) Read(p []byte) (int, error)    { return f.r.Read(p) }
func (f *fakeConn) Write(p []byte) (int, error)   { return len(p), nil }
func (f *fakeConn) SetDeadline(time.Time) error   { return nil }
func (f *fakeConn) Close() error                  { return nil }
func (f *fakeConn) dial(string) (net.Conn, error) { return f, nil }

// TestClientAllocs checks that the client allocates nothing per scrape once
// connected, which is what lets the report attribute this process's
// allocations during a scrape to the server.
func TestClientAllocs(t *testing.T) {
	for name, resp := range map[string]string{
		"chunked":        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\na 1\n\r\n4;ext=1\r\nb 2\n\r\n0\r\nX-Trailer: 1\r\n\r\n",
		"content-length": "HTTP/1.1 200 OK\r\nContent-Length: 8\r\nContent-Encoding: gzip\r\n\r\na 1\nb 2\n",
	} {
		t.Run(name, func(t *testing.T) {
			fc := &fakeConn{r: bytes.NewReader([]byte(resp))}
			c := NewClient("fake:1")
			c.dial = fc.dial
			var sink bytes.Buffer
			r, err := c.Scrape(false, &sink)
			if err != nil || sink.String() != "a 1\nb 2\n" || r.Bytes != 8 {
				t.Fatalf("scrape = %+v, %v, body %q", r, err, sink.String())
			}
			if fc.r.Len() != 0 {
				t.Fatalf("%d bytes left unread", fc.r.Len())
			}
			allocs := testing.AllocsPerRun(100, func() {
				_, _ = fc.r.Seek(0, io.SeekStart)
				if _, err := c.Scrape(false, nil); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Fatalf("client allocates %v objects per scrape, want 0", allocs)
			}
		})
	}
}
