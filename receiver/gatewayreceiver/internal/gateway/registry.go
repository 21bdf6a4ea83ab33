package gateway

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Gateway is one gateway's home: everything the receiver knows about it.
// Each gateway fills one in its own file (kong.go, apisix.go, envoy.go,
// semconv.go, traefik.go) and is listed once in builtin; the config's
// `detect` values, the health section's poller lists, the push endpoint's
// `kind` values and the log ingest paths are all derived from the registry.
//
// Adding a gateway: write its home (<name>.go, plus <name>_*.go for its log
// and health decoders), add one line to builtin, and document its facts in
// docs/gateways.md. Nothing else names gateways.
type Gateway struct {
	// Name is the gateway's config name: a `detect` value, a poller list
	// key under `health`, a pushed event's `kind`, and the service.name of
	// its health series.
	Name string
	// Scope is the instrumentation scope name of its spans; "" when no
	// scope identifies it.
	Scope string
	// Resource is the resource service.name that identifies its spans when
	// the scope does not (APISIX's default resource); "" for none.
	Resource string
	// Detect reports whether a root SERVER span's attributes are this
	// gateway's, for spans whose scope and resource say nothing (Envoy's
	// scope is empty); nil never claims a span.
	Detect func(a attrs) bool
	// MapRoot fills the gateway's own fields of e from its root SERVER span,
	// after the semantic-convention fields are read; nil for none.
	MapRoot func(e *Event, a attrs)
	// MapChild applies one direct CLIENT child span of a root (Kong's
	// balancer tries, Envoy's router span). order is per-event scratch,
	// starting at -1, for a mapper that must pick one child among several
	// (Kong keeps the highest try). nil when children add nothing.
	MapChild func(e *Event, s *spanRec, a attrs, order *float64)
	// Internal names the INTERNAL spans MapInternal applies: spans of a
	// root's request at any depth below it, reached through INTERNAL spans
	// only (Traefik's Router span, which its entry point's middleware spans
	// may hold). Only spans of this name are walked up to their root.
	Internal string
	// MapInternal applies one such span; depth is its distance from the
	// root (1: a direct child), order as for MapChild (Traefik keeps the
	// deepest router). nil when INTERNAL spans add nothing.
	MapInternal func(e *Event, s *spanRec, a attrs, depth int, order *float64)
	// Log is the gateway's access-log ingest path; nil for none.
	Log *LogSpec
	// HealthStates are the states its upstream targets can be in, in the
	// order a one-hot gauge enumerates them, unknown last; nil for a
	// gateway without upstream health.
	HealthStates []HealthState
	// Poller polls its admin API for upstream health; nil for none.
	Poller *PollerSpec
	// Metrics maps the OTLP metrics the gateway pushes itself to its
	// Prometheus names (metrics.go); nil for none.
	Metrics *MetricsSpec

	kind Kind
}

// LogSpec is one access-log ingest path: POSTed batches of entries.
type LogSpec struct {
	// Path is the URL path on the receiver's HTTP server.
	Path string
	// Format names the format in telemetry (`format` attribute) and errors.
	Format string
	// MediaTypes are the Content-Types the gateway sends.
	MediaTypes []string
	// Decode hands every valid entry of body to fn, reports the first
	// MaxEntryErrors invalid ones in entryErrs (entries less the entries
	// handed to fn is how many there were) and fails only when the body as
	// a whole is unreadable.
	Decode func(body []byte, fn func(*Event)) (entries int, entryErrs []EntryError, err error)
}

// PollerSpec is how a gateway's admin API is polled.
type PollerSpec struct {
	// Poll runs one poll (see PollSession).
	Poll func(ctx context.Context, s PollSession) (complete bool, err error)
	// MaxConcurrency is the default bound on requests in flight.
	MaxConcurrency int
	// Interval is the default interval between polls (0: the health
	// part's default); a poll's requests are spread over it.
	Interval time.Duration
	// Paged: the admin API pages its lists (`page_size` applies), and
	// accepts an admin token (`admin_token`, sent as Kong-Admin-Token).
	Paged bool
	// MaxResponseBodySize is the default bound on one answer's body, in
	// bytes, sized from the largest answer the admin API gives at the
	// seeds' scale (docs/gateways.md); 0: the health part's default.
	MaxResponseBodySize int64
}

// PollSession is what a poller uses during one poll; the receiver's health
// part implements it. Apply and Keep may be called from several goroutines.
type PollSession interface {
	// Get fetches ref (a path with query, relative to the admin endpoint)
	// and returns the body of a 200 answer. Any other status is a
	// *StatusError; a reference that does not parse wraps ErrMalformed.
	Get(ctx context.Context, ref string) ([]byte, error)
	// InShard reports whether this collector keeps the upstream.
	InShard(upstream string) bool
	// Apply records observations the poll made now.
	Apply(obs []TargetHealth)
	// Keep keeps the rows of an upstream that could not be fetched, so a
	// complete poll does not sweep them; they are not confirmed.
	Keep(upstream string)
	// Fatal reports whether err says the admin API as a whole is
	// unreachable (abandon the rest of the poll).
	Fatal(err error) bool
	// Expect says the poll is about to make n more requests: the receiver
	// spreads them over what is left of the poll's interval (Get waits for
	// each one's turn).
	Expect(n int)
	// MaxConcurrency and PageSize are the poller's settings.
	MaxConcurrency() int
	PageSize() int
}

// ErrPaginationLoop is a paged walk that came back to a page it fetched.
var ErrPaginationLoop = errors.New("pagination loop")

