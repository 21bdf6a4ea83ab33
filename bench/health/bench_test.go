package health

import (
	"bytes"
	"testing"
	"time"
)

// BenchmarkPoll is one full poll of the fake Kong (10k upstreams, 20k
// targets, max_concurrency 16) by the real receiver, in steady state (no
// change since the previous poll), feeding the promstream exporter. The
// poll interval is 1 ms, so ns/op is the poll plus about 1–3 ms of waiting;
// poll-ms/op is the receiver's own poll_duration, cpu-ms/op this process's
// CPU time (receiver + exporter; the fake runs in a child process and is
// fake-cpu-ms/op).
//
//	go test -run '^$' -bench Poll -count 6 . | tee new.txt; benchstat new.txt
func BenchmarkPoll(b *testing.B) {
	p := pipeline(b, Options{MaxConcurrency: 16, PageSize: 1000, RequestRate: unpaced, PollInterval: time.Millisecond, ReportInterval: time.Hour, Exporter: true})
	s0, err := p.Polls()
	if err == nil { // start on a poll boundary
		s0, err = p.WaitPolls(s0.Polls+1, time.Minute)
	}
	if err != nil {
		b.Fatal(err)
	}
	f0, _ := fake.CPU()
	c0 := CPU()
	b.ReportAllocs()
	b.ResetTimer()
	s, err := p.WaitPolls(s0.Polls+int64(b.N), 10*time.Minute)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	c1 := CPU()
	f1, _ := fake.CPU()
	n := float64(s.Polls - s0.Polls)
	b.ReportMetric(float64(s.Duration-s0.Duration)/1e6/n, "poll-ms/op")
	b.ReportMetric(float64(c1-c0)/1e6/n, "cpu-ms/op")
	b.ReportMetric(float64(f1-f0)/1e6/n, "fake-cpu-ms/op")
}

// BenchmarkScrape is one scrape of the exporter holding the 80k-series
// kong_upstream_target_health family the receiver produced. allocs/op
// include the benchmark's net/http client.
//
//	go test -run '^$' -bench Scrape -count 6 . | tee new.txt; benchstat new.txt
func BenchmarkScrape(b *testing.B) {
	p := pipeline(b, Options{MaxConcurrency: 16, PageSize: 1000, RequestRate: unpaced, PollInterval: time.Hour, ReportInterval: time.Hour, Exporter: true})
	var buf bytes.Buffer
	if s, err := ScrapeOnce(p.MetricsAddr, &buf); err != nil || s.Series != Upstreams*TargetsPer*4 {
		b.Fatalf("scrape: %+v %v", s, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ScrapeOnce(p.MetricsAddr, &buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSnapshot is one full-snapshot cycle with no changes
// (report_interval 1 ms, so cycles run back to back): staleness check,
// drain, build of the 80k points, and the downstream call: a consumer that
// drops the batch (receiver) or the promstream exporter (promstream).
//
//	go test -run '^$' -bench Snapshot -count 6 . | tee new.txt; benchstat new.txt
func BenchmarkSnapshot(b *testing.B) {
	for _, c := range []struct {
		name     string
		exporter bool
	}{{"receiver", false}, {"promstream", true}} {
		b.Run(c.name, func(b *testing.B) {
			p := pipeline(b, Options{MaxConcurrency: 16, PageSize: 1000, RequestRate: unpaced, PollInterval: time.Hour, ReportInterval: time.Millisecond, Exporter: c.exporter})
			n0 := p.Snapshots()
			if err := p.WaitSnapshots(n0+1, time.Minute); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			if err := p.WaitSnapshots(n0+1+b.N, 10*time.Minute); err != nil {
				b.Fatal(err)
			}
		})
	}
}
