package health

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Credentials never leave their origin (issue 24, item 1): a poller sends
// its configured credentials (admin_token, confighttp `headers`, an `auth`
// extension, cookies) to the scheme, host and port of its endpoint only.
//
// Go's http.Client forwards custom headers such as Kong-Admin-Token on a
// redirect to any host (it strips only Authorization, Cookie and
// WWW-Authenticate across domains), and confighttp's `headers` and `auth`
// round trippers add theirs to every request the client sends, redirected
// ones included. So the origin is held in two places:
//   - CheckRedirect refuses a redirect to another origin with an error the
//     poll is counted under (foreign_origin); redirects within the origin
//     are followed (at most maxRedirects);
//   - the client's outermost RoundTripper refuses any request to another
//     origin before confighttp's round trippers add a header, whatever
//     path led to it: nothing reaches a foreign origin even if a later
//     change lets such a request through.
//
// Refusing was chosen over following without credentials: an admin API that
// sends its client elsewhere is misconfigured or hostile, and an answer from
// another origin is not the configured gateway's state.

// maxRedirects is how many redirects within the origin one request follows
// (http.Client's own default).
const maxRedirects = 10

// origin is a URL's scheme, host and port, the unit credentials are bound to
// (RFC 6454): the host compared without case, the port made explicit.
type origin struct {
	scheme, host, port string
}

func originOf(u *url.URL) origin {
	o := origin{scheme: strings.ToLower(u.Scheme), host: strings.ToLower(u.Hostname()), port: u.Port()}
	if o.port == "" {
		switch o.scheme {
		case "http":
			o.port = "80"
		case "https":
			o.port = "443"
		}
	}
	return o
}

func (o origin) String() string {
	host := o.host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return o.scheme + "://" + host + ":" + o.port
}

// errForeignOrigin marks a request refused because it would leave the
// poller's origin.
var errForeignOrigin = errors.New("refused: it leaves the admin endpoint's origin, and credentials are sent to that origin only")

// foreignOrigin is the pollError of a request refused for leaving the
// poller's origin; what says which request (a redirect, a next page).
func foreignOrigin(what string, u *url.URL, own origin) *pollError {
	return &pollError{outcomeForeignOrigin, &originError{what: what, url: u.Redacted(), own: own}}
}

type originError struct {
	what string
	url  string
	own  origin
}

func (e *originError) Error() string {
	return e.what + " " + strconv.Quote(e.url) + " is on another origin than the endpoint's (" + e.own.String() + "): " + errForeignOrigin.Error()
}

func (e *originError) Unwrap() error { return errForeignOrigin }

// checkRedirect is the poller client's CheckRedirect: follow a redirect
// within the origin, refuse one that leaves it.
func (o origin) checkRedirect(req *http.Request, via []*http.Request) error {
	if originOf(req.URL) != o {
		return foreignOrigin("redirect to", req.URL, o)
	}
	if len(via) >= maxRedirects {
		return &pollError{outcomeHTTPStatus, errors.New("stopped after " + strconv.Itoa(maxRedirects) + " redirects")}
	}
	return nil
}

// originGuard is the poller client's outermost RoundTripper: a request to
// another origin is refused before any inner round tripper (confighttp's
// headers, auth, compression) sees it.
type originGuard struct {
	own  origin
	next http.RoundTripper
}

func (g *originGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if originOf(req.URL) != g.own {
		if req.Body != nil {
			_ = req.Body.Close() // RoundTrip must close the body, even on error
		}
		return nil, foreignOrigin("request to", req.URL, g.own)
	}
	return g.next.RoundTrip(req)
}

// guardOrigin makes client send requests to own only (see above).
func guardOrigin(client *http.Client, own origin) {
	client.CheckRedirect = own.checkRedirect
	next := client.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	client.Transport = &originGuard{own: own, next: next}
}

// CloseIdleConnections reaches the wrapped transport (http.Client calls it
// on its Transport when that has it).
func (g *originGuard) CloseIdleConnections() {
	if c, ok := g.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
