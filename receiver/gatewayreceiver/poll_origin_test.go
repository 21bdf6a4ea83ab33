package gatewayreceiver

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configauth"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelgateway/otelgateway/internal/testutil"
)

// Credentials never leave their origin (issue 24, item 1): a poller's
// admin_token, confighttp `headers` and `auth` extension reach the
// configured scheme, host and port only. A redirect or a `next` page on
// another origin is refused (foreign_origin), the rows keep their state,
// and the other origin sees no request at all.

// credentialHeaders are the headers the pollers below are configured to
// send: Kong's admin token, two confighttp `headers`, and the one the auth
// extension adds.
var credentialHeaders = []string{"Kong-Admin-Token", "X-Api-Key", "Authorization", "X-Ext-Auth"}

// foreignOrigin is a second listener that records every request it gets.
type foreignOrigin struct {
	srv      *httptest.Server
	requests atomic.Int64
	mu       sync.Mutex
	leaked   []string // "header: value" of every credential seen
}

func startForeign(t *testing.T) *foreignOrigin {
	t.Helper()
	f := &foreignOrigin{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		f.mu.Lock()
		for _, h := range credentialHeaders {
			if v := r.Header.Get(h); v != "" {
				f.leaked = append(f.leaked, h+": "+v)
			}
		}
		f.mu.Unlock()
		// Answer as the admin API would, so a followed redirect succeeds.
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"data":[],"next":null}`))
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *foreignOrigin) reset() {
	f.requests.Store(0)
	f.mu.Lock()
	f.leaked = nil
	f.mu.Unlock()
}

// check fails the test when the foreign origin got any request.
func (f *foreignOrigin) check(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.leaked) > 0 {
		t.Errorf("the foreign origin received credentials: %s", strings.Join(f.leaked, "; "))
	}
	if n := f.requests.Load(); n != 0 {
		t.Errorf("the foreign origin received %d requests, want none (redirects and next pages to it are refused)", n)
	}
}

// extAuth is an auth extension (extensionauth.HTTPClient) whose round
// tripper adds X-Ext-Auth to every request it sends.
type extAuth struct{}

func (extAuth) Start(context.Context, component.Host) error { return nil }
func (extAuth) Shutdown(context.Context) error              { return nil }
func (extAuth) RoundTripper(base http.RoundTripper) (http.RoundTripper, error) {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("X-Ext-Auth", "ext-secret")
		return base.RoundTrip(r)
	}), nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

var extAuthID = component.MustNewID("extauth")

// withCredentials configures every kind of credential on a poller.
func withCredentials(p *PollerConfig) {
	p.Headers = configopaque.MapList{
		{Name: "X-Api-Key", Value: "key-secret"},
		{Name: "Authorization", Value: "Bearer bearer-secret"},
	}
	p.Auth = configoptional.Some(configauth.Config{AuthenticatorID: extAuthID})
}

// hostileAdmin wraps an admin API: rewrite, when set, may answer a
// request itself (a redirect) or change the inner answer's body (a
// foreign next link).
type hostileAdmin struct {
	inner   http.Handler
	mu      sync.Mutex
	rewrite func(w http.ResponseWriter, r *http.Request, body []byte) bool
	// sawCredentials counts requests that carried every credential.
	sawCredentials atomic.Int64
}

func (h *hostileAdmin) set(f func(w http.ResponseWriter, r *http.Request, body []byte) bool) {
	h.mu.Lock()
	h.rewrite = f
	h.mu.Unlock()
}

func (h *hostileAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	all := true
	for _, name := range credentialHeaders {
		if r.Header.Get(name) == "" && (name != "Kong-Admin-Token" || strings.HasPrefix(r.URL.Path, "/upstreams")) {
			all = false
		}
	}
	if all {
		h.sawCredentials.Add(1)
	}
	h.mu.Lock()
	rewrite := h.rewrite
	h.mu.Unlock()
	rec := httptest.NewRecorder()
	h.inner.ServeHTTP(rec, r)
	if rewrite != nil && rewrite(w, r, rec.Body.Bytes()) {
		return
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func redirect(code int, when func(*http.Request) bool, to func(*http.Request) string) func(http.ResponseWriter, *http.Request, []byte) bool {
	return func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if !when(r) {
			return false
		}
		w.Header().Set("Location", to(r))
		w.WriteHeader(code)
		return true
	}
}

// replaceNext serves the inner answer with its `next` path prefixed by
// prefix (a foreign origin, "//host:port", …) on the requests when accepts.
func replaceNext(when func(*http.Request) bool, prefix string) func(http.ResponseWriter, *http.Request, []byte) bool {
	return func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if !when(r) || !bytes.Contains(body, []byte(`"next":"/`)) {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(bytes.Replace(body, []byte(`"next":"/`), []byte(`"next":"`+prefix+`/`), 1))
		return true
	}
}

