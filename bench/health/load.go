package health

import (
	"errors"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// LoadResult is what an open-loop load saw: every request's latency,
// measured from when it was due (not when it could be sent), so a stalled
// gateway is not hidden by requests that were never sent.
type LoadResult struct {
	Sent, Failed int
	Latencies    []time.Duration // sorted
	Err          error           // the first failure
}

// Quantile is the q-quantile of the latencies (0 ≤ q ≤ 1).
func (r LoadResult) Quantile(q float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	return r.Latencies[min(len(r.Latencies)-1, int(q*float64(len(r.Latencies))))]
}

var loadClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
	MaxIdleConnsPerHost: 256, DisableCompression: true,
}}

// Load sends GET url rate times a second for d, each request on its own
// goroutine at its due time (open loop), and waits for every answer.
func Load(url string, rate int, d time.Duration) LoadResult {
	n := int(d.Seconds() * float64(rate))
	every := time.Second / time.Duration(rate)
	var (
		mu  sync.Mutex
		res = LoadResult{Latencies: make([]time.Duration, 0, n)}
		wg  sync.WaitGroup
	)
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(i) * every)
		if w := time.Until(due); w > 0 {
			time.Sleep(w)
		}
		wg.Go(func() {
			err := get(url)
			lat := time.Since(due)
			mu.Lock()
			defer mu.Unlock()
			res.Sent++
			if err != nil {
				res.Failed++
				if res.Err == nil {
					res.Err = err
				}
				return
			}
			res.Latencies = append(res.Latencies, lat)
		})
	}
	wg.Wait()
	slices.Sort(res.Latencies)
	return res
}

func get(url string) error {
	resp, err := loadClient.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return errors.New(url + ": " + resp.Status)
	}
	return nil
}
