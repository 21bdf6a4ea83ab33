package gateway

// apisixEntry is the part of APISIX's http-logger default log format
// (log-util.lua get_full_log, docs/gateways.md §2d) that metrics need.
type apisixEntry struct {
	Request struct {
		Method string `json:"method"`
		URI    string `json:"uri"`
		Size   Number `json:"size"`
	} `json:"request"`
	Response struct {
		Status *Number `json:"status"`
		Size   Number  `json:"size"`
	} `json:"response"`
	Server struct {
		Hostname string `json:"hostname"`
	} `json:"server"`
	Upstream  string `json:"upstream"`
	ServiceID string `json:"service_id"`
	RouteID   string `json:"route_id"`
	Consumer  *struct {
		Username string `json:"username"`
	} `json:"consumer"`
	Latency         Number `json:"latency"`
	UpstreamLatency Number `json:"upstream_latency"`
	APISIXLatency   Number `json:"apisix_latency"`
	// LLMSummary is what ai-proxy adds with logging.summaries (apisix_llm.go).
	LLMSummary apisixLLMSummary `json:"llm_summary"`
}

func (a *apisixEntry) reset() {
	*a = apisixEntry{}
	a.Request.Size, a.Response.Size = unknownNumber(), unknownNumber()
	a.Latency, a.UpstreamLatency, a.APISIXLatency = unknownNumber(), unknownNumber(), unknownNumber()
	a.LLMSummary.reset()
}

// DecodeAPISIXHTTPLogger maps an APISIX http-logger body: one object
// (batch_max_size = 1), an array (concat_method json) or newline-delimited
// objects (concat_method new_line). Contract as DecodeKongHTTPLog.
func DecodeAPISIXHTTPLogger(body []byte, fn func(*Event)) (entries int, entryErrs []EntryError, err error) {
	return decodeLog[apisixEntry](body, true, fn)
}

// apisixRouteMiss is http-logger's route_id for a request no route matched.
const apisixRouteMiss = "no-matched"

func (a *apisixEntry) event(e *Event) error {
	if err := startEntry(e, KindAPISIX, a.Response.Status, a.Request.Method); err != nil {
		return err
	}
	e.Instance = a.Server.Hostname
	// A route miss: get_full_log leaves route_id unset and sets service_id
	// to $host; http-logger then writes route_id "no-matched" (since 2.0,
	// §2d). Neither is an entity: the request host is client input. Like
	// APISIX's own plugin, a miss has no route and no service.
	if a.RouteID != "" && a.RouteID != apisixRouteMiss {
		e.RouteID = a.RouteID
		e.ServiceID = a.ServiceID
	}
	// upstream is $upstream_addr: the balancer's "ip:port" (several,
	// comma-separated, after retries; the last one answered).
	e.Target = lastAddr(a.Upstream)
	if a.Consumer != nil {
		e.Consumer = a.Consumer.Username
	}
	var p plausible
	e.TotalMS = p.ms("latency", a.Latency)
	e.UpstreamMS = p.ms("upstream_latency", a.UpstreamLatency)
	e.AddedMS = p.ms("apisix_latency", a.APISIXLatency)
	if e.UpstreamMS >= 0 {
		e.Source = SourceUpstream
	} else {
		e.Source = SourceGateway
	}
	e.RequestSize = p.count("request.size", a.Request.Size, maxBytes)
	e.ResponseSize = p.count("response.size", a.Response.Size, maxBytes)
	a.LLMSummary.genAI(&e.GenAI, &p)
	return p.err
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