func pathIs(p string) func(*http.Request) bool {
	return func(r *http.Request) bool { return r.URL.Path == p }
}

func TestKongCredentialsStayOnTheirOrigin(t *testing.T) {
	foreign := startForeign(t)
	foreignHost := strings.TrimPrefix(foreign.srv.URL, "http://")
	firstListPage := func(r *http.Request) bool { return r.URL.Path == "/upstreams" && r.URL.Query().Get("offset") == "" }
	billingHealth := pathIs("/upstreams/id-billing/health")
	cases := []struct {
		name    string
		rewrite func(admin string) func(http.ResponseWriter, *http.Request, []byte) bool
	}{
		{"302 on the upstream list", func(string) func(http.ResponseWriter, *http.Request, []byte) bool {
			return redirect(http.StatusFound, pathIs("/upstreams"), func(r *http.Request) string { return foreign.srv.URL + r.URL.RequestURI() })
		}},
		{"307 on one upstream's health", func(string) func(http.ResponseWriter, *http.Request, []byte) bool {
			return redirect(http.StatusTemporaryRedirect, billingHealth, func(r *http.Request) string { return foreign.srv.URL + r.URL.RequestURI() })
		}},
		{"same-origin redirect, then one to another origin", func(string) func(http.ResponseWriter, *http.Request, []byte) bool {
			return redirect(http.StatusFound, pathIs("/upstreams"), func(r *http.Request) string {
				if r.URL.Query().Get("hop") == "" {
					return r.URL.RequestURI() + "&hop=1" // relative: same origin, followed
				}
				return "//" + foreignHost + r.URL.RequestURI()
			})
		}},
		{"absolute next on the upstream list", func(string) func(http.ResponseWriter, *http.Request, []byte) bool {
			return replaceNext(firstListPage, foreign.srv.URL)
		}},
		{"scheme-relative next on the upstream list", func(string) func(http.ResponseWriter, *http.Request, []byte) bool {
			return replaceNext(firstListPage, "//"+foreignHost)
		}},
		{"next on the same host and port over another scheme", func(admin string) func(http.ResponseWriter, *http.Request, []byte) bool {
			return replaceNext(firstListPage, "https://"+strings.TrimPrefix(admin, "http://"))
		}},
		{"absolute next on one upstream's health", func(string) func(http.ResponseWriter, *http.Request, []byte) bool {
			return replaceNext(billingHealth, foreign.srv.URL)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			foreign.reset()
			f := smallKong()
			f.Token = "token-secret"
			admin := &hostileAdmin{inner: f}
			srv := httptest.NewServer(admin)
			t.Cleanup(srv.Close)
			hh := newHealthHarnessOn(t, testutil.ExtHost{extAuthID: extAuth{}}, func(hc *HealthConfig) {
				hc.Profile = ProfileKong
				hc.Pollers = pollersOf("kong", kongPoller(srv.URL, func(p *PollerConfig) {
					p.AdminToken = "token-secret"
					withCredentials(p)
				}))
			})
			hh.pollAndEmit(0)
			want := smallKongWant()
			checkSeries(t, seriesState(hh.sink.AllMetrics()), want)
			if n := admin.sawCredentials.Load(); n != f.Requests() {
				t.Fatalf("the admin API saw every credential on %d of %d requests", n, f.Requests())
			}

			admin.set(c.rewrite(srv.URL))
			for range 2 {
				hh.pollAndEmit(0)
			}
			foreign.check(t)
			checkSeries(t, seriesState(hh.sink.AllMetrics()), want) // rows kept, nothing flipped or swept
			if n := testutil.Int64Sum(t, hh.tel, "otelcol_receiver_gateway_health_polls", attribute.String("outcome", "foreign_origin")); n != 2 {
				t.Errorf("polls{outcome=foreign_origin} = %d, want 2", n)
			}
			warns := hh.logs.FilterMessage("Health poll failed; logged again only when the outcome changes").All()
			if len(warns) != 1 || !strings.Contains(warns[0].ContextMap()["error"].(string), "is on another origin than the endpoint's ("+originString(srv.URL)+")") {
				t.Errorf("warnings %v, want one naming the other origin", warns)
			}
		})
	}
}

