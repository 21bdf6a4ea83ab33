package traffic

import (
	"testing"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// TestAddDoesNotAllocate: a seen tuple costs no allocation, for every
// profile (hash once, one handle lookup, in-place updates).
func TestAddDoesNotAllocate(t *testing.T) {
	for _, name := range []string{ProfileOTel, ProfileKong, ProfileAPISIX} {
		a := New(Settings{Profile: name, Dimensions: Dimensions{Service: true, Consumer: true}, Limits: Limits{MaxTuples: 100}, Exemplars: true})
		var e gateway.Event
		e.Reset()
		e.Route, e.RouteID, e.Method, e.StatusCode, e.TotalMS, e.UpstreamMS, e.RequestSize, e.ResponseSize = "/a", "1", "GET", 200, 12, 10, 100, 200
		e.GenAI.Provider, e.GenAI.RequestModel, e.GenAI.InputTokens = "openai", "gpt-4o", 5
		a.mu.Lock()
		a.add(&e)
		allocs := testing.AllocsPerRun(1000, func() { a.add(&e) })
		a.mu.Unlock()
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per event, want 0", name, allocs)
		}
	}
}
