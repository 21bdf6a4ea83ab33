package gateway

// Traefik's home: span detection and mapping (docs/gateways.md §7). Traefik
// has no access-log ingest path and no upstream health here.

// Traefik's scope, span name and span attributes (§7a).
const (
	traefikScope       = "github.com/traefik/traefik"
	traefikRouterSpan  = "Router"
	traefikRouterName  = "traefik.router.name"
	traefikServiceName = "traefik.service.name"
)

var traefikGateway = Gateway{
	Name:        "traefik",
	Scope:       traefikScope,
	Internal:    traefikRouterSpan,
	MapInternal: traefikRouter,
}

// traefikRouter applies Traefik's `Router` span (§7a), sent at the
// `detailed` trace verbosity only: the SERVER span of the entry point names
// no route, the Router span below it names the router, its service and its
// rule (as http.route). The router name is the route (§7b): it is what
// Traefik's own metrics label `router`, and it stays when the rule is
// edited. With child routers (a router whose target is other routers) each
// level sends a Router span, the deeper below the one before; the deepest
// is the router that chose the service, so it wins (order holds the depth
// applied).
func traefikRouter(e *Event, _ *spanRec, a attrs, depth int, order *float64) {
	name := a.str(akTraefikRouter)
	if name == "" || float64(depth) <= *order {
		return
	}
	*order = float64(depth)
	e.Route, e.RouteName = name, name
	e.ServiceName = a.str(akTraefikService)
}
