package gateway

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func readHealthFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "health", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkObs(t *testing.T, got, want []TargetHealth) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("observations\n got %+v\nwant %+v", got, want)
	}
}

// The published Kong doc example (§1b), legacy "total" and integer
// created_at included.
func TestDecodeKongHealthDocExample(t *testing.T) {
	got, next, err := DecodeKongHealth(nil, "my-upstream", readHealthFixture(t, "kong_health_doc.json"))
	if err != nil || next != "" {
		t.Fatalf("next %q err %v", next, err)
	}
	checkObs(t, got, []TargetHealth{
		{Upstream: "my-upstream", Target: "127.0.0.1:20000", IP: "127.0.0.1", Port: "20000", State: HealthHealthy},
		{Upstream: "my-upstream", Target: "127.0.0.1:20002", IP: "127.0.0.1", Port: "20002", State: HealthUnhealthy},
	})
}

// Current Kong: next/offset/node_id, DNS_ERROR with no addresses, a target
// with two addresses, HEALTHCHECKS_OFF, an unknown state string.
func TestDecodeKongHealthStates(t *testing.T) {
	body := []byte(`{"data":[
	 {"target":"some-random-dns:80","health":"DNS_ERROR","data":{"dns":"dns server error: 3 name error","addresses":{}}},
	 {"target":"api.internal:8080","health":"HEALTHY","data":{"addresses":[
	   {"ip":"10.0.0.1","port":8080,"weight":100,"health":"HEALTHY"},
	   {"ip":"10.0.0.2","port":8080,"weight":100,"health":"UNHEALTHY"}]}},
	 {"target":"off:80","health":"HEALTHCHECKS_OFF","data":{"addresses":[{"ip":"10.0.0.3","port":80,"health":"HEALTHCHECKS_OFF"}]}},
	 {"target":"odd:80","health":"HEALTHY","data":{"addresses":[{"ip":"10.0.0.4","port":80,"health":"SOMETHING_NEW"}]}}
	],"offset":"WyJ1cHN0cmVhbSJd","next":"/upstreams/u1/health?offset=WyJ1cHN0cmVhbSJd","node_id":"cbb297c0-14a9-46bc-ad91-1d0ef9b42df9"}`)
	got, next, err := DecodeKongHealth(nil, "u1", body)
	if err != nil {
		t.Fatal(err)
	}
	if next != "/upstreams/u1/health?offset=WyJ1cHN0cmVhbSJd" {
		t.Errorf("next = %q", next)
	}
	checkObs(t, got, []TargetHealth{
		{Upstream: "u1", Target: "some-random-dns:80", State: HealthDNSError},
		{Upstream: "u1", Target: "api.internal:8080", IP: "10.0.0.1", Port: "8080", State: HealthHealthy},
		{Upstream: "u1", Target: "api.internal:8080", IP: "10.0.0.2", Port: "8080", State: HealthUnhealthy},
		{Upstream: "u1", Target: "off:80", IP: "10.0.0.3", Port: "80", State: HealthChecksOff},
		{Upstream: "u1", Target: "odd:80", IP: "10.0.0.4", Port: "80", State: HealthUnknown},
	})
	if a := got[0].Address(); a != "" {
		t.Errorf("dns_error address = %q, want empty", a)
	}
	if a := got[1].Address(); a != "10.0.0.1:8080" {
		t.Errorf("address = %q", a)
	}
}