// originString is how the poller names an http endpoint's origin.
func originString(endpoint string) string {
	u, _ := url.Parse(endpoint)
	return "http://" + u.Hostname() + ":" + u.Port()
}

// A redirect within the origin is followed, credentials included.
func TestKongSameOriginRedirectIsFollowed(t *testing.T) {
	f := smallKong()
	f.Token = "token-secret"
	admin := &hostileAdmin{inner: f}
	admin.set(redirect(http.StatusTemporaryRedirect, func(r *http.Request) bool {
		return r.URL.Path == "/upstreams" && r.URL.Query().Get("moved") == ""
	}, func(r *http.Request) string { return r.URL.RequestURI() + "&moved=1" }))
	srv := httptest.NewServer(admin)
	t.Cleanup(srv.Close)
	hh := newHealthHarnessOn(t, testutil.ExtHost{extAuthID: extAuth{}}, func(hc *HealthConfig) {
		hc.Profile = ProfileKong
		hc.Pollers = pollersOf("kong", kongPoller(srv.URL, func(p *PollerConfig) {
			p.AdminToken = "token-secret"
			withCredentials(p)
		}))
	})
	hh.pollAndEmit(0)
	checkSeries(t, seriesState(hh.sink.AllMetrics()), smallKongWant())
	if n := testutil.Int64Sum(t, hh.tel, "otelcol_receiver_gateway_health_polls", attribute.String("outcome", "success")); n != 1 {
		t.Errorf("successful polls = %d, want 1", n)
	}
	// 2 list pages, each redirected once, and 4 health pages.
	if n := admin.sawCredentials.Load(); n != 8 {
		t.Errorf("%d requests carried every credential, want 8", n)
	}
}

// APISIX and Envoy answer in one document: a redirect of it to another
// origin is refused, one within the origin followed.
func TestDocumentPollersCredentialsStayOnTheirOrigin(t *testing.T) {
	foreign := startForeign(t)
	for _, g := range []struct{ gateway, path, file string }{
		{"apisix", "/v1/healthcheck", "apisix_tutorial.json"},
		{"envoy", "/clusters?format=json", "envoy_clusters.json"},
	} {
		for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
			t.Run(g.gateway+"/"+http.StatusText(code), func(t *testing.T) {
				foreign.reset()
				fx, _ := startFixture(t, g.path, g.file)
				admin := &hostileAdmin{inner: fx}
				// Within the origin first: followed.
				admin.set(redirect(code, func(r *http.Request) bool { return !strings.HasPrefix(r.URL.Path, "/moved") },
					func(r *http.Request) string { return "/moved" + r.URL.RequestURI() }))
				fx.path = "/moved" + g.path
				srv := httptest.NewServer(admin)
				t.Cleanup(srv.Close)
				hh := newHealthHarnessOn(t, testutil.ExtHost{extAuthID: extAuth{}}, func(hc *HealthConfig) {
					hc.Pollers = pollersOf(g.gateway, simplePoller(srv.URL, "gw-1"))
					withCredentials(&hc.Pollers[g.gateway][0])
				})
				hh.pollAndEmit(0)
				want := seriesState(hh.sink.AllMetrics())
				if len(want) == 0 || testutil.Int64Sum(t, hh.tel, "otelcol_receiver_gateway_health_polls", attribute.String("outcome", "success")) != 1 {
					t.Fatalf("a redirect within the origin was not followed: %d series", len(want))
				}
				if n := admin.sawCredentials.Load(); n != 2 {
					t.Errorf("%d requests carried every credential, want 2 (the redirect followed with them)", n)
				}

				admin.set(redirect(code, func(*http.Request) bool { return true },
					func(r *http.Request) string { return foreign.srv.URL + r.URL.RequestURI() }))
				for range 2 {
					hh.pollAndEmit(0)
				}
				foreign.check(t)
				checkSeries(t, seriesState(hh.sink.AllMetrics()), want)
				if n := testutil.Int64Sum(t, hh.tel, "otelcol_receiver_gateway_health_polls", attribute.String("outcome", "foreign_origin")); n != 2 {
					t.Errorf("polls{outcome=foreign_origin} = %d, want 2", n)
				}
			})
		}
	}
}
