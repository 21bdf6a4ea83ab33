package gateway

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// A fifth gateway, registered from this test only: its whole home is this
// file. Registering it must make every derived list and every input path
// know it (detection by scope and by span, span mapping with its own
// attributes through pdata and protobuf, its access log, its health states
// and its poller) without any other file naming it.

var akAcmeRoute = registerAttr("acme.route.name")

var acmeGateway = Gateway{
	Name:     "acme",
	Scope:    "acme-gateway",
	Resource: "ACME",
	Detect: func(a attrs) bool {
		_, ok := a.get(akAcmeRoute)
		return ok
	},
	MapRoot: func(e *Event, a attrs) {
		e.RouteName = a.str(akAcmeRoute)
		e.Source = SourceUpstream
	},
	Log:          &LogSpec{Path: "/acme/log", Format: "acme_log", MediaTypes: []string{"application/json"}, Decode: decodeAcmeLog},
	HealthStates: []HealthState{HealthHealthy, HealthUnhealthy, HealthUnknown},
	Poller:       &PollerSpec{Poll: pollAcme, MaxConcurrency: 2},
}

// acmeEntry is one access-log entry: {"route": "...", "status": 200}.
type acmeEntry struct {
	Route  string  `json:"route"`
	Status *Number `json:"status"`
}

func (a *acmeEntry) reset() { *a = acmeEntry{} }

func (a *acmeEntry) event(e *Event) error {
	if err := startEntry(e, acmeGateway.Kind(), a.Status, "GET"); err != nil {
		return err
	}
	e.RouteName = a.Route
	return nil
}

func decodeAcmeLog(body []byte, fn func(*Event)) (int, []EntryError, error) {
	return decodeLog[acmeEntry](body, false, fn)
}

// pollAcme reads {"targets":[{"upstream","target","ip","port","up"}]}.
func pollAcme(ctx context.Context, s PollSession) (bool, error) {
	return pollDocument(ctx, s, "/acme/health", func(dst []TargetHealth, body []byte) ([]TargetHealth, error) {
		var doc struct {
			Targets []struct {
				Upstream, Target, IP, Port string
				Up                         bool
			}
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			return dst, malformed("acme health", body, err)
		}
		for _, t := range doc.Targets {
			st := HealthUnhealthy
			if t.Up {
				st = HealthHealthy
			}
			dst = append(dst, TargetHealth{Upstream: t.Upstream, Target: t.Target, IP: t.IP, Port: t.Port, State: st})
		}
		return dst, nil
	})
}

// fakeSession is a PollSession over canned documents.
type fakeSession struct {
	docs    map[string]string
	applied []TargetHealth
}

func (f *fakeSession) Get(_ context.Context, ref string) ([]byte, error) {
	if d, ok := f.docs[ref]; ok {
		return []byte(d), nil
	}
	return nil, &StatusError{Code: 404, URL: ref}
}
func (f *fakeSession) InShard(string) bool      { return true }
func (f *fakeSession) Apply(obs []TargetHealth) { f.applied = append(f.applied, obs...) }
func (f *fakeSession) Keep(string)              {}
func (f *fakeSession) Fatal(error) bool         { return false }
func (f *fakeSession) Expect(int)               {}
func (f *fakeSession) MaxConcurrency() int      { return 1 }
func (f *fakeSession) PageSize() int            { return 100 }

func TestFifthGatewayNeedsOnlyItsHome(t *testing.T) {
	kind := Register(&acmeGateway)
	t.Cleanup(func() { Unregister(kind) })

	// Every list the receiver derives names it.
	if k, ok := ParseKind("acme"); !ok || k != kind || kind.String() != "acme" {
		t.Fatalf("ParseKind(acme) = %v, %v", k, ok)
	}
	for name, list := range map[string][]string{"detect": DetectNames(), "pollers": PollerNames(), "health": HealthNames()} {
		if !slices.Contains(list, "acme") {
			t.Errorf("%s names %v, without acme", name, list)
		}
	}
	if k, ok := ParseHealthKind("ACME"); !ok || k != kind || !slices.Equal(k.HealthStates(), acmeGateway.HealthStates) || k.HealthName() != "acme" {
		t.Errorf("pushed kind ACME = %v, %v", k, ok)
	}
	if logs := Logs(); logs[len(logs)-1].Path != "/acme/log" {
		t.Errorf("log paths end with %q", logs[len(logs)-1].Path)
	}

	// Spans: detected by scope, by resource, and by its attribute alone;
	// mapped with the attribute it registered, through pdata and protobuf.
	root := spanSpec{name: "GET /pets", kind: ptrace.SpanKindServer, id: 1, end: 40, attrs: map[string]any{
		"acme.route.name": "pets", "http.request.method": "GET", "http.response.status_code": int64(201)}}
	for _, c := range []struct {
		name  string
		res   map[string]any
		scope string
	}{{"scope", map[string]any{"service.name": "edge"}, "acme-gateway"}, {"resource", map[string]any{"service.name": "ACME"}, ""},
		{"span attribute", map[string]any{"service.name": "edge"}, ""}} {
		got := countAll(t, traceOf(c.res, c.scope, root))
		if len(got) != 1 || got[0].Kind != kind || got[0].RouteName != "pets" || got[0].StatusCode != 201 ||
			got[0].Method != "GET" || got[0].Source != SourceUpstream || got[0].TotalMS != 40 {
			t.Errorf("detected by %s: %+v", c.name, got)
		}
	}

	// Its access log.
	var logged []Event
	n, bad, err := acmeGateway.Log.Decode([]byte(`[{"route":"pets","status":200},{"route":"x"}]`), func(e *Event) { logged = append(logged, *e) })
	if err != nil || n != 2 || len(bad) != 1 || len(logged) != 1 || logged[0].Kind != kind || logged[0].RouteName != "pets" {
		t.Errorf("log: n %d, bad %v, err %v, events %+v", n, bad, err, logged)
	}

	// Its poller, through the session the health part gives it.
	s := &fakeSession{docs: map[string]string{"/acme/health": `{"targets":[{"upstream":"u","target":"t:80","ip":"10.0.0.1","port":"80","up":true}]}`}}
	complete, err := acmeGateway.Poller.Poll(context.Background(), s)
	want := []TargetHealth{{Upstream: "u", Target: "t:80", IP: "10.0.0.1", Port: "80", State: HealthHealthy}}
	if !complete || err != nil || !slices.Equal(s.applied, want) {
		t.Errorf("poll: complete %v, err %v, applied %+v", complete, err, s.applied)
	}
}

// The built-in kinds are the registry's positions.
func TestRegistryOrder(t *testing.T) {
	for k, name := range map[Kind]string{KindKong: "kong", KindAPISIX: "apisix", KindEnvoy: "envoy", KindSemconv: "semconv", KindTraefik: "traefik"} {
		if g := gatewayOf(k); g == nil || g.Name != name || g.Kind() != k {
			t.Errorf("kind %d is %+v, want %s", k, g, name)
		}
	}
	if got := DetectNames(); !slices.Equal(got, []string{"auto", "kong", "apisix", "envoy", "semconv", "traefik"}) {
		t.Errorf("detect values %v", got)
	}
}
