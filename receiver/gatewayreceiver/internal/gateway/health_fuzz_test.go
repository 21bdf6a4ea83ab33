package gateway

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Fuzz tests of the health decoders: any body decodes or fails with
// ErrMalformed, never panics, keeps what dst already held, and yields only
// states of the bounded set. Seeds are the reference fixtures of
// testdata/health plus each quirk the decoders handle.
// Run one for a while, e.g.:
//
//	go test ./internal/gateway -run '^$' -fuzz FuzzDecodeKongHealth -fuzztime 20s

func addHealthFixtures(f *testing.F, names ...string) {
	f.Helper()
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join("testdata", "health", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// checkDecoded holds for every decoder's answer.
func checkDecoded(t *testing.T, sentinel TargetHealth, got []TargetHealth, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, ErrMalformed) {
		t.Fatalf("error %v does not wrap ErrMalformed", err)
	}
	if len(got) == 0 || got[0] != sentinel {
		t.Fatalf("dst's first element was lost or changed: %+v", got)
	}
	for _, o := range got[1:] {
		if o.State >= NumHealthStates {
			t.Fatalf("state %d outside the set", o.State)
		}
		if o.IP == "" && o.Port != "" {
			t.Fatalf("port %q without an IP", o.Port)
		}
	}
}

var fuzzSentinel = TargetHealth{Upstream: "kept", Target: "kept:1", IP: "10.0.0.1", Port: "1", State: HealthHealthy}

func FuzzDecodeKongHealth(f *testing.F) {
	addHealthFixtures(f, "kong_health_doc.json")
	f.Add([]byte(`{"data":[{"target":"some-random-dns:80","health":"DNS_ERROR","data":{"addresses":{}}},` +
		`{"target":"a:8080","health":"HEALTHY","data":{"addresses":[{"ip":"10.0.0.1","port":8080,"health":"HEALTHY"},{"ip":"10.0.0.2","port":8080,"health":"UNHEALTHY"}]}}],` +
		`"offset":"WyJ1cHN0cmVhbSJd","next":"/upstreams/u1/health?offset=WyJ1cHN0cmVhbSJd","node_id":"x"}`))
	f.Add([]byte(`{"data":[{"target":"a:1","data":{"addresses":null}}],"next":null}`))
	f.Add([]byte(`{"data":[{"target":"a:1","data":{"addresses":{"0":{}}}}]}`))
	f.Add([]byte(`{"data":{"health":"HEALTHY"}}`))
	f.Add([]byte(`<html><body>502 Bad Gateway</body></html>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, _, err := DecodeKongHealth([]TargetHealth{fuzzSentinel}, "u", body)
		checkDecoded(t, fuzzSentinel, got, err)
		for _, o := range got[1:] {
			if o.Upstream != "u" {
				t.Fatalf("upstream %q, want the caller's", o.Upstream)
			}
		}
	})
}

func FuzzDecodeKongUpstreams(f *testing.F) {
	f.Add([]byte(`{"data":[{"id":"a1","name":"billing","algorithm":"round-robin"},{"id":"a2","name":"search"}],"next":null}`))
	f.Add([]byte(`{"data":[],"offset":"WyJ1Il0=","next":"/upstreams?offset=WyJ1Il0%3D&size=1000","node_id":"x"}`))
	f.Add([]byte(`{"data":[{"id":"a1"}],"next":"/upstreams?size=1000"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		page, err := DecodeKongUpstreams(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			if len(page.Upstreams) != 0 || page.Next != "" {
				t.Fatalf("a failed page returned %+v", page)
			}
		}
	})
}

func FuzzDecodeAPISIXHealth(f *testing.F) {
	addHealthFixtures(f, "apisix_test_t.json", "apisix_tutorial.json")
	f.Add([]byte(`[{"name":"/apisix/upstreams/2","type":"tcp","nodes":[{"ip":"10.1.0.1","port":80,"status":"mostly_healthy"},` +
		`{"ip":"10.1.0.2","port":80,"hostname":"b.svc","status":"mostly_unhealthy"}]},{"name":"/apisix/upstreams/3","nodes":null}]`))
	f.Add([]byte(`[{"name":"/routes/1","nodes":{"a":1}}]`))
	f.Add([]byte(`{"name":"/routes/1"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := DecodeAPISIXHealth([]TargetHealth{fuzzSentinel}, body)
		checkDecoded(t, fuzzSentinel, got, err)
	})
}

func FuzzDecodeEnvoyClusters(f *testing.F) {
	addHealthFixtures(f, "envoy_clusters.json")
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"cluster_statuses":[{"name":"c","host_statuses":[{"address":{"pipe":{"path":"/tmp/s"}},"health_status":{"eds_health_status":"DEGRADED"}},` +
		`{"address":{"socket_address":{"address":"10.0.0.1"}},"hostname":"h","health_status":{"failed_outlier_check":true}}]}]}`))
	f.Add([]byte(`{"configs":[]}`))
	f.Add([]byte("fake_cluster::1.2.3.4:80::health_flags::healthy"))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := DecodeEnvoyClusters([]TargetHealth{fuzzSentinel}, body)
		checkDecoded(t, fuzzSentinel, got, err)
		for _, o := range got[1:] {
			if o.State != HealthHealthy && o.State != HealthDegraded && o.State != HealthUnhealthy {
				t.Fatalf("Envoy state %v", o.State)
			}
		}
	})
}

// FuzzDecodeHealthEvents: every element of the body is either an event or
// a rejection (in order, by index), and every event carries the required
// fields.
func FuzzDecodeHealthEvents(f *testing.F) {
	f.Add([]byte(`{"gateway":"kong-7","kind":"kong","upstream":"billing","target":"api:8080","address":"10.0.0.1:8080","state":"HEALTHY","timestamp":"2026-07-01T10:00:00Z"}`))
	f.Add([]byte(`[{"gateway":"kong-7","upstream":"billing","target":"api:8080","address":"[::1]:8080","state":"dns_error"},{"gateway":"g","upstream":"u","target":"x:1","state":"purple"}]`))
	f.Add([]byte(`[{"gateway":"g","upstream":"u","target":"t","address":":80","state":"healthy","timestamp":"yesterday"},{"gateway":"g","kind":"nginx"}]`))
	f.Add([]byte(`{"gateway":"g","extra":1}`))
	f.Add([]byte(`[] []`))
	f.Add([]byte(`<xml/>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		sentinel := HealthEvent{Gateway: "kept"}
		events, rejected, err := DecodeHealthEvents([]HealthEvent{sentinel}, body)
		if len(events) == 0 || events[0] != sentinel {
			t.Fatalf("dst's first element was lost or changed")
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) || len(events) != 1 || len(rejected) != 0 {
				t.Fatalf("body error %v with %d events, %d rejections", err, len(events)-1, len(rejected))
			}
			return
		}
		last := -1
		for _, r := range rejected {
			if r.Index <= last || r.Msg == "" {
				t.Fatalf("rejections out of order or empty: %+v", rejected)
			}
			last = r.Index
		}
		for _, e := range events[1:] {
			if e.Gateway == "" || e.Upstream == "" || e.Target == "" || e.State >= NumHealthStates {
				t.Fatalf("accepted an incomplete event %+v", e)
			}
			if e.Port != "" && e.IP == "" {
				t.Fatalf("address without an IP: %+v", e)
			}
		}
	})
}
