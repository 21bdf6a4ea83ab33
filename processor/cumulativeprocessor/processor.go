package cumulativeprocessor

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelgateway/otelgateway/internal/identity"
	"github.com/otelgateway/otelgateway/processor/cumulativeprocessor/internal/metadata"
)

// cumulativeProcessor turns delta sums into cumulative sums, one state per
// stream (resource + scope + metric + point attributes). Everything else
// passes through untouched.
//
// Concurrency: ConsumeMetrics may be called from several goroutines; the
// stream table is guarded by one mutex held for the whole batch, so the
// points of one batch are applied atomically. The sweep takes the same lock.
type cumulativeProcessor struct {
	cfg       *Config
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder

	mu     sync.Mutex
	byHash map[uint64][]*metricStreams
	// hashAttrs is identity.OfMap; tests swap it to force hash collisions.
	hashAttrs func(pcommon.Map) uint64

	stop chan struct{}
	done chan struct{}
}

var (
	outcomeAccumulated = attribute.NewSet(attribute.String("outcome", "accumulated"))
	dropOutOfOrder     = dropped(reasonOutOfOrder)
	dropOlderStart     = dropped(reasonOlderStart)
	restartTypeChanged = attribute.NewSet(attribute.String("outcome", "accumulated"), attribute.String("reason", reasonTypeChanged))
)

func dropped(reason string) attribute.Set {
	return attribute.NewSet(attribute.String("outcome", "dropped"), attribute.String("reason", reason))
}

func newProcessor(cfg *Config, set processor.Settings) (*cumulativeProcessor, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &cumulativeProcessor{
		cfg:       cfg,
		logger:    set.Logger,
		telemetry: tb,
		byHash:    make(map[uint64][]*metricStreams),
		hashAttrs: identity.OfMap,
	}, nil
}

func (p *cumulativeProcessor) start(context.Context, component.Host) error {
	p.stop = make(chan struct{})
	p.done = make(chan struct{})
	go p.sweepLoop()
	return nil
}

func (p *cumulativeProcessor) shutdown(context.Context) error {
	if p.stop != nil {
		close(p.stop)
		<-p.done
		p.stop = nil
	}
	return nil
}

// processMetrics rewrites every delta sum point in place as its cumulative
// point and removes the points the data model says to drop.
func (p *cumulativeProcessor) processMetrics(ctx context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	now := time.Now().UnixNano()
	p.mu.Lock()
	defer p.mu.Unlock()
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		// Resource and scope identities are hashed once per container, not
		// once per point.
		resHash := identity.OfMap(rm.Resource().Attributes())
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			sm := sms.At(j)
			scope := sm.Scope()
			scopeHash := identity.Combine(resHash, identity.OfString(scope.Name()))
			scopeHash = identity.Combine(scopeHash, identity.OfString(scope.Version()))
			scopeHash = identity.Combine(scopeHash, identity.OfMap(scope.Attributes()))
			sm.Metrics().RemoveIf(func(m pmetric.Metric) bool {
				if m.Type() != pmetric.MetricTypeSum || m.Sum().AggregationTemporality() != pmetric.AggregationTemporalityDelta {
					return false // not ours: pass through untouched
				}
				ms := p.streamsOf(rm.Resource(), scope, m, scopeHash)
				return p.accumulateSum(ctx, ms, m.Sum(), now)
			})
		}
	}
	return md, nil
}

// accumulateSum handles one delta sum and reports whether it ended up empty
// (every point dropped), in which case the caller removes it.
func (p *cumulativeProcessor) accumulateSum(ctx context.Context, ms *metricStreams, sum pmetric.Sum, now int64) bool {
	dps := sum.DataPoints()
	sortByTimestamp(dps)
	var accepted int64
	dps.RemoveIf(func(dp pmetric.NumberDataPoint) bool {
		h := p.hashAttrs(dp.Attributes())
		s := ms.find(h, dp.Attributes())
		if s == nil {
			s = ms.add(h, dp.Attributes())
			p.telemetry.ProcessorCumulativeStreams.Add(ctx, 1)
		}
		switch s.accumulate(dp, now) {
		case "":
			accepted++
			return false
		case reasonTypeChanged:
			p.telemetry.ProcessorCumulativePoints.Add(ctx, 1, metric.WithAttributeSet(restartTypeChanged))
			return false
		case reasonOutOfOrder:
			p.telemetry.ProcessorCumulativePoints.Add(ctx, 1, metric.WithAttributeSet(dropOutOfOrder))
		case reasonOlderStart:
			p.telemetry.ProcessorCumulativePoints.Add(ctx, 1, metric.WithAttributeSet(dropOlderStart))
		}
		return true
	})
	p.telemetry.ProcessorCumulativePoints.Add(ctx, accepted, metric.WithAttributeSet(outcomeAccumulated))
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	return dps.Len() == 0
}

// streamsOf finds or creates the stream set of one metric; the caller holds
// p.mu.
func (p *cumulativeProcessor) streamsOf(res pcommon.Resource, scope pcommon.InstrumentationScope, m pmetric.Metric, scopeHash uint64) *metricStreams {
	h := identityOf(scopeHash, m)
	for _, ms := range p.byHash[h] {
		if ms.matches(res, scope, m) {
			return ms
		}
	}
	ms := newMetricStreams(res, scope, m)
	p.byHash[h] = append(p.byHash[h], ms)
	return ms
}

func (p *cumulativeProcessor) sweepLoop() {
	defer close(p.done)
	t := time.NewTicker(p.cfg.MaxStale / 2)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-t.C:
			p.sweep(now)
		}
	}
}

// sweep forgets the streams that received no point for max_stale. It runs in
// the background so that ConsumeMetrics never pays for expiry.
func (p *cumulativeProcessor) sweep(now time.Time) {
	cutoff := now.Add(-p.cfg.MaxStale).UnixNano()
	p.mu.Lock()
	defer p.mu.Unlock()
	var removed int64
	for h, sets := range p.byHash {
		sets = slices.DeleteFunc(sets, func(ms *metricStreams) bool {
			for ah, streams := range ms.streams {
				before := len(streams)
				streams = slices.DeleteFunc(streams, func(s *stream) bool { return s.seen < cutoff })
				removed += int64(before - len(streams))
				if len(streams) == 0 {
					delete(ms.streams, ah)
				} else {
					ms.streams[ah] = streams
				}
			}
			return len(ms.streams) == 0
		})
		if len(sets) == 0 {
			delete(p.byHash, h)
		} else {
			p.byHash[h] = sets
		}
	}
	if removed > 0 {
		p.telemetry.ProcessorCumulativeStreams.Add(context.Background(), -removed)
		p.logger.Debug("Dropped stale streams", zap.Int64("streams", removed))
	}
}
