package promstreamexporter

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
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
	resp, err := http.Get(url)
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
	select {
	case took := <-done:
		t.Fatalf("Shutdown returned after %v before any scrape read the last batch", took)
	case <-time.After(200 * time.Millisecond):
	}
	fetch(t, url+"?shard=0&shards=2")
	fetch(t, url+"?name[]=rpc_duration_seconds")
	select {
	case took := <-done:
		t.Fatalf("Shutdown returned after %v on a partial scrape", took)
	case <-time.After(200 * time.Millisecond):
	}
	if body := fetch(t, url); !strings.Contains(body, "kong_http_requests_total{") {
		t.Fatalf("the scrape during the grace period lacks the last batch:\n%s", body)
	}
	select {
	case took := <-done:
		t.Logf("Shutdown returned %v after it began, once a scrape read the last batch", took)
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown still waits after a complete scrape read the last batch")
	}
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
