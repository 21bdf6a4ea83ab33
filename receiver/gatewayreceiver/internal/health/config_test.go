package health

import (
	"testing"
	"time"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// A poller field left at zero takes its default; the gateway's poller spec
// decides the default concurrency (Kong fetches one page per upstream).
func TestPollerDefaults(t *testing.T) {
	kong, _ := gateway.Lookup("kong")
	apisix, _ := gateway.Lookup("apisix")
	var p PollerConfig
	if p.interval(apisix.Poller) != 10*time.Second || p.timeout() != 5*time.Second || p.pageSize() != 100 {
		t.Errorf("defaults: interval %v timeout %v page_size %d", p.interval(apisix.Poller), p.timeout(), p.pageSize())
	}
	if got := p.interval(kong.Poller); got != 30*time.Second {
		t.Errorf("kong interval = %v, want 30s", got)
	}
	if got := p.maxConcurrency(kong.Poller); got != 4 {
		t.Errorf("kong max_concurrency = %d, want 4", got)
	}
	if got := p.maxConcurrency(apisix.Poller); got != 1 {
		t.Errorf("apisix max_concurrency = %d, want 1", got)
	}
	envoy, _ := gateway.Lookup("envoy")
	for spec, want := range map[*gateway.PollerSpec]int64{kong.Poller: 16 << 20, apisix.Poller: 32 << 20, envoy.Poller: 64 << 20, {}: defaultMaxResponseBodySize} {
		if got := p.maxResponseBodySize(spec); got != want {
			t.Errorf("max_response_body_size = %d, want %d", got, want)
		}
	}
	if got := (&PollerConfig{MaxResponseBodySize: 5}).maxResponseBodySize(kong.Poller); got != 5 {
		t.Errorf("a set max_response_body_size is %d, want 5", got)
	}
	p = PollerConfig{Interval: time.Second, MaxConcurrency: 3, PageSize: 50}
	p.Timeout = time.Millisecond
	if p.interval(kong.Poller) != time.Second || p.timeout() != time.Millisecond || p.maxConcurrency(kong.Poller) != 3 || p.pageSize() != 50 {
		t.Errorf("set values not kept: %+v", p)
	}
}
