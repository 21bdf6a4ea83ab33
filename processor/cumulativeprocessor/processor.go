package cumulativeprocessor

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.uber.org/zap"

	"github.com/otelgateway/otelgateway/internal/foldlog"
	"github.com/otelgateway/otelgateway/internal/identity"
	"github.com/otelgateway/otelgateway/internal/rename"
	"github.com/otelgateway/otelgateway/processor/cumulativeprocessor/internal/metadata"
)

// cumulativeProcessor turns delta sums and histograms into cumulative ones,
// one state per stream (resource + scope + metric + point attributes).
// Everything else passes through untouched.
//
// Concurrency: ConsumeMetrics may be called from any number of goroutines.
// There is no lock held for a batch: each point takes the lock of its
// stream's shard only while it folds (one of 64, chosen by identity hash),
// the identity cache is read without locks, and the metric table is read
// under a read lock once per metric per batch. Points of one stream from two
// concurrent batches are applied one at a time in whatever order the shard
// lock admits them; a point that then arrives older than the stream's last
// is dropped as out_of_order, so accumulated + dropped always account for
// every point. The stale sweep and the interval emission take one shard lock
// at a time.
type cumulativeProcessor struct {
	cfg       *Config
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder
	next      consumer.Metrics

	metrics metricTable
	shards  [shardCount]shard
	cache   *identity.Cache[*stream]
	// limited counts the streams held against max_streams (overflow streams
	// are not: they are what the limit folds into).
	limited atomic.Int64
	// folds logs when limits.max_streams folds points (internal/foldlog).
	folds *foldlog.Logger

	// hashAttrs is identity.OfMap; tests swap it to force hash collisions.
	hashAttrs func(pcommon.Map) uint64

	emitMu sync.Mutex // serialises interval emissions (ticks and the final one)
	stop   chan struct{}
	done   chan struct{}

	// id names the processor's client of the storage extension.
	id component.ID
	// store is the storage client the streams are checkpointed to; nil
	// without storage. Used by Start, the background goroutine and
	// Shutdown, never concurrently (Shutdown waits for the goroutine).
	store storage.Client
	// lastCheckpointSize sizes the next checkpoint's buffer.
	lastCheckpointSize int
}

func newProcessor(cfg *Config, set processor.Settings, next consumer.Metrics) (*cumulativeProcessor, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	p := &cumulativeProcessor{
		cfg:       cfg,
		logger:    set.Logger,
		telemetry: tb,
		next:      next,
		metrics:   metricTable{byHash: make(map[uint64][]*metricDesc), lastOfScope: make(map[uint64]uint64)},
		// Room for as many entries as streams may exist: a working set
		// within the limit stays on the fast path (two-choice sets keep
		// conflicts rare). The cache starts small and grows with the
		// streams, so an unused max_streams costs no memory.
		cache:     identity.NewCache[*stream](cfg.Limits.MaxStreams),
		hashAttrs: identity.OfMap,
		id:        set.ID,
		folds:     newStreamFolds(cfg, set.Logger),
	}
	rename.Warn(set.Logger, cfg.renamed)
	return p, nil
}

// start restores the streams from the storage extension's checkpoint, if
// one is configured, before any point arrives; then starts the background
// work.
func (p *cumulativeProcessor) start(ctx context.Context, host component.Host) error {
	p.telemetry.ProcessorCumulativeStreamsLimit.Record(ctx, int64(p.cfg.Limits.MaxStreams))
	if p.cfg.Storage != nil {
		client, err := p.openStorage(ctx, host)
		if err != nil {
			return err
		}
		if p.store = client; p.store != nil {
			p.restore(ctx)
		}
	}
	p.stop = make(chan struct{})
	p.done = make(chan struct{})
	go p.background()
	return nil
}

// shutdown stops the background work, emits what is pending (interval),
// and writes the last checkpoint: the pipeline's receivers have stopped
// before its processors, so it holds every point processed.
func (p *cumulativeProcessor) shutdown(ctx context.Context) error {
	if p.stop == nil {
		return nil
	}
	defer p.folds.Close()
	close(p.stop)
	<-p.done
	p.stop = nil
	var err error
	if p.cfg.Emit == EmitInterval {
		// Streams touched since the last tick leave now, not never.
		err = p.emit(ctx)
	}
	if p.store != nil {
		p.save(ctx)
		if cerr := p.store.Close(ctx); cerr != nil {
			p.logger.Warn("Closing the storage client failed", zap.Error(cerr))
		}
		p.store = nil
	}
	return err
}

