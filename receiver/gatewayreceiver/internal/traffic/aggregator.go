package traffic

import (
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
)

// Settings is what New needs.
type Settings struct {
	// Profile names the metrics: ProfileOTel, ProfileKong or ProfileAPISIX
	// (the first for any other name, which config validation refuses).
	Profile string
	// DurationBounds, in seconds, replace the bounds of the duration
	// histograms (those recorded in ms and emitted in seconds); ExpoSize
	// > 0 makes them exponential with at most that many buckets instead.
	DurationBounds []float64
	ExpoSize       int
	// DisabledMetrics are the names of the families left out.
	DisabledMetrics []string
	Dimensions      Dimensions
	Limits          Limits
	// Exemplars: histograms keep a traced request per bucket.
	Exemplars bool
	// Collector labels every point (and gateway resource) with the
	// collector that aggregated it; Key "" for none.
	Collector Label
	// NodeLabel names the label of the reporting gateway node (the kong
	// and apisix profiles' node_label); "" for none.
	NodeLabel string
}

// Label is one label: a key and its value.
type Label struct{ Key, Value string }

// Counts are what Add did with events beyond counting them.
type Counts struct {
	// NotCounted are events the profile does not count (no route under the
	// kong profile).
	NotCounted int64
	// Overflowed are events folded into an overflow tuple (MaxTuples,
	// MaxGateways), GatewaysOverflowed those of them folded by MaxGateways.
	Overflowed, GatewaysOverflowed int64
	// Truncated are label values cut to MaxLabelBytes.
	Truncated int64
	// Superseded are events not counted because every family they feed
	// is in their Superseded set (a Kong node's pushed metrics carry them).
	Superseded int64
}

// Aggregator turns events into the series of one window under one profile.
//
// Concurrency: Add, Take, Merge and HeldTuples may be called from any
// goroutine. Add works out each event's tuple and its encoding, label cuts,
// values and exemplar draw before it takes the aggregator's lock (mu)
// (prepare, into a batch of its own), and holds the lock, once per batch of
// events, only to find the handles and update the rows (record): concurrent
// Adds overlap in the first part and queue for the second. Merge and
// HeldTuples hold the lock for their whole work. Take holds it only in
// steps of bounded work and lets Add in between them (see Take), so a flush
// of millions of series does not stop ingest; takeMu keeps one Take, or
// Merge, at a time. A Window's pdata is built by Window.Metrics after the
// lock is released.
type Aggregator struct {
	mu     sync.Mutex
	takeMu sync.Mutex
	// fams are the profile's families, each with its place in the tables
	// (New sets it); tables are the views' rows, one table per distinct
	// view, in the order of their first family.
	fams   []family
	tables []table
	prof   *profile
	dims   Dimensions
	// keepExemplars: histograms keep a traced request per bucket, drawn
	// with each batch's random numbers (batch.draw).
	keepExemplars bool
	// labels are what every point carries beside its family's labels.
	labels pointLabels
	held   held
	counts Counts
	// buf is working memory of record, reused: a handle's tuple encoding,
	// its gateway's key, a projected tuple's encoding.
	buf struct{ key, gw, view []byte }
	// tuple is the tuple of the handle record finds rows for, when it has
	// to (a new tuple, rows a flush let go); one is add's batch (one event
	// under the lock).
	tuple tuple
	one   batch
	// spare is the batch of an Add that runs alone (batches says why);
	// concurrent Adds take theirs from batches.
	spare atomic.Pointer[batch]
	// win is what Take returns, reused by the next Take.
	win Window
}

// pointLabels are the labels every point of an aggregator carries beside
// its family's: the collector's, the reporting node's, the span dimensions'.
type pointLabels struct {
	collector Label
	node      string
	span      []SpanDimension
}

// New returns an aggregator for s. Its maps are sized for the most
// tuples the limits allow, so that new tuples do not grow them.
func New(s Settings) *Aggregator {
	prof := profileByName(s.Profile).withDurationHistograms(s.DurationBounds, s.ExpoSize).withoutMetrics(s.DisabledMetrics)
	return newAggregator(prof, s)
}

// newAggregator is New of profile prof (s.Profile and the settings that
// shape the profile unused).
func newAggregator(prof *profile, s Settings) *Aggregator {
	a := &Aggregator{
		prof: prof, dims: s.Dimensions, keepExemplars: s.Exemplars,
		labels: pointLabels{collector: s.Collector, node: s.NodeLabel, span: s.Dimensions.Span},
		held: held{lim: s.Limits, handles: make(map[string]*handle, handlesHint(s.Limits)),
			gateways: make(map[string]heldGateway)},
	}
	a.win.a = a
	a.one.rng = rand.Uint64()
	a.fams = slices.Clone(prof.families)
	for i := range a.fams {
		f := &a.fams[i]
		ti := 0
		for ti < len(a.tables) && a.tables[ti].view != f.view {
			ti++
		}
		if ti == len(a.tables) {
			a.tables = append(a.tables, table{view: f.view, mask: newMask(f.view), hint: handlesHint(s.Limits)})
		}
		t := &a.tables[ti]
		f.table, f.slot = ti, len(t.fams)
		t.fams = append(t.fams, i)
		t.expo = t.expo || f.expoSize > 0
		f.claim = kongClaimOf(f.name, prof.name)
	}
	// A row's words: its series, then its explicit histograms' buckets.
	for ti := range a.tables {
		t := &a.tables[ti]
		t.words = len(t.fams) * seriesWords
		for _, fi := range t.fams {
			f := &a.fams[fi]
			f.at = t.words
			t.words += f.explicitBuckets()
		}
	}
	return a
}
