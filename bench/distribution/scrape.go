package distribution

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Scrape is one read of /metrics, as Prometheus would scrape it (text
// format 0.0.4, uncompressed).
type Scrape struct {
	Took     time.Duration // request written to last byte read
	Bytes    int
	Samples  int   // sample lines
	Series   int   // request-counter series (the contender's Requests family, Match applied)
	Requests int64 // sum of the request counter over those series
	Counted  int64 // sum of the request-duration histogram's _count
}

var scrapeClient = &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DisableCompression: true}}

// ScrapeOnce reads url and sums c's request families. The parser reads
// only what it needs: a sample line's name up to '{' or ' ', its label text
// for c.Match, and the value after the last space (no timestamps are sent by
// either exporter).
func ScrapeOnce(url string, c Contender) (Scrape, error) {
	var s Scrape
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return s, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	t0 := time.Now()
	resp, err := scrapeClient.Do(req)
	if err != nil {
		return s, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	s.Took = time.Since(t0)
	if err != nil {
		return s, err
	}
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	s.Bytes = len(body)
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		s.Samples++
		end := strings.IndexAny(line, "{ ")
		if end < 0 {
			return s, fmt.Errorf("sample line without value: %q", line)
		}
		name := line[:end]
		if name != c.Requests && name != c.Count {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if c.Match != "" && !strings.Contains(line[end:sp], c.Match) {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			return s, fmt.Errorf("value of %q: %w", line, err)
		}
		if name == c.Requests {
			s.Series++
			s.Requests += int64(v)
		} else {
			s.Counted += int64(v)
		}
	}
	return s, sc.Err()
}
