package gateway

// kongLog is the part of Kong's http-log payload (kong.log.serialize(),
// docs/gateways.md §1d) that metrics need, as the scanner reads it
// (jsonscan.go). Headers, query strings and timestamps are skipped without
// being decoded. Strings borrow the body (or the scanner's arena).
//
// It mirrors the struct encoding/json used to fill (kongEntry in
// logs_reference_test.go): every field of that struct is type-checked,
// even the ones no metric reads (route.id is read, consumer.custom_id only
// checked), so the same entries are refused.
type kongLog struct {
	reqMethod         string
	reqSize           Number
	status, respSize  Number
	hasStatus         bool
	route             kongRoute
	service           kongService
	consumer          kongConsumer
	latKong, latProxy Number
	latRequest        Number
	tries             int // length of the last tries array
	lastTry           kongTry
	source, workspace string
}

type kongRoute struct {
	set      bool
	id, name string
	path     string // paths[0]
	hasPath  bool
}

type kongService struct {
	set            bool
	id, name, host string
}

type kongConsumer struct {
	set                    bool
	id, username, customID string
}

type kongTry struct {
	ip, state string
	port      Number
}

func (k *kongLog) reset() {
	*k = kongLog{reqSize: Unknown, respSize: Unknown, latKong: Unknown, latProxy: Unknown, latRequest: Unknown}
}

// DecodeKongHTTPLog maps a Kong http-log body: one entry object
// (queue.max_batch_size = 1, the default) or an array of them. fn is called
// once per valid entry; the *Event is valid only during the call, and its
// strings only as long as body is. An entry that is not an object, or lacks
// a valid response.status, is reported in entryErrs and skipped; err is set
// only when the body as a whole is not JSON, in which case nothing was
// reported.
func DecodeKongHTTPLog(body []byte, fn func(*Event)) (entries int, entryErrs []EntryError, err error) {
	st := getLogState()
	defer putLogState(st)
	k := &st.kong
	return scanEntries(&st.d, body, false,
		func() { k.reset(); st.d.kongEntry(k) },
		func() error {
			if err := k.event(&st.d, &st.e); err != nil {
				return err
			}
			fn(&st.e)
			return nil
		})
}

// kongEntry reads one entry at d.pos into k.
func (d *scanner) kongEntry(k *kongLog) {
	if !d.object("") {
		return
	}
	var key jsonString
	for first := true; d.member(&first, &key); {
		switch {
		case key.is("request"):
			d.kongRequest(k)
		case key.is("response"):
			d.response(&k.status, &k.hasStatus, &k.respSize)
		case key.is("route"):
			d.kongRoute(&k.route)
		case key.is("service"):
			d.kongService(&k.service)
		case key.is("consumer"):
			d.kongConsumer(&k.consumer)
		case key.is("latencies"):
			d.kongLatencies(k)
		case key.is("tries"):
			d.kongTries(k)
		case key.is("source"):
			d.text(&k.source, "source")
		case key.is("workspace_name"):
			d.text(&k.workspace, "workspace_name")
		case key.is("ai"):
			d.kongAIObject()
		default:
			d.skipValue()
		}
	}
}

func (d *scanner) kongRequest(k *kongLog) {
	if !d.object("request") {
		return
	}
	var key jsonString
	for first := true; d.member(&first, &key); {
		switch {
		case key.is("method"):
			d.text(&k.reqMethod, "request.method")
		case key.is("size"):
			d.num(&k.reqSize)
		default:
			d.skipValue()
		}
	}
}

// response reads {status, size}, the same in Kong and APISIX.
func (d *scanner) response(status *Number, hasStatus *bool, size *Number) {
	if !d.object("response") {
		return
	}
	var key jsonString
	for first := true; d.member(&first, &key); {
		switch {
		case key.is("status"):
			d.numPtr(status, hasStatus)
		case key.is("size"):
			d.num(size)
		default:
			d.skipValue()
		}
	}
}

// pointer starts a pointer-to-struct field: null clears it (set = false,
// fields zeroed by clear); an object sets it, its fields merging with an
// earlier object's as encoding/json decodes into the same pointee.
func (d *scanner) pointer(path string, set *bool, clear func()) bool {
	if d.peek() == 'n' {
		d.literal("null")
		*set = false
		clear()
		return false
	}
	*set = true
	return d.object(path)
}

func (d *scanner) kongRoute(r *kongRoute) {
	if !d.pointer("route", &r.set, func() { *r = kongRoute{} }) {
		return
	}
	var key jsonString
	for first := true; d.member(&first, &key); {
		switch {
		case key.is("id"):
			d.text(&r.id, "route.id")
		case key.is("name"):
			d.text(&r.name, "route.name")
		case key.is("paths"):
			d.kongPaths(r)
		default:
			d.skipValue()
		}
	}
}

// kongPaths reads route.paths, keeping the first. A repeated paths key
// replaces the earlier array (see scanner on this deliberate difference).
func (d *scanner) kongPaths(r *kongRoute) {
	switch d.peek() {
	case 'n':
		d.literal("null")
		r.path, r.hasPath = "", false
		return
	case '[':
		d.pos++
	default:
		d.typeError("route.paths")
		return
	}
	r.path, r.hasPath = "", false
	for first := true; d.element(&first); {
		if !r.hasPath {
			r.hasPath = true
			d.text(&r.path, "route.paths")
			continue
		}
		var s string
		d.text(&s, "route.paths")
	}
}