// background runs the stale sweep, with emit: interval the emission ticks,
// and with storage the checkpoints, so that ConsumeMetrics never pays for
// any of them.
func (p *cumulativeProcessor) background() {
	defer close(p.done)
	sweep := time.NewTicker(p.cfg.MaxStale / 2)
	defer sweep.Stop()
	var tick, checkpoint <-chan time.Time
	if p.cfg.Emit == EmitInterval {
		t := time.NewTicker(p.cfg.Interval)
		defer t.Stop()
		tick = t.C
	}
	if p.store != nil {
		t := time.NewTicker(p.cfg.CheckpointInterval)
		defer t.Stop()
		checkpoint = t.C
	}
	for {
		select {
		case <-p.stop:
			return
		case now := <-sweep.C:
			p.sweep(now)
		case <-checkpoint:
			p.save(context.Background())
		case <-tick:
			if err := p.emit(context.Background()); err != nil {
				p.logger.Warn("Emitting cumulative points failed", zap.Error(err))
			}
		}
	}
}

// processMetrics folds every delta point into its stream. With per_batch it
// rewrites each point in place as its cumulative point; with interval it
// removes the delta metrics (emitted later by the ticker). Points the data
// model says to drop are removed, and so are containers left empty.
func (p *cumulativeProcessor) processMetrics(ctx context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	now := time.Now().UnixNano()
	var c counts
	md.ResourceMetrics().RemoveIf(func(rm pmetric.ResourceMetrics) bool {
		// Resource and scope identities are hashed once per container, not
		// once per point.
		resHash := identity.OfMap(rm.Resource().Attributes())
		rm.ScopeMetrics().RemoveIf(func(sm pmetric.ScopeMetrics) bool {
			c.replay = takeReplayMark(sm) // before the scope's identity is hashed
			si := newScopeIdentity(rm, resHash, sm)
			sm.Metrics().RemoveIf(func(m pmetric.Metric) bool {
				return p.processMetric(&si, m, now, &c)
			})
			return sm.Metrics().Len() == 0
		})
		return rm.ScopeMetrics().Len() == 0
	})
	c.record(ctx, p.telemetry)
	p.folds.Folded(c.points[overflowed])
	if md.ResourceMetrics().Len() == 0 {
		// Nothing left (interval mode, or every point dropped): do not send
		// an empty batch down the pipeline.
		return md, processorhelper.ErrSkipProcessingData
	}
	return md, nil
}

// processMetric handles one metric and reports whether it is to be removed
// from the batch (consumed or left without points).
func (p *cumulativeProcessor) processMetric(si *scopeIdentity, m pmetric.Metric, now int64, c *counts) bool {
	switch m.Type() {
	case pmetric.MetricTypeSum:
		if m.Sum().AggregationTemporality() != pmetric.AggregationTemporalityDelta {
			return false
		}
		d := p.metrics.get(si, m, now)
		m.Sum().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		return accumulate(p, d, m.Sum().DataPoints(), sumKind, now, c)
	case pmetric.MetricTypeHistogram:
		if m.Histogram().AggregationTemporality() != pmetric.AggregationTemporalityDelta {
			return false
		}
		d := p.metrics.get(si, m, now)
		m.Histogram().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		return accumulate(p, d, m.Histogram().DataPoints(), histKind, now, c)
	case pmetric.MetricTypeExponentialHistogram:
		if m.ExponentialHistogram().AggregationTemporality() != pmetric.AggregationTemporalityDelta {
			return false
		}
		d := p.metrics.get(si, m, now)
		m.ExponentialHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		return accumulate(p, d, m.ExponentialHistogram().DataPoints(), expKind, now, c)
	default:
		return false // gauges, summaries: not ours, pass through untouched
	}
}

