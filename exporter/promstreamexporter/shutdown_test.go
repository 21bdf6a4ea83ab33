package promstreamexporter

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/metadata"
	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/series"
	"github.com/otelgateway/otelgateway/internal/testutil"
)

// startedExporter serves /metrics on a free port with the given
// shutdown_grace; the test shuts it down.
func startedExporter(t *testing.T, grace time.Duration) (*promStreamExporter, string) {
	t.Helper()
	cfg := createDefaultConfig()
	cfg.ServerConfig.NetAddr.Endpoint = testutil.FreeAddr(t)
	cfg.ShutdownGrace = grace
	e, err := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	return e, "http://" + cfg.ServerConfig.NetAddr.Endpoint + metricsPath
}

func fetch(t *testing.T, url string) string {
	t.Helper()
	return fetchWith(t, http.DefaultClient, url)
}

// stillWaiting fails the test if Shutdown (done) returned, waiting a
// little for it to.
func stillWaiting(t *testing.T, done <-chan time.Duration, why string) {
	t.Helper()
	select {
	case took := <-done:
		t.Fatalf("Shutdown returned after %v %s", took, why)
	case <-time.After(300 * time.Millisecond):
	}
}

// returnsSoon fails the test unless Shutdown (done) returns within 5s, and
// logs how long it took.
func returnsSoon(t *testing.T, done <-chan time.Duration, after string) time.Duration {
	t.Helper()
	select {
	case took := <-done:
		t.Logf("Shutdown returned %v after it began, %s", took, after)
		return took
	case <-time.After(5 * time.Second):
		t.Fatalf("Shutdown still waits %s", after)
		return 0
	}
}

// timedShutdown runs Shutdown in the background and returns a channel that
// receives how long it took.
func timedShutdown(t *testing.T, e *promStreamExporter, ctx context.Context) <-chan time.Duration {
	done := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		if err := e.shutdown(ctx); err != nil {
			t.Error(err)
		}
		done <- time.Since(start)
	}()
	return done
}

// TestShutdownGraceNothingNew: when every stored batch has been read by a
// complete scrape (or nothing was ever stored), Shutdown does not wait.
func TestShutdownGraceNothingNew(t *testing.T) {
	for _, consume := range []bool{false, true} {
		e, url := startedExporter(t, time.Minute)
		if consume {
			if err := e.consumeMetrics(context.Background(), kindsMetrics()); err != nil {
				t.Fatal(err)
			}
			fetch(t, url)
		}
		if took := <-timedShutdown(t, e, context.Background()); took > 2*time.Second {
			t.Fatalf("consumed %v: Shutdown took %v with nothing new since the last scrape", consume, took)
		}
	}
}

// TestShutdownGraceEndsWithAScrape: with a batch no scrape has read,
// Shutdown keeps serving until a scrape has read it, then returns. A
// filtered or sharded scrape, which reads only part, does not end it.
func TestShutdownGraceEndsWithAScrape(t *testing.T) {
	e, url := startedExporter(t, time.Minute)
	fetch(t, url) // an earlier scrape, before the last batch
	if err := e.consumeMetrics(context.Background(), kindsMetrics()); err != nil {
		t.Fatal(err)
	}
	done := timedShutdown(t, e, context.Background())
	stillWaiting(t, done, "before any scrape read the last batch")
	fetch(t, url+"?shard=0&shards=2")
	fetch(t, url+"?name[]=rpc_duration_seconds")
	stillWaiting(t, done, "on a partial scrape")
	if body := fetch(t, url); !strings.Contains(body, "kong_http_requests_total{") {
		t.Fatalf("the scrape during the grace period lacks the last batch:\n%s", body)
	}
	returnsSoon(t, done, "once a complete scrape read the last batch")
}

