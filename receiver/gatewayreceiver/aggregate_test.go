package gatewayreceiver

import (
	"reflect"
	"testing"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// A set evicted after an idle window is reused for the next new tuple: its
// points must be those of a fresh aggregator's, with nothing left of the
// evicted tuple (counts, exemplars, an exponential histogram's scale).
func TestEvictedSetReuse(t *testing.T) {
	prof := otelProfile.withDurationHistograms(nil, defaultExpoMaxSize)
	event := func(route string, ms float64, traced bool) gateway.Event {
		e := otelEvent("kong", route)
		e.TotalMS, e.UpstreamMS = ms, ms/2
		e.GenAI.Provider, e.GenAI.RequestModel, e.GenAI.InputTokens = "openai", "gpt", 12
		if traced {
			e.TraceID, e.SpanID = [16]byte{1}, [8]byte{2}
		}
		return e
	}
	window := func(a *aggregator, evs ...gateway.Event) ([]point, []uint64, []exemplar) {
		a.mu.Lock()
		for i := range evs {
			a.addLocked(&evs[i])
		}
		a.mu.Unlock()
		points, buckets := a.take()
		return append([]point(nil), points...), append([]uint64(nil), buckets...), append([]exemplar(nil), a.exBuf...)
	}
	a := newAggregator(prof, dimensions{}, limits{})
	// A wide range of values lowers the series' scale; a trace leaves exemplars.
	window(a, event("/old", 0.001, true), event("/old", 1e6, true))
	window(a) // /old unused for a window: its sets are evicted
	if free := len(a.groups[0].free); free != 1 {
		t.Fatalf("%d free sets after eviction, want 1", free)
	}
	got, gotBuckets, gotEx := window(a, event("/new", 3, false))
	want, wantBuckets, wantEx := window(newAggregator(prof, dimensions{}, limits{}), event("/new", 3, false))
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotBuckets, wantBuckets) || len(gotEx) != 0 || len(wantEx) != 0 {
		t.Fatalf("reused sets:\n%+v\n%v %v\nfresh:\n%+v\n%v %v", got, gotBuckets, gotEx, want, wantBuckets, wantEx)
	}
}