func TestDecodeKongUpstreams(t *testing.T) {
	page, err := DecodeKongUpstreams([]byte(`{"data":[{"id":"a1","name":"billing","algorithm":"round-robin"},{"id":"a2","name":"search"}],"next":null}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := (KongUpstreamPage{Upstreams: []KongUpstream{{"a1", "billing"}, {"a2", "search"}}}); !reflect.DeepEqual(page, want) {
		t.Fatalf("page = %+v, want %+v", page, want)
	}
}

func TestDecodeMalformed(t *testing.T) {
	cases := []struct {
		name, body, want string
		decode           func([]byte) error
	}{
		{"kong HTML", "<html><body>502 Bad Gateway</body></html>", `Kong upstream health: invalid character '<' looking for beginning of value (body starts "<html><body>502 Bad Gateway</body></html>")`, kongHealth},
		{"kong truncated", `{"data":[{"target":"a:1","health":"HEA`, `Kong upstream health: unexpected end of JSON input (body starts "{\"data\":[{\"target\":\"a:1\",\"health\":\"HEA")`, kongHealth},
		{"kong data object", `{"data":{"health":"HEALTHY"}}`, `Kong upstream health: json: cannot unmarshal object into Go struct field kongPage[github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway.kongTarget].data of type []gateway.kongTarget (body starts "{\"data\":{\"health\":\"HEALTHY\"}}")`, kongHealth},
		{"kong no data", `{"message":"Not found"}`, `Kong upstream health has no "data" array (body starts "{\"message\":\"Not found\"}")`, kongHealth},
		{"kong list no data", `{}`, `Kong upstream list has no "data" array (body starts "{}")`, func(b []byte) error { _, err := DecodeKongUpstreams(b); return err }},
		{"apisix object", `{"name":"/routes/1"}`, `APISIX healthcheck list: json: cannot unmarshal object into Go value of type []gateway.apisixChecker (body starts "{\"name\":\"/routes/1\"}")`, apisixHealth},
		{"apisix nodes non-empty object", `[{"name":"/routes/1","nodes":{"a":1}}]`, `APISIX healthcheck list: a non-empty object where an array belongs (only {} may stand for an empty list) (body starts "[{\"name\":\"/routes/1\",\"nodes\":{\"a\":1}}]")`, apisixHealth},
		{"envoy text format", "fake_cluster::1.2.3.4:80::health_flags::healthy", `Envoy clusters: invalid character 'k' in literal false (expecting 'l') (body starts "fake_cluster::1.2.3.4:80::health_flags::healthy")`, envoyHealth},
		{"envoy other JSON", `{"configs":[]}`, `Envoy clusters has no "cluster_statuses" (body starts "{\"configs\":[]}")`, envoyHealth},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.decode([]byte(c.body))
			if err == nil || err.Error() != c.want {
				t.Fatalf("error = %v\nwant    %s", err, c.want)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("error does not wrap ErrMalformed")
			}
		})
	}
}

func kongHealth(b []byte) error { _, _, err := DecodeKongHealth(nil, "u", b); return err }
func apisixHealth(b []byte) error {
	_, err := DecodeAPISIXHealth(nil, b)
	return err
}
func envoyHealth(b []byte) error { _, err := DecodeEnvoyClusters(nil, b); return err }

// The tutorial's `"nodes": {}` (an empty Lua table) is an empty list.
func TestDecodeAPISIXEmptyNodesObject(t *testing.T) {
	got, err := DecodeAPISIXHealth(nil, readHealthFixture(t, "apisix_tutorial.json"))
	if err != nil {
		t.Fatal(err)
	}
	checkObs(t, got, []TargetHealth{
		{Upstream: "/apisix/routes/example-hc-route", Target: "127.0.0.1:1970", IP: "127.0.0.1", Port: "1970", State: HealthHealthy},
		{Upstream: "/apisix/routes/example-hc-route", Target: "127.0.0.1:1980", IP: "127.0.0.1", Port: "1980", State: HealthHealthy},
	})
}

func TestDecodeAPISIXStates(t *testing.T) {
	got, err := DecodeAPISIXHealth(nil, readHealthFixture(t, "apisix_test_t.json"))
	if err != nil {
		t.Fatal(err)
	}
	more, err := DecodeAPISIXHealth(got, []byte(`[{"name":"/apisix/upstreams/2","type":"tcp","nodes":[
		{"ip":"10.1.0.1","port":80,"status":"mostly_healthy"},
		{"ip":"10.1.0.2","port":80,"hostname":"b.svc","status":"mostly_unhealthy"}]},{"name":"/apisix/upstreams/3","nodes":null}]`))
	if err != nil {
		t.Fatal(err)
	}
	checkObs(t, more, []TargetHealth{
		{Upstream: "/routes/1", Target: "127.0.0.1:1980", IP: "127.0.0.1", Port: "1980", State: HealthHealthy},
		{Upstream: "/routes/1", Target: "127.0.0.1:1988", IP: "127.0.0.1", Port: "1988", State: HealthUnhealthy},
		{Upstream: "/apisix/upstreams/2", Target: "10.1.0.1:80", IP: "10.1.0.1", Port: "80", State: HealthMostlyHealthy},
		{Upstream: "/apisix/upstreams/2", Target: "b.svc:80", IP: "10.1.0.2", Port: "80", State: HealthMostlyUnhealthy},
	})
}

// Envoy's test fixture plus omitted zero fields: no type on counters, no
// value on zero stats, absent false flags, an empty health_status, a pipe.
func TestDecodeEnvoyClusters(t *testing.T) {
	got, err := DecodeEnvoyClusters(nil, readHealthFixture(t, "envoy_clusters.json"))
	if err != nil {
		t.Fatal(err)
	}
	checkObs(t, got, []TargetHealth{
		{Upstream: "fake_cluster", Target: "foo.com:80", IP: "1.2.3.4", Port: "80", State: HealthUnhealthy},
		{Upstream: "fake_cluster", Target: "10.0.0.2:8080", IP: "10.0.0.2", Port: "8080", State: HealthHealthy},
		{Upstream: "fake_cluster", Target: "10.0.0.3:8080", IP: "10.0.0.3", Port: "8080", State: HealthDegraded},
		{Upstream: "fake_cluster", Target: "/run/app.sock", IP: "/run/app.sock", State: HealthHealthy},
	})
	if a := got[3].Address(); a != "/run/app.sock" {
		t.Errorf("pipe address = %q", a)
	}
	// An Envoy without clusters prints {}.
	if got, err := DecodeEnvoyClusters(nil, []byte("{}")); err != nil || len(got) != 0 {
		t.Fatalf("empty Envoy: %v %v", got, err)
	}
}

func TestDecodeHealthEvents(t *testing.T) {
	ts := "2026-07-01T10:00:00.5Z"
	one := []byte(`{"gateway":"kong-1","kind":"kong","upstream":"billing","target":"api:8080","address":"10.0.0.1:8080","state":"UNHEALTHY","timestamp":"` + ts + `"}`)
	got, rejected, err := DecodeHealthEvents(nil, one)
	if err != nil || len(rejected) != 0 {
		t.Fatalf("err %v rejected %v", err, rejected)
	}
	at, _ := time.Parse(time.RFC3339Nano, ts)
	want := []HealthEvent{{Gateway: "kong-1", Kind: KindKong, Time: at, HasTime: true,
		TargetHealth: TargetHealth{Upstream: "billing", Target: "api:8080", IP: "10.0.0.1", Port: "8080", State: HealthUnhealthy}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v want %+v", got, want)
	}

	arr := []byte(`[
	 {"gateway":"g","upstream":"u","target":"t:1","state":"dns_error"},
	 {"gateway":"g","upstream":"u","target":"t:1","state":"green"},
	 {"upstream":"u","target":"t:1","state":"healthy"},
	 {"gateway":"g","upstream":"u","target":"t:1","address":"10.0.0.1","state":"healthy"},
	 {"gateway":"g","upstream":"u","target":"t:1","state":"healthy","timestamp":"yesterday"},
	 {"gateway":"g","kind":"nginx","upstream":"u","target":"t:1","state":"healthy"},
	 {"gateway":"g","upstream":"u","target":"[::1]:80","address":"[::1]:80","state":"mostly_healthy"}
	]`)
	got, rejected, err = DecodeHealthEvents(nil, arr)
	if err != nil {
		t.Fatal(err)
	}
	wantEvents := []HealthEvent{
		{Gateway: "g", TargetHealth: TargetHealth{Upstream: "u", Target: "t:1", State: HealthDNSError}},
		{Gateway: "g", TargetHealth: TargetHealth{Upstream: "u", Target: "[::1]:80", IP: "::1", Port: "80", State: HealthMostlyHealthy}, Index: 6},
	}
	if !reflect.DeepEqual(got, wantEvents) {
		t.Fatalf("events %+v\nwant %+v", got, wantEvents)
	}
	wantRejected := []string{
		`event 1: "state" "green" is not one of healthy, unhealthy, dns_error, healthchecks_off, mostly_healthy, mostly_unhealthy, degraded, unknown`,
		`event 2: "gateway" is missing`,
		`event 3: "address" "10.0.0.1" is not "ip:port"`,
		`event 4: "timestamp" "yesterday" is not RFC 3339`,
		`event 5: "kind" "nginx" is not one of kong, apisix, envoy`,
	}
	if len(rejected) != len(wantRejected) {
		t.Fatalf("rejected %v", rejected)
	}
	for i, r := range rejected {
		if r.Error() != wantRejected[i] {
			t.Errorf("rejected[%d] = %q\nwant %q", i, r.Error(), wantRejected[i])
		}
	}

	for body, want := range map[string]string{
		`"healthy"`:             `health events (want an object or an array of objects): json: cannot unmarshal string into Go value of type []gateway.pushEvent (body starts "\"healthy\"")`,
		`{"gateway":"g","x":1}`: `health event: json: unknown field "x" (body starts "{\"gateway\":\"g\",\"x\":1}")`,
		`[{"gateway":"g"}] []`:  `health events (want an object or an array of objects): trailing data after the JSON value (body starts "[{\"gateway\":\"g\"}] []")`,
	} {
		if _, _, err := DecodeHealthEvents(nil, []byte(body)); err == nil || err.Error() != want {
			t.Errorf("%s: error = %v\nwant %s", body, err, want)
		}
	}
}

func TestHealthStateNames(t *testing.T) {
	for s := HealthState(0); s < NumHealthStates; s++ {
		got, ok := ParseHealthState(s.String())
		if !ok || got != s {
			t.Errorf("ParseHealthState(%q) = %v, %v", s.String(), got, ok)
		}
	}
	if s, ok := ParseHealthState("HEALTHCHECKS_OFF"); !ok || s != HealthChecksOff {
		t.Errorf("HEALTHCHECKS_OFF = %v %v", s, ok)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseHealthState("MOSTLY_UNHEALTHY") }); n != 0 {
		t.Errorf("ParseHealthState allocates %v", n)
	}
}

// An address entry with a port but no IP is no address (found by
// FuzzDecodeKongHealth): no row carries a port without a host.
func TestDecodeAddressWithoutIP(t *testing.T) {
	got, _, err := DecodeKongHealth(nil, "u", []byte(`{"data":[{"target":"a:80","health":"HEALTHY","data":{"addresses":[{"port":80,"health":"HEALTHY"}]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	checkObs(t, got, []TargetHealth{{Upstream: "u", Target: "a:80", State: HealthHealthy}})
	got, err = DecodeAPISIXHealth(nil, []byte(`[{"name":"/routes/1","nodes":[{"port":1980,"hostname":"b.svc","status":"healthy"}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	checkObs(t, got, []TargetHealth{{Upstream: "/routes/1", Target: "b.svc:1980", State: HealthHealthy}})
	_, rejected, err := DecodeHealthEvents(nil, []byte(`{"gateway":"g","upstream":"u","target":"t","address":"[]:80","state":"healthy"}`))
	if err != nil || len(rejected) != 1 || rejected[0].Error() != `event 0: "address" "[]:80" is not "ip:port"` {
		t.Fatalf("rejected %v, err %v", rejected, err)
	}
}

// HealthEventCount counts a push's events without decoding it, as many as
// DecodeHealthEvents reads (accepted or rejected) for every valid body.
func TestHealthEventCount(t *testing.T) {
	for body, want := range map[string]int{
		`[]`: 0, ` [ ] `: 0, `{}`: 1, `{"a":[1,2]}`: 1, `[{}]`: 1, `[{},{}]`: 2, "[\n{},\n{}\n]": 2,
		`[{"a":[1,2],"b":{"c":3,"d":4}},{"e":"x,y]"},{"f":"\",["}]`: 3, `[1,"a",null]`: 3,
	} {
		if got := HealthEventCount([]byte(body)); got != want {
			t.Errorf("%s: %d events, want %d", body, got, want)
		}
		if strings.HasPrefix(strings.TrimSpace(body), "[") {
			var raw []json.RawMessage
			if err := json.Unmarshal([]byte(body), &raw); err != nil || len(raw) != want {
				t.Errorf("%s: encoding/json reads %d elements (%v)", body, len(raw), err)
			}
		}
	}
}