// dataPoint is what accumulate needs of a number, histogram or exponential
// histogram point.
type dataPoint interface {
	Attributes() pcommon.Map
	StartTimestamp() pcommon.Timestamp
	Timestamp() pcommon.Timestamp
	SetStartTimestamp(pcommon.Timestamp)
	SetTimestamp(pcommon.Timestamp)
}

type pointSlice[P dataPoint] interface {
	Len() int
	At(int) P
	RemoveIf(func(P) bool)
	Sort(func(a, b P) bool)
}

// kind is how points of one metric type fold into and are written from a
// stream. Both run under the stream's shard lock.
type kind[P dataPoint] struct {
	// invalid reports a malformed point, checked before s is touched; nil
	// when every point of the type can be folded.
	invalid func(dp P) bool
	// fold adds dp to s, whose window check has passed. It returns accepted
	// or a restart reason (the stream restarted from dp).
	fold func(p *cumulativeProcessor, s *stream, dp P) reason
	// write sets dp's value to s's cumulative state.
	write func(s *stream, dp P)
	// save keeps s's value as the value before the window about to be
	// folded; restore puts it back, for a window that replaces the last
	// one. save may set s.fresh when s holds no value yet.
	save, restore func(s *stream)
	// exemplars returns dp's exemplars.
	exemplars func(dp P) pmetric.ExemplarSlice
}

// accumulate folds the points of one delta metric into their streams and
// reports whether the metric is to be removed from the batch.
func accumulate[P dataPoint](p *cumulativeProcessor, d *metricDesc, dps pointSlice[P], k kind[P], now int64, c *counts) bool {
	sortByTimestamp(dps)
	interval := p.cfg.Emit == EmitInterval
	// The closure's state, in one struct: RemoveIf takes the closure through
	// an interface, so it escapes, and each variable it writes would be a
	// heap allocation of its own per metric per batch.
	var st struct {
		// Points of one batch that overflow collapse into one output
		// point per overflow stream (the first one, rewritten at the
		// end), so the batch never carries two points of one series with
		// equal timestamps. A metric has one overflow stream per
		// collector label value (overflow_keep): almost always one.
		ovs []overflowOut[P]
		// The lookup of a point in a large cache misses on several random
		// lines: its two sets, then the entry, then the encoding a hit is
		// confirmed against and the stream it returns. Each is loaded
		// while earlier points are folded instead of stalling its own
		// (lookahead): as point i is processed, point i+3's attributes
		// are hashed and its sets prefetched, point i+2's entry (its sets
		// now loaded), point i+1's encoding and stream (its entry now
		// loaded). While points miss the cache (missed: new streams come
		// in runs, a new source or a restart), the index slot the hashed
		// point's creation probes is prefetched too; a run of hits never
		// touches the index. RemoveIf calls f for point i before it moves
		// or removes any point after i, so At(i+k) is the k-th next
		// point; a point whose attributes are not the ones hashed ahead
		// (the same map, compared by reference) is hashed again, so that
		// the hash always is its own whatever order RemoveIf visits in.
		i      int
		ahead  [lookaheadRing]hashedAttrs
		missed bool
	}
	n := dps.Len()
	for j := range min(n, lookahead) {
		st.ahead[j] = p.hashAhead(d, dps.At(j).Attributes(), false)
	}
	dps.RemoveIf(func(dp P) bool {
		i := st.i
		st.i++
		attrs, h := dp.Attributes(), st.ahead[i%lookaheadRing].h
		if i >= n || attrs != st.ahead[i%lookaheadRing].attrs {
			h = p.hashAttrs(attrs)
		}
		if j := i + lookahead; j < n {
			st.ahead[j%lookaheadRing] = p.hashAhead(d, dps.At(j).Attributes(), st.missed)
		}
		if j := i + 2; j < n {
			p.cache.PrefetchEntry(d.id, st.ahead[j%lookaheadRing].h)
		}
		if j := i + 1; j < n {
			if s, ok := p.cache.PrefetchValue(d.id, st.ahead[j%lookaheadRing].h); ok {
				s.prefetch()
			}
		}
		misses := c.misses
		s := p.lockStream(d, attrs, h, now, c)
		st.missed = c.misses != misses
		defer s.shard.mu.Unlock()
		r := accepted
		if s.overflow {
			r = overflowed
		} else if r = s.window(dp.StartTimestamp(), dp.Timestamp()); r.dropped() {
			if c.replay && r != invalid {
				r = replayed
			}
			c.points[r]++
			return true
		}
		if k.invalid != nil && k.invalid(dp) {
			c.points[invalid]++
			return true
		}
		switch {
		case s.overflow:
			// Points of many streams: no window to replace.
		case r == replaced:
			// The last window again, maybe with more counts: cumulative =
			// the value before it + this point, never both windows.
			if s.fresh {
				s.started = false // it started the stream: start it again
			} else {
				k.restore(s)
			}
		case s.started:
			s.fresh = false
			k.save(s)
		}
		if !s.started {
			s.restart(dp.StartTimestamp(), dp.Timestamp())
			s.fresh = true
		}
		s.winStart = dp.StartTimestamp()
		if fr := k.fold(p, s, dp); fr != accepted {
			s.fresh = true // restarted from dp: nothing before this window
			if r != overflowed {
				r = fr
			}
		}
		c.points[r]++
		s.last = max(s.last, dp.Timestamp())
		s.seen = now
		if interval || s.overflow {
			// The point does not leave as itself: its exemplars wait in
			// the stream for the point that will (exemplars.go). With
			// per_batch, any other point keeps its own.
			s.keepExemplars(k.exemplars(dp))
		}
		if interval {
			s.touch()
			return true
		}
		if s.overflow {
			for _, o := range st.ovs {
				if o.s == s {
					return true
				}
			}
			st.ovs = append(st.ovs, overflowOut[P]{s, dp})
			return false
		}
		dp.SetStartTimestamp(s.start)
		k.write(s, dp)
		return false
	})
	for _, o := range st.ovs {
		ov, ovDP := o.s, o.dp
		ov.shard.mu.Lock()
		ovDP.Attributes().Clear()
		ov.attrs.CopyTo(ovDP.Attributes())
		ovDP.SetStartTimestamp(ov.start)
		ovDP.SetTimestamp(ov.last)
		k.write(ov, ovDP)
		// The exemplars of every overflowed point (this one's included),
		// one per bucket.
		ex := k.exemplars(ovDP)
		ex.RemoveIf(func(pmetric.Exemplar) bool { return true })
		ov.takeExemplars(ex)
		ov.shard.mu.Unlock()
	}
	return dps.Len() == 0
}