// StatusError is an admin API answer with a status other than 200.
type StatusError struct {
	Code int
	URL  string
	Body []byte
}

func (e *StatusError) Error() string {
	b := e.Body
	if len(b) > 64 {
		b = b[:64]
	}
	return "GET " + e.URL + ": status " + strconv.Itoa(e.Code) + ", body starts " + strconv.Quote(string(b))
}

// IsNotFound reports an HTTP 404 answer.
func IsNotFound(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusNotFound
}

// Kind is a gateway's position in the registry; it decides which mapper
// reads an event. KindAuto is only an input (detect it), never an event's
// kind.
type Kind uint8

// The built-in kinds, in builtin's order (TestRegistryOrder holds them to it).
const (
	KindAuto Kind = iota
	KindKong
	KindAPISIX
	KindEnvoy
	KindSemconv
	KindTraefik
)

// builtin lists the gateways in Kind order, one line each. The order is
// also the order of every list derived from it (validation messages).
var builtin = []*Gateway{
	KindKong:    &kongGateway,
	KindAPISIX:  &apisixGateway,
	KindEnvoy:   &envoyGateway,
	KindSemconv: &semconvGateway,
	KindTraefik: &traefikGateway,
}

// registry is builtin plus what Register added (tests only); index = Kind.
var registry = func() []*Gateway {
	r := append([]*Gateway(nil), builtin...)
	for k, g := range r {
		if g != nil {
			g.kind = Kind(k)
		}
	}
	return r
}()

// Register adds a gateway after the built-in ones and returns its Kind. It
// is for tests (a test-only gateway proves a new home needs nothing else);
// call it before any receiver is configured, never concurrently with use.
func Register(g *Gateway) Kind {
	g.kind = Kind(len(registry))
	registry = append(registry, g)
	return g.kind
}

// Unregister removes the last registered gateway (test cleanup).
func Unregister(k Kind) {
	if int(k) == len(registry)-1 && int(k) >= len(builtin) {
		registry = registry[:k]
	}
}

// Gateways lists the registered gateways in Kind order.
func Gateways() []*Gateway { return registry[1:] }

// Lookup finds a gateway by config name (exact).
func Lookup(name string) (*Gateway, bool) {
	for _, g := range registry[1:] {
		if g.Name == name {
			return g, true
		}
	}
	return nil, false
}

// Kind is the gateway's kind.
func (g *Gateway) Kind() Kind { return g.kind }

// String returns the kind's config name ("auto" for KindAuto).
func (k Kind) String() string {
	switch {
	case k == KindAuto:
		return "auto"
	case int(k) < len(registry):
		return registry[k].Name
	}
	return "unknown"
}

// ParseKind reads a `detect` value: "auto" or a gateway's name.
func ParseKind(s string) (Kind, bool) {
	if s == "auto" {
		return KindAuto, true
	}
	if g, ok := Lookup(s); ok {
		return g.kind, true
	}
	return KindAuto, false
}

// DetectNames lists the `detect` values: auto, then every gateway.
func DetectNames() []string {
	names := []string{"auto"}
	for _, g := range registry[1:] {
		names = append(names, g.Name)
	}
	return names
}

// names lists the gateways for which has holds.
func names(has func(*Gateway) bool) []string {
	var out []string
	for _, g := range registry[1:] {
		if has(g) {
			out = append(out, g.Name)
		}
	}
	return out
}

// PollerNames lists the gateways with an admin API poller (the keys of the
// health section's poller lists).
func PollerNames() []string { return names(func(g *Gateway) bool { return g.Poller != nil }) }

// PagedPollerNames lists the gateways whose admin APIs page their lists
// (their pollers take page_size and admin_token).
func PagedPollerNames() []string {
	return names(func(g *Gateway) bool { return g.Poller != nil && g.Poller.Paged })
}

// HealthNames lists the gateways with upstream health (a pushed event's
// `kind`).
func HealthNames() []string { return names(func(g *Gateway) bool { return g.HealthStates != nil }) }

// Logs lists the access-log ingest paths.
func Logs() []*LogSpec {
	var out []*LogSpec
	for _, g := range registry[1:] {
		if g.Log != nil {
			out = append(out, g.Log)
		}
	}
	return out
}

// OneOf words a list for a validation message: "a, b, c".
func OneOf(names []string) string { return strings.Join(names, ", ") }

// find returns the kind of the first gateway for which is holds; KindAuto
// when none does.
func find(is func(*Gateway) bool) Kind {
	for _, g := range registry[1:] {
		if is(g) {
			return g.kind
		}
	}
	return KindAuto
}

// detectScope tells the gateway from the instrumentation scope; KindAuto
// when no gateway's scope matches.
func detectScope(scope string) Kind {
	if scope == "" {
		return KindAuto
	}
	return find(func(g *Gateway) bool { return g.Scope == scope })
}

// detectResource tells the gateway from a resource service.name that only
// it uses by default; KindAuto when none does.
func detectResource(serviceName string) Kind {
	if serviceName == "" {
		return KindAuto
	}
	return find(func(g *Gateway) bool { return g.Resource == serviceName })
}

// detectSpan asks every gateway's Detect about a root span; the semantic
// conventions when none claims it.
func detectSpan(a attrs) Kind {
	if k := find(func(g *Gateway) bool { return g.Detect != nil && g.Detect(a) }); k != KindAuto {
		return k
	}
	return KindSemconv
}

// gatewayOf returns the registered gateway of k (nil for KindAuto or an
// unknown kind).
func gatewayOf(k Kind) *Gateway {
	if k == KindAuto || int(k) >= len(registry) {
		return nil
	}
	return registry[k]
}
