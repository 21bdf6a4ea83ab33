package gateway

// apisixLog is the part of APISIX's http-logger default log format
// (log-util.lua get_full_log, docs/gateways.md §2d) that metrics need, as
// the scanner reads it (jsonscan.go); it mirrors apisixEntry of
// logs_reference_test.go, type-checking the same fields.
type apisixLog struct {
	reqMethod, reqURI string
	reqSize           Number
	status, respSize  Number
	hasStatus         bool
	hostname          string
	upstream          string
	serviceID         string
	routeID           string
	consumer          struct {
		set      bool
		username string
	}
	latency, upstreamLatency, apisixLatency Number
	// llm is what ai-proxy adds with logging.summaries (apisix_llm.go).
	llm apisixLLMSummary
}

func (a *apisixLog) reset() {
	*a = apisixLog{reqSize: Unknown, respSize: Unknown, latency: Unknown, upstreamLatency: Unknown, apisixLatency: Unknown}
	a.llm.reset()
}

// DecodeAPISIXHTTPLogger maps an APISIX http-logger body: one object
// (batch_max_size = 1), an array (concat_method json) or newline-delimited
// objects (concat_method new_line). Contract as DecodeKongHTTPLog.
func DecodeAPISIXHTTPLogger(body []byte, fn func(*Event)) (entries int, entryErrs []EntryError, err error) {
	st := getLogState()
	defer putLogState(st)
	a := &st.apisix
	return scanEntries(&st.d, body, true,
		func() { a.reset(); st.d.apisixEntry(a) },
		func() error {
			if err := a.event(&st.e); err != nil {
				return err
			}
			fn(&st.e)
			return nil
		})
}

// apisixEntry reads one entry at d.pos into a.
func (d *scanner) apisixEntry(a *apisixLog) {
	if !d.object("") {
		return
	}
	var key jsonString
	for first := true; d.member(&first, &key); {
		switch {
		case key.is("request"):
			d.apisixRequest(a)
		case key.is("response"):
			d.response(&a.status, &a.hasStatus, &a.respSize)
		case key.is("server"):
			d.apisixServer(a)
		case key.is("upstream"):
			d.text(&a.upstream, "upstream")
		case key.is("service_id"):
			d.text(&a.serviceID, "service_id")
		case key.is("route_id"):
			d.text(&a.routeID, "route_id")
		case key.is("consumer"):
			d.apisixConsumer(a)
		case key.is("latency"):
			d.num(&a.latency)
		case key.is("upstream_latency"):
			d.num(&a.upstreamLatency)
		case key.is("apisix_latency"):
			d.num(&a.apisixLatency)
		case key.is("llm_summary"):
			d.apisixLLM(&a.llm)
		default:
			d.skipValue()
		}
	}
}

func (d *scanner) apisixRequest(a *apisixLog) {
	if !d.object("request") {
		return
	}
	var key jsonString
	for first := true; d.member(&first, &key); {
		switch {
		case key.is("method"):
			d.text(&a.reqMethod, "request.method")
		case key.is("uri"):
			d.text(&a.reqURI, "request.uri")
		case key.is("size"):
			d.num(&a.reqSize)
		default:
			d.skipValue()
		}
	}
}

func (d *scanner) apisixServer(a *apisixLog) {
	if !d.object("server") {
		return
	}
	var key jsonString
	for first := true; d.member(&first, &key); {
		if key.is("hostname") {
			d.text(&a.hostname, "server.hostname")
			continue
		}
		d.skipValue()
	}
}

func (d *scanner) apisixConsumer(a *apisixLog) {
	c := &a.consumer
	if !d.pointer("consumer", &c.set, func() { c.username = "" }) {
		return
	}
	var key jsonString
	for first := true; d.member(&first, &key); {
		if key.is("username") {
			d.text(&c.username, "consumer.username")
			continue
		}
		d.skipValue()
	}
}

// apisixRouteMiss is http-logger's route_id for a request no route matched.
const apisixRouteMiss = "no-matched"

func (a *apisixLog) event(e *Event) error {
	if err := startEntry(e, KindAPISIX, a.statusPtr(), a.reqMethod); err != nil {
		return err
	}
	e.Instance = a.hostname
	// A route miss: get_full_log leaves route_id unset and sets service_id
	// to $host; http-logger then writes route_id "no-matched" (since 2.0,
	// §2d). Neither is an entity: the request host is client input. Like
	// APISIX's own plugin, a miss has no route and no service.
	if a.routeID != "" && a.routeID != apisixRouteMiss {
		e.RouteID = a.routeID
		e.ServiceID = a.serviceID
	}
	// upstream is $upstream_addr: the balancer's "ip:port" (several,
	// comma-separated, after retries; the last one answered).
	e.Target = lastAddr(a.upstream)
	e.Consumer = a.consumer.username
	var p plausible
	e.TotalMS = p.ms("latency", a.latency)
	e.UpstreamMS = p.ms("upstream_latency", a.upstreamLatency)
	e.AddedMS = p.ms("apisix_latency", a.apisixLatency)
	if e.UpstreamMS >= 0 {
		e.Source = SourceUpstream
	} else {
		e.Source = SourceGateway
	}
	e.RequestSize = p.count("request.size", a.reqSize, maxBytes)
	e.ResponseSize = p.count("response.size", a.respSize, maxBytes)
	a.llm.genAI(&e.GenAI, &p)
	return p.err
}

// statusPtr is response.status as startEntry takes it: nil when absent.
func (a *apisixLog) statusPtr() *Number {
	if !a.hasStatus {
		return nil
	}
	return &a.status
}

// lastAddr returns the last address of nginx's "a, b : c" list.
func lastAddr(s string) string {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ',' || s[i] == ':' && i > 0 && s[i-1] == ' ' {
			return trimSpace(s[i+1:])
		}
	}
	return trimSpace(s)
}

func trimSpace(s string) string {
	for len(s) > 0 && s[0] == ' ' {
		s = s[1:]
	}
	for len(s) > 0 && s[len(s)-1] == ' ' {
		s = s[:len(s)-1]
	}
	return s
}
