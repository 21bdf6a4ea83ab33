package promstream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// Client is a minimal HTTP/1.1 client for GET /metrics on one keep-alive
// connection. After the first scrape it does not allocate (TestClientAllocs
// checks it), so the allocations this process counts during a scrape are the
// server's. It reads the whole body (chunked, Content-Length or
// until-close) and hands it to a sink without decompressing it.
type Client struct {
	addr string
	conn net.Conn
	br   *bufio.Reader
	buf  []byte
	reqs [2][]byte // identity, gzip

	// dial is replaced by the allocation test.
	dial func(addr string) (net.Conn, error)
}

// Response describes one scrape.
type Response struct {
	Status   int
	Bytes    int64 // body bytes as sent (compressed if Gzip)
	Gzip     bool  // Content-Encoding: gzip
	Zstd     bool  // Content-Encoding: zstd
	Chunked  bool
	Chunks   int           // chunks in a chunked body (net/http allocates 8 bytes per chunk header it writes)
	Duration time.Duration // request written → last body byte read
}

// Accept is what the client offers: the text format 0.0.4, which every
// contender serves.
const Accept = "text/plain;version=0.0.4;q=1,*/*;q=0.1"

// NewClient returns a client for the server at addr (host:port).
func NewClient(addr string) *Client {
	c := &Client{addr: addr, buf: make([]byte, 64<<10)}
	base := "GET /metrics HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: promstream-bench\r\nAccept: " + Accept + "\r\n"
	c.reqs[0] = []byte(base + "\r\n")
	c.reqs[1] = []byte(base + "Accept-Encoding: gzip\r\n\r\n")
	c.dial = func(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, 5*time.Second) }
	return c
}

// Close closes the connection.
func (c *Client) Close() error {
	if c.conn == nil {
		return nil
	}
	err := c.conn.Close()
	c.conn = nil
	return err
}

// Request renders a GET of path (with its query) offering encoding ("" for
// none) in Accept-Encoding, for Do.
func (c *Client) Request(path, encoding string) []byte {
	req := "GET " + path + " HTTP/1.1\r\nHost: " + c.addr + "\r\nUser-Agent: promstream-bench\r\nAccept: " + Accept + "\r\n"
	if encoding != "" {
		req += "Accept-Encoding: " + encoding + "\r\n"
	}
	return []byte(req + "\r\n")
}

// Scrape GETs /metrics and copies the body to sink (nil: discard).
func (c *Client) Scrape(gzip bool, sink io.Writer) (Response, error) {
	req := c.reqs[0]
	if gzip {
		req = c.reqs[1]
	}
	return c.Do(req, sink)
}

// Do sends req (from Request) and copies the body to sink (nil: discard).
func (c *Client) Do(req []byte, sink io.Writer) (Response, error) {
	var resp Response
	if c.conn == nil {
		conn, err := c.dial(c.addr)
		if err != nil {
			return resp, err
		}
		c.conn = conn
		if c.br == nil {
			c.br = bufio.NewReaderSize(conn, 64<<10)
		} else {
			c.br.Reset(conn)
		}
	}
	start := time.Now()
	if err := c.conn.SetDeadline(start.Add(2 * time.Minute)); err != nil {
		return resp, c.fail(err)
	}
	if _, err := c.conn.Write(req); err != nil {
		return resp, c.fail(err)
	}
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return resp, c.fail(err)
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return resp, c.fail(errors.New("bad status line"))
	}
	resp.Status = int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0')
	contentLength, closeAfter := int64(-1), false
	for {
		line, err = c.br.ReadSlice('\n')
		if err != nil {
			return resp, c.fail(err)
		}
		line = trimCRLF(line)
		if len(line) == 0 {
			break
		}
		colon := bytes.IndexByte(line, ':')
		if colon < 0 {
			continue
		}
		name, value := line[:colon], bytes.TrimSpace(line[colon+1:])
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			contentLength, err = parseDec(value)
			if err != nil {
				return resp, c.fail(err)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			resp.Chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Content-Encoding")):
			resp.Gzip = bytes.EqualFold(value, []byte("gzip"))
			resp.Zstd = bytes.EqualFold(value, []byte("zstd"))
		case bytes.EqualFold(name, []byte("Connection")):
			closeAfter = bytes.EqualFold(value, []byte("close"))
		}
	}
	if sink == nil {
		sink = io.Discard
	}
	switch {
	case resp.Chunked:
		for {
			line, err = c.br.ReadSlice('\n')
			if err != nil {
				return resp, c.fail(fmt.Errorf("chunk size: %w", err))
			}
			line = trimCRLF(line)
			if i := bytes.IndexByte(line, ';'); i >= 0 {
				line = line[:i]
			}
			size, err := parseHex(line)
			if err != nil {
				return resp, c.fail(err)
			}
			if size == 0 {
				for { // trailers
					line, err = c.br.ReadSlice('\n')
					if err != nil {
						return resp, c.fail(err)
					}
					if len(trimCRLF(line)) == 0 {
						break
					}
				}
				break
			}
			if err := c.copyN(sink, size); err != nil {
				return resp, c.fail(err)
			}
			resp.Bytes += size
			resp.Chunks++
			line, err = c.br.ReadSlice('\n')
			if err != nil || len(trimCRLF(line)) != 0 {
				return resp, c.fail(errors.New("missing CRLF after chunk"))
			}
		}
	case contentLength >= 0:
		if err := c.copyN(sink, contentLength); err != nil {
			return resp, c.fail(err)
		}
		resp.Bytes = contentLength
	default:
		for {
			n, err := c.br.Read(c.buf)
			if n > 0 {
				_, _ = sink.Write(c.buf[:n])
				resp.Bytes += int64(n)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return resp, c.fail(err)
			}
		}
		closeAfter = true
	}
	resp.Duration = time.Since(start)
	if closeAfter {
		_ = c.Close()
	}
	if resp.Status != 200 {
		return resp, fmt.Errorf("status %d", resp.Status)
	}
	return resp, nil
}

func (c *Client) copyN(sink io.Writer, n int64) error {
	for n > 0 {
		b := c.buf
		if int64(len(b)) > n {
			b = b[:n]
		}
		m, err := io.ReadFull(c.br, b)
		if m > 0 {
			if _, werr := sink.Write(b[:m]); werr != nil {
				return werr
			}
		}
		n -= int64(m)
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *Client) fail(err error) error {
	_ = c.Close()
	return err
}

func trimCRLF(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func parseHex(b []byte) (int64, error) {
	if len(b) == 0 || len(b) > 15 {
		return 0, errors.New("bad chunk size")
	}
	var n int64
	for _, c := range b {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, errors.New("bad chunk size")
		}
		n = n<<4 | int64(d)
	}
	return n, nil
}

func parseDec(b []byte) (int64, error) {
	if len(b) == 0 || len(b) > 18 {
		return 0, errors.New("bad Content-Length")
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, errors.New("bad Content-Length: " + strconv.Quote(string(b)))
		}
		n = n*10 + int64(c-'0')
	}
	return n, nil
}