// lookahead is how many points ahead of the one being folded a batch's
// attributes are hashed and their cache sets prefetched (accumulate): the
// lookup's three dependent loads, one step per point.
const (
	lookahead     = 3
	lookaheadRing = 4 // a power of two above lookahead
)

// hashedAttrs is a point's attributes, hashed ahead of its turn.
type hashedAttrs struct {
	attrs pcommon.Map
	h     uint64
}

// hashAhead hashes attrs, a point's lookahead points ahead, and prefetches
// its cache sets (and, while points miss, its index slot).
func (p *cumulativeProcessor) hashAhead(d *metricDesc, attrs pcommon.Map, missed bool) hashedAttrs {
	h := p.hashAttrs(attrs)
	p.cache.Prefetch(d.id, h)
	if missed {
		p.shardOf(d.id, h).streams.prefetchSlot(d.id, h)
	}
	return hashedAttrs{attrs, h}
}

// overflowOut is the output point of one overflow stream in a batch.
type overflowOut[P dataPoint] struct {
	s  *stream
	dp P
}

// sortByTimestamp orders a metric's points by time when they are not already,
// so a batch that arrives newest-first is accumulated oldest-first instead of
// losing all but its newest point (contrib #46441). The sort is stable:
// points of one stream with equal timestamps keep their order (and the later
// one is then dropped).
func sortByTimestamp[P dataPoint](dps pointSlice[P]) {
	for i := 1; i < dps.Len(); i++ {
		if dps.At(i).Timestamp() < dps.At(i-1).Timestamp() {
			dps.Sort(func(a, b P) bool { return a.Timestamp() < b.Timestamp() })
			return
		}
	}
}