func (d *scanner) kongService(s *kongService) {
	if !d.pointer("service", &s.set, func() { *s = kongService{} }) {
		return
	}
	var key jsonString
	for first := true; d.member(&first, &key); {
		switch {
		case key.is("id"):
			d.text(&s.id, "service.id")
		case key.is("name"):
			d.text(&s.name, "service.name")
		case key.is("host"):
			d.text(&s.host, "service.host")
		default:
			d.skipValue()
		}
	}
}

func (d *scanner) kongConsumer(c *kongConsumer) {
	if !d.pointer("consumer", &c.set, func() { *c = kongConsumer{} }) {
		return
	}
	var key jsonString
	for first := true; d.member(&first, &key); {
		switch {
		case key.is("id"):
			d.text(&c.id, "consumer.id")
		case key.is("username"):
			d.text(&c.username, "consumer.username")
		case key.is("custom_id"):
			d.text(&c.customID, "consumer.custom_id")
		default:
			d.skipValue()
		}
	}
}

func (d *scanner) kongLatencies(k *kongLog) {
	if !d.object("latencies") {
		return
	}
	var key jsonString
	for first := true; d.member(&first, &key); {
		switch {
		case key.is("kong"):
			d.num(&k.latKong)
		case key.is("proxy"):
			d.num(&k.latProxy)
		case key.is("request"):
			d.num(&k.latRequest)
		default:
			d.skipValue()
		}
	}
}

// kongTries reads the tries array, keeping its length and last element.
// Each element starts from zero values (port 0, not Unknown), as a fresh
// slice element does in encoding/json.
func (d *scanner) kongTries(k *kongLog) {
	switch d.peek() {
	case 'n':
		d.literal("null")
		k.tries, k.lastTry = 0, kongTry{}
		return
	case '[':
		d.pos++
	default:
		d.typeError("tries")
		return
	}
	k.tries, k.lastTry = 0, kongTry{}
	for first := true; d.element(&first); k.tries++ {
		k.lastTry = kongTry{}
		d.kongTry(&k.lastTry)
	}
}

func (d *scanner) kongTry(t *kongTry) {
	if !d.object("tries") {
		return
	}
	var key jsonString
	for first := true; d.member(&first, &key); {
		switch {
		case key.is("ip"):
			d.text(&t.ip, "tries.ip")
		case key.is("port"):
			d.num(&t.port)
		case key.is("state"):
			d.text(&t.state, "tries.state")
		default:
			d.skipValue()
		}
	}
}

// kongSourceOf is the source of a Kong 3.7 entry, which logs none
// (kong.log.serialize added `source` in 3.8), from what it does log:
// latencies.proxy is ctx.KONG_WAITING_TIME, set once Kong proxied (-1, read
// as Unknown, when it did not), and Kong's plugin labels a proxied response
// "service" (kong.response.get_source: KONG_PROXIED). A plugin exit or an
// error before proxying has no waiting time: "kong". The blind spot: Kong's
// own error after proxying began (a balancer failure, 502) reads as
// "service" where Kong's plugin, seeing KONG_UNEXPECTED, writes "kong".
func kongSourceOf(upstreamMS float64) Source {
	if upstreamMS >= 0 {
		return SourceUpstream
	}
	return SourceGateway
}

// event maps a decoded entry (§1d, and §1c for the label rules).
func (k *kongLog) event(d *scanner, e *Event) error {
	if err := startEntry(e, KindKong, k.statusPtr(), k.reqMethod); err != nil {
		return err
	}
	if r := &k.route; r.set {
		e.RouteID, e.RouteName, e.Route = r.id, r.name, r.path
	}
	if s := &k.service; s.set {
		e.ServiceID, e.ServiceName, e.ServiceHost = s.id, s.name, s.host
		e.Upstream = s.host
	}
	// consumer.username only, as Kong's plugin labels it (§1c): a consumer
	// without a username has consumer="".
	e.Consumer = k.consumer.username
	e.Workspace = k.workspace
	// source: "upstream" when the service answered; "kong" for errors and
	// plugin exits (kong/constants.lua RESPONSE_SOURCE).
	switch k.source {
	case "upstream", "service":
		e.Source = SourceUpstream
	case "":
	default:
		e.Source = SourceGateway
	}
	var p plausible
	e.TotalMS = p.ms("latencies.request", k.latRequest)
	e.UpstreamMS = p.ms("latencies.proxy", k.latProxy) // -1 (no upstream) reads as Unknown
	e.AddedMS = p.ms("latencies.kong", k.latKong)
	if k.source == "" {
		e.Source = kongSourceOf(e.UpstreamMS)
	}
	e.RequestSize = p.count("request.size", k.reqSize, maxBytes)
	e.ResponseSize = p.count("response.size", k.respSize, maxBytes)
	if p.err != nil {
		return p.err
	}
	if k.tries > 0 {
		e.Target = k.lastTry.ip
		if p := k.lastTry.port.size(); p > 0 && p < 65536 {
			e.TargetPort = p
		}
	}
	return d.kongGenAI(&e.GenAI)
}

// statusPtr is response.status as startEntry takes it: nil when absent.
func (k *kongLog) statusPtr() *Number {
	if !k.hasStatus {
		return nil
	}
	return &k.status
}