// TestShutdownGraceWithoutScraper: nobody scrapes; Shutdown returns once
// shutdown_grace has passed, or when its context ends, whichever is first.
func TestShutdownGraceWithoutScraper(t *testing.T) {
	const grace = 300 * time.Millisecond
	e, _ := startedExporter(t, grace)
	if err := e.consumeMetrics(context.Background(), kindsMetrics()); err != nil {
		t.Fatal(err)
	}
	took := <-timedShutdown(t, e, context.Background())
	if took < grace || took > grace+3*time.Second {
		t.Fatalf("Shutdown took %v, want shutdown_grace (%v) and little more", took, grace)
	}

	e, _ = startedExporter(t, time.Minute)
	if err := e.consumeMetrics(context.Background(), kindsMetrics()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if took := <-timedShutdown(t, e, ctx); took > grace+3*time.Second {
		t.Fatalf("Shutdown took %v past its context's deadline (%v)", took, grace)
	}

	e, _ = startedExporter(t, 0) // off
	if err := e.consumeMetrics(context.Background(), kindsMetrics()); err != nil {
		t.Fatal(err)
	}
	if took := <-timedShutdown(t, e, context.Background()); took > 2*time.Second {
		t.Fatalf("shutdown_grace 0: Shutdown took %v", took)
	}
}

// TestHalfAHeaderDoesNotHoldTheConnection: a client that sends part of a
// request header and stops is disconnected after read_header_timeout (on
// by default).
func TestHalfAHeaderDoesNotHoldTheConnection(t *testing.T) {
	if got := createDefaultConfig().ServerConfig.ReadHeaderTimeout; got != defaultReadHeaderTimeout || got <= 0 {
		t.Fatalf("default read_header_timeout = %v, want %v", got, defaultReadHeaderTimeout)
	}
	cfg := createDefaultConfig()
	cfg.ServerConfig.NetAddr.Endpoint = testutil.FreeAddr(t)
	cfg.ServerConfig.ReadHeaderTimeout = 200 * time.Millisecond
	e, err := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.shutdown(context.Background()) }()
	conn, err := net.Dial("tcp", cfg.ServerConfig.NetAddr.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/pl"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	// The server closes the connection (net/http may first answer 408).
	_, err = io.Copy(io.Discard, bufio.NewReader(conn))
	if err != nil {
		t.Fatalf("connection still open after %v: %v", time.Since(start), err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("the server held a half-sent header for %v", took)
	}
}

// TestShutdownGraceNotEndedByAScrapeThatHeldBack: a whole scrape that left
// out a series created too recently for it (series.Series.createdFor) did
// not read the final state, so it does not end the wait; a scrape of series
// created long before does. The held-back series is stored as a batch
// stored an hour from now would store it, created a little before that.
func TestShutdownGraceNotEndedByAScrapeThatHeldBack(t *testing.T) {
	const grace = 2 * time.Second
	for _, heldBack := range []bool{false, true} {
		e, url := startedExporter(t, grace)
		if err := e.consumeMetrics(context.Background(), kindsMetrics()); err != nil { // start times of 2023
			t.Fatal(err)
		}
		if heldBack {
			later := time.Now().Add(time.Hour).UnixNano()
			f, err := e.table.Family("late_total", "", exposition.TypeCounter)
			if err != nil {
				t.Fatal(err)
			}
			key := series.Key{Context: &series.Context{}, Attrs: pcommon.NewMap()}
			s, err := f.Series(1, &key, later, contextLabels{key.Context})
			if err != nil {
				t.Fatal(err)
			}
			s.SetCounter(1, later-1, later)
			e.generation.Add(1) // as consumeMetrics counts a batch
		}
		done := timedShutdown(t, e, context.Background())
		body := fetch(t, url)
		if has := strings.Contains(body, "\nlate_total "); has {
			t.Fatalf("held back %v: the scrape has the series created an hour ahead:\n%s", heldBack, body)
		}
		took := <-done
		if heldBack && took < grace {
			t.Errorf("Shutdown returned after %v although the only scrape held a series back", took)
		}
		if !heldBack && took >= grace {
			t.Errorf("Shutdown took %v (the whole grace) although a scrape read everything", took)
		}
	}
}

// scraperClient is one scraper: its own keep-alive connection (as each
// Prometheus server keeps one per target), or a new one per scrape.
func scraperClient(keepAlive bool) *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: !keepAlive}}
}

