// Package foldlog says in the log when a bound on held series starts
// folding or refusing data, and keeps saying it while it does.
//
// A bound (the receiver's limits.max_tuples, the processor's
// limits.max_streams, the exporter's limits.max_series, ...) that folds new
// label sets into an overflow series, or refuses them, changes what users
// see: routes disappear into one `otel.metric.overflow` series. The
// component's telemetry counts it, but nobody reads a counter they do not
// know of, so the first fold is logged at once, at warn, with the bound's
// value, the key that raises it and what raising it costs; while folding
// goes on, again at most once per Interval, with the count since the last
// log; and at Close, what was folded since the last log.
//
// Logger is shared by the three components (hence the root internal/).
//
// Cost: [Logger.Folded] is called once per batch that folded something, never
// per event or per point: an atomic add, an atomic load and a clock read;
// the log line itself is built only when it is written.
package foldlog // import "github.com/otelgateway/otelgateway/internal/foldlog"

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Interval is the least time between two logs of one bound: a few minutes,
// so a bound that folds for hours writes a line per Interval, not per batch.
const Interval = 5 * time.Minute

// Bound describes one bound for its log lines.
type Bound struct {
	// Key is the configuration key of the bound, as users write it
	// ("limits.max_tuples").
	Key string
	// Limit is the bound's configured value.
	Limit int64
	// Unit names what Limit counts ("label tuples", "streams").
	Unit string
	// Folded says what happens to data beyond the bound, as a sentence
	// fragment ("requests of new label tuples are counted under their
	// gateway's otel.metric.overflow series").
	Folded string
	// Cost says what raising the bound costs ("about 1.1 KiB per tuple in
	// the receiver").
	Cost string
	// Counted names what Folded counts in the log fields ("events",
	// "points", "series").
	Counted string
}

// Logger logs the folds of one bound. The zero value is not usable; make
// one with New. Safe for concurrent use.
type Logger struct {
	log   *zap.Logger
	bound Bound
	every time.Duration
	now   func() time.Time

	// pending counts what was folded since the last log; total since New.
	pending, total atomic.Int64
	// next is the earliest time (Unix nanoseconds) the next log may be
	// written; 0 until the first fold, so that one is logged at once.
	next atomic.Int64
	// last is when the last log was written (Unix nanoseconds).
	last atomic.Int64
}

// New returns a Logger for bound writing to log, at most once per Interval.
func New(log *zap.Logger, bound Bound) *Logger {
	return newLogger(log, bound, Interval, time.Now)
}

func newLogger(log *zap.Logger, bound Bound, every time.Duration, now func() time.Time) *Logger {
	if log == nil {
		log = zap.NewNop()
	}
	return &Logger{log: log, bound: bound, every: every, now: now}
}

// Folded records n items (events, points, series) folded or refused by the
// bound, and logs when the first fold happens or Interval has passed since
// the last log. n <= 0 is a no-op, so callers may pass a batch's count
// unconditionally; a nil Logger is a no-op too.
//
// Concurrency: of the calls that find the log due, exactly one (the one
// whose compare-and-swap moves next) writes it, with every count pending at
// that moment; counts added concurrently go to the next log.
func (l *Logger) Folded(n int64) {
	if l == nil || n <= 0 {
		return
	}
	l.pending.Add(n)
	l.total.Add(n)
	now := l.now().UnixNano()
	next := l.next.Load()
	if now < next || !l.next.CompareAndSwap(next, now+int64(l.every)) {
		return
	}
	l.write(next == 0, now)
}

// Close logs what was folded since the last log, if anything, so the last
// minutes of folding before a shutdown are not left unsaid.
func (l *Logger) Close() {
	if l == nil || l.pending.Load() == 0 {
		return
	}
	l.write(l.next.Load() == 0, l.now().UnixNano())
}

// Total is what was folded since New.
func (l *Logger) Total() int64 {
	if l == nil {
		return 0
	}
	return l.total.Load()
}

func (l *Logger) write(first bool, now int64) {
	n := l.pending.Swap(0)
	if n == 0 {
		return
	}
	b := &l.bound
	fields := []zap.Field{
		zap.Int64(b.Key, b.Limit),
		zap.String("unit", b.Unit),
		zap.String("raise", b.Key),
		zap.String("cost", b.Cost),
	}
	if first {
		fields = append(fields, zap.Int64(b.Counted+"_folded", n))
		l.log.Warn(b.Key+" reached: "+b.Folded+"; raise "+b.Key+" to keep them apart", fields...)
	} else {
		since := time.Duration(now - l.last.Load())
		fields = append(fields, zap.Int64(b.Counted+"_folded_since_last_log", n), zap.Duration("since_last_log", since),
			zap.Int64(b.Counted+"_folded_total", l.total.Load()))
		l.log.Warn(b.Key+" still reached: "+b.Folded, fields...)
	}
	l.last.Store(now)
}
