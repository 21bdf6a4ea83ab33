package gatewayreceiver

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/health"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
)

// TestFactoryPipelineCombinations builds the receiver through its factory
// the way the collector does for every pipeline combination (traces only,
// metrics only, both; without health, with pushes, with a poller) and
// starts it: it either works end to end or is refused at start with a
// message naming the fix, never a panic. A health section needs a metrics
// pipeline; traces alone are refused.
func TestFactoryPipelineCombinations(t *testing.T) {
	kong := startFakeKong(t, smallKong())
	type healthCase struct {
		name  string
		apply func(*Config)
	}
	healths := []healthCase{
		{"no health", func(*Config) {}},
		{"push", func(c *Config) { c.Health = configoptional.Some(defaultHealthConfig()) }},
		{"poller", func(c *Config) {
			hc := defaultHealthConfig()
			hc.Push = configoptional.None[health.PushConfig]()
			// Its requests spread over 0.9s, not the default 30s interval.
			hc.Pollers = pollersOf("kong", kongPoller(kong.URL, func(p *PollerConfig) { p.Interval = time.Second }))
			c.Health = configoptional.Some(hc)
		}},
	}
	for _, pipes := range []struct {
		name            string
		metrics, traces bool
	}{{"traces only", false, true}, {"metrics only", true, false}, {"metrics and traces", true, true}} {
		for _, hc := range healths {
			t.Run(pipes.name+"/"+hc.name, func(t *testing.T) {
				cfg := NewFactory().CreateDefaultConfig().(*Config)
				cfg.Protocols.GRPC.Get().NetAddr.Endpoint = testutil.FreeAddr(t)
				httpAddr := testutil.FreeAddr(t)
				cfg.Protocols.HTTP.Get().NetAddr.Endpoint = httpAddr
				hc.apply(cfg)
				set := receivertest.NewNopSettings(metadata.Type)
				metrics := new(consumertest.MetricsSink)
				var comps []component.Component
				if pipes.metrics {
					r, err := NewFactory().CreateMetrics(context.Background(), set, cfg, metrics)
					if err != nil {
						t.Fatal(err)
					}
					comps = append(comps, r)
				}
				if pipes.traces {
					r, err := NewFactory().CreateTraces(context.Background(), set, cfg, consumertest.NewNop())
					if err != nil {
						t.Fatal(err)
					}
					comps = append(comps, r)
				}
				var startErr error
				for _, c := range comps {
					if err := c.Start(context.Background(), componenttest.NewNopHost()); err != nil {
						startErr = err
						break
					}
				}
				defer func() {
					for _, c := range comps {
						if err := c.Shutdown(context.Background()); err != nil {
							t.Errorf("shutdown: %v", err)
						}
					}
				}()
				refused := cfg.Health.HasValue() && !pipes.metrics
				switch {
				case refused && startErr == nil:
					t.Fatal("a health section in no metrics pipeline started")
				case refused:
					if !strings.Contains(startErr.Error(), "has a health section but is in no metrics pipeline") ||
						!strings.Contains(startErr.Error(), "service::pipelines::metrics::receivers") {
						t.Fatalf("refusal does not name the fix: %v", startErr)
					}
					return
				case startErr != nil:
					t.Fatalf("start: %v", startErr)
				}
				// Traffic is answered on every combination.
				if code, body := post(t, httpAddr, pbContentType, protoBody(t, kongExport("GET", "/a", 200))); code != http.StatusOK {
					t.Fatalf("export: %d %s", code, body)
				}
				switch hc.name {
				case "push":
					code, body := postHealth(t, "http://"+httpAddr+health.DefaultPushPath, "application/json",
						`{"gateway":"kong-7","kind":"kong","upstream":"billing","target":"api:8080","address":"10.0.0.1:8080","state":"HEALTHY"}`)
					if code != http.StatusOK {
						t.Fatalf("push: %d %s", code, body)
					}
					waitFor(t, func() bool { return len(seriesState(metrics.AllMetrics())) > 0 })
				case "poller":
					waitFor(t, func() bool { return len(seriesState(metrics.AllMetrics())) > 0 })
				default:
					// No health: the push path is not served.
					code, _ := postHealth(t, "http://"+httpAddr+health.DefaultPushPath, "application/json", `{}`)
					if code != http.StatusNotFound {
						t.Fatalf("push path without health: %d, want 404", code)
					}
				}
			})
		}
	}
}

// TestSharedReceiverStopsWithTheFirstPipeline: a receiver in a metrics and
// a traces pipeline stops, and flushes its open window, at the first of
// the two pipelines' Shutdown calls, whichever it is: the collector stops
// what a pipeline feeds right after that pipeline's receiver, so a receiver
// that waited for the other pipeline's call could flush into a stopped
// exporter (a SIGTERM lost the window in 6 of 30 runs).
func TestSharedReceiverStopsWithTheFirstPipeline(t *testing.T) {
	for _, first := range []string{"metrics", "traces"} {
		t.Run(first+" first", func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig().(*Config)
			cfg.Protocols.GRPC.Get().NetAddr.Endpoint = testutil.FreeAddr(t)
			httpAddr := testutil.FreeAddr(t)
			cfg.Protocols.HTTP.Get().NetAddr.Endpoint = httpAddr
			cfg.FlushInterval = time.Hour // the only flush is the one at shutdown
			set := receivertest.NewNopSettings(metadata.Type)
			metrics := new(consumertest.MetricsSink)
			m, err := NewFactory().CreateMetrics(context.Background(), set, cfg, metrics)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := NewFactory().CreateTraces(context.Background(), set, cfg, consumertest.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			nodes := map[string]component.Component{"metrics": m, "traces": tr}
			for _, c := range []component.Component{tr, m} { // the collector starts them in any order
				if err := c.Start(context.Background(), componenttest.NewNopHost()); err != nil {
					t.Fatal(err)
				}
			}
			if code, body := post(t, httpAddr, pbContentType, protoBody(t, kongExport("GET", "/a", 200))); code != http.StatusOK {
				t.Fatalf("export: %d %s", code, body)
			}
			if err := nodes[first].Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			// What the metrics pipeline feeds is stopped now; the window
			// must already be there.
			if n := metrics.DataPointCount(); n == 0 {
				t.Fatalf("after the %s pipeline's Shutdown the open window had not been flushed", first)
			}
			second := map[string]string{"metrics": "traces", "traces": "metrics"}[first]
			before := metrics.DataPointCount()
			if err := nodes[second].Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if n := metrics.DataPointCount(); n != before {
				t.Fatalf("the second Shutdown flushed again: %d points, then %d", before, n)
			}
		})
	}
}