func fetchWith(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(body)
}

// TestShutdownGraceWaitsForEachRegularScraper: two servers of an HA pair
// scrape one collector, each over its own connection. The final batch is
// stored after both last scraped; Shutdown keeps serving until both have
// read it, not only the first to come (which left the second without the
// last window on every restart).
func TestShutdownGraceWaitsForEachRegularScraper(t *testing.T) {
	e, url := startedExporter(t, time.Minute)
	a, b := scraperClient(true), scraperClient(true)
	for range 3 {
		fetchWith(t, a, url)
		fetchWith(t, b, url)
		time.Sleep(50 * time.Millisecond) // the scrape interval
	}
	if err := e.consumeMetrics(context.Background(), kindsMetrics()); err != nil {
		t.Fatal(err)
	}
	done := timedShutdown(t, e, context.Background())
	if body := fetchWith(t, a, url); !strings.Contains(body, "kong_http_requests_total{") {
		t.Fatalf("the first server's scrape lacks the last batch:\n%s", body)
	}
	stillWaiting(t, done, "when only one of the two regular scrapers had read the last batch")
	if body := fetchWith(t, b, url); !strings.Contains(body, "kong_http_requests_total{") {
		t.Fatalf("the second server's scrape lacks the last batch:\n%s", body)
	}
	returnsSoon(t, done, "once both servers read the last batch")
}

// TestShutdownGraceIrregularScrapers: scrapers that are not regular are
// not waited for: one that opens a connection per scrape (never seen
// twice), and one whose next scrape is due after shutdown_grace. The first
// whole scrape after the last batch then ends the wait, as it always did.
func TestShutdownGraceIrregularScrapers(t *testing.T) {
	e, url := startedExporter(t, 2*time.Second)
	fresh := scraperClient(false)
	for range 3 {
		fetchWith(t, fresh, url)
	}
	// A keep-alive scraper whose interval (set by hand: 10s) exceeds the
	// grace period cannot scrape in it.
	slow := "192.0.2.1:40000"
	t0 := time.Now().Add(-time.Second)
	e.scrapers.completed(slow, 0, t0.Add(-10*time.Second))
	e.scrapers.completed(slow, 0, t0)
	if got := e.scrapers.regular(time.Now(), 2*time.Second); len(got) != 0 {
		t.Fatalf("regular scrapers %v, want none (new connections each time, and one due after the grace period)", got)
	}
	if err := e.consumeMetrics(context.Background(), kindsMetrics()); err != nil {
		t.Fatal(err)
	}
	done := timedShutdown(t, e, context.Background())
	fetchWith(t, fresh, url)
	if took := returnsSoon(t, done, "once a whole scrape read the last batch"); took > time.Second {
		t.Fatalf("Shutdown took %v: it waited for a scraper that is not regular", took)
	}
}

// TestScrapersBounded: a client opening connection after connection is
// remembered as at most maxScrapers scrapers, the least recently seen
// forgotten first.
func TestScrapersBounded(t *testing.T) {
	var s scrapers
	t0 := time.Now()
	for i := range 10 * maxScrapers {
		s.completed(net.JoinHostPort("127.0.0.1", strconv.Itoa(10000+i)), uint64(i), t0.Add(time.Duration(i)*time.Millisecond))
	}
	if len(s.by) != maxScrapers {
		t.Fatalf("%d scrapers remembered, want %d", len(s.by), maxScrapers)
	}
	last := net.JoinHostPort("127.0.0.1", strconv.Itoa(10000+10*maxScrapers-1))
	if s.by[last] == nil {
		t.Fatal("the most recent scraper was forgotten")
	}
	if s.by[net.JoinHostPort("127.0.0.1", "10000")] != nil {
		t.Fatal("the oldest scraper is still remembered")
	}
}
