package foldlog

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var testBound = Bound{
	Key: "limits.max_tuples", Limit: 100, Unit: "label tuples",
	Folded:  "requests of new label tuples are counted under otel.metric.overflow",
	Cost:    "about 1.1 KiB per tuple",
	Counted: "events",
}

// clock is a settable time source.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }
func newClock(start time.Time) *clock    { c := &clock{}; c.ns.Store(start.UnixNano()); return c }
func fieldInt(e observer.LoggedEntry, k string) int64 {
	v, ok := e.ContextMap()[k].(int64)
	if !ok {
		return -1
	}
	return v
}

func TestFirstFoldIsLoggedAtOnceThenAtMostEveryInterval(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	c := newClock(time.Unix(1_700_000_000, 0))
	l := newLogger(zap.New(core), testBound, 5*time.Minute, c.now)

	l.Folded(0) // nothing folded: nothing said
	if logs.Len() != 0 {
		t.Fatalf("Folded(0) logged %d lines", logs.Len())
	}
	l.Folded(3)
	if logs.Len() != 1 {
		t.Fatalf("the first fold logged %d lines, want 1", logs.Len())
	}
	first := logs.All()[0]
	if first.Level != zapcore.WarnLevel {
		t.Errorf("level %v, want warn", first.Level)
	}
	wantMsg := "limits.max_tuples reached: requests of new label tuples are counted under otel.metric.overflow; raise limits.max_tuples to keep them apart"
	if first.Message != wantMsg {
		t.Errorf("message %q,\nwant %q", first.Message, wantMsg)
	}
	if got := fieldInt(first, "limits.max_tuples"); got != 100 {
		t.Errorf("bound field %d, want 100", got)
	}
	if got := fieldInt(first, "events_folded"); got != 3 {
		t.Errorf("events_folded %d, want 3", got)
	}
	if first.ContextMap()["cost"] != testBound.Cost || first.ContextMap()["raise"] != testBound.Key {
		t.Errorf("fields %v lack the cost or the key to raise", first.ContextMap())
	}

	// Within the interval: counted, not logged.
	for range 100 {
		c.advance(time.Second)
		l.Folded(2)
	}
	if logs.Len() != 1 {
		t.Fatalf("%d lines within the interval, want 1", logs.Len())
	}
	c.advance(5*time.Minute - 100*time.Second)
	l.Folded(1)
	if logs.Len() != 2 {
		t.Fatalf("%d lines after the interval, want 2", logs.Len())
	}
	second := logs.All()[1]
	if got := fieldInt(second, "events_folded_since_last_log"); got != 201 {
		t.Errorf("events_folded_since_last_log %d, want 201 (100×2 + 1)", got)
	}
	if got := fieldInt(second, "events_folded_total"); got != 204 {
		t.Errorf("events_folded_total %d, want 204", got)
	}
	if d, _ := second.ContextMap()["since_last_log"].(time.Duration); d != 5*time.Minute {
		t.Errorf("since_last_log %v, want 5m", d)
	}
	if l.Total() != 204 {
		t.Errorf("Total %d, want 204", l.Total())
	}

	// What was folded after the last log is said at Close, once.
	l.Folded(7)
	l.Close()
	l.Close()
	if logs.Len() != 3 {
		t.Fatalf("%d lines after Close, want 3", logs.Len())
	}
	if got := fieldInt(logs.All()[2], "events_folded_since_last_log"); got != 7 {
		t.Errorf("Close logged %d folded, want 7", got)
	}
}

func TestCloseWithoutFoldsSaysNothing(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	l := New(zap.New(core), testBound)
	l.Close()
	var nilLogger *Logger
	nilLogger.Folded(5) // a component without the bound configured
	nilLogger.Close()
	if logs.Len() != 0 {
		t.Fatalf("%d lines without a fold", logs.Len())
	}
}

// Concurrent folds: every count is logged exactly once, in one of the logs.
func TestConcurrentFoldsAreEachLoggedOnce(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	c := newClock(time.Unix(1_700_000_000, 0))
	l := newLogger(zap.New(core), testBound, time.Millisecond, c.now)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				c.advance(time.Microsecond)
				l.Folded(1)
			}
		})
	}
	wg.Wait()
	l.Close()
	// Each line carries its count in one of two fields: the first fold's
	// line events_folded, the others events_folded_since_last_log. Two
	// writers that won their turns a microsecond apart may write in either
	// order, so the first fold's line need not be the first line (reading
	// by position lost the two lines' counts when they swapped).
	var sum int64
	firsts := 0
	for _, e := range logs.All() {
		if n := fieldInt(e, "events_folded"); n >= 0 {
			firsts++
			sum += n
		} else if n := fieldInt(e, "events_folded_since_last_log"); n >= 0 {
			sum += n
		} else {
			t.Errorf("a log line without a count: %v", e.ContextMap())
		}
	}
	if firsts != 1 {
		t.Errorf("%d lines logged as the first fold, want 1", firsts)
	}
	if sum != 8000 || l.Total() != 8000 {
		t.Fatalf("logs account for %d folds, Total %d, want 8000 (%d lines)", sum, l.Total(), logs.Len())
	}
	if logs.Len() < 2 || logs.Len() > 10 {
		t.Errorf("%d lines for 8 ms of folding at most every 1 ms", logs.Len())
	}
}

func BenchmarkFolded(b *testing.B) {
	l := New(zap.NewNop(), testBound)
	l.Folded(1) // the first log is behind us
	b.ReportAllocs()
	for b.Loop() {
		l.Folded(1)
	}
}
