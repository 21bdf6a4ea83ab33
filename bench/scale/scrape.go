package scale

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Scrape is what one GET /metrics served.
type Scrape struct {
	Wall time.Duration
	// Bytes on the wire (compressed for gzip), Plain the exposition's
	// bytes, Lines its lines, Samples those not comments.
	Bytes, Plain int64
	Lines        int64
	Samples      int64
	// Requests is the sum of the requests counter's samples (the
	// profile's: gateway_requests_total, kong_http_requests_total), the
	// probe's route left out.
	Requests float64
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// DoScrape scrapes addr's /metrics as Prometheus 2 does (text 0.0.4), with
// gzip or without, and reads the whole exposition line by line, summing the
// samples of the family counter.
func DoScrape(addr string, gz bool, counter string) (Scrape, error) {
	var s Scrape
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return s, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1")
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	} else {
		req.Header.Set("Accept-Encoding", "identity")
	}
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	start := time.Now()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("GET /metrics: HTTP %d", resp.StatusCode)
	}
	wire := &countingReader{r: resp.Body}
	var body io.Reader = wire
	if gz {
		if resp.Header.Get("Content-Encoding") != "gzip" {
			return s, fmt.Errorf("GET /metrics with gzip: Content-Encoding %q", resp.Header.Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(wire)
		if err != nil {
			return s, err
		}
		body = zr
	}
	plain := &countingReader{r: body}
	br := bufio.NewReaderSize(plain, 1<<20)
	prefix := []byte(counter + "{")
	probe := []byte(ProbeRoute + `"`)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			s.Lines++
			if line[0] != '#' {
				s.Samples++
				if bytes.HasPrefix(line, prefix) && !bytes.Contains(line, probe) {
					sp := bytes.LastIndexByte(line[:len(line)-1], ' ')
					v, perr := strconv.ParseFloat(string(bytes.TrimSpace(line[sp+1:])), 64)
					if perr != nil {
						return s, fmt.Errorf("sample %q: %w", line, perr)
					}
					s.Requests += v
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err == bufio.ErrBufferFull {
			return s, fmt.Errorf("a line longer than 1 MiB")
		}
		if err != nil {
			return s, err
		}
	}
	s.Wall = time.Since(start)
	s.Bytes, s.Plain = wire.n, plain.n
	return s, nil
}
