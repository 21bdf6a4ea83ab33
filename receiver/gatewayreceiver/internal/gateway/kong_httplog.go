package gateway

import (
	"encoding/json"
	"errors"
)

// kongEntry is the part of Kong's http-log payload (kong.log.serialize(),
// docs/gateways.md §1d) that metrics need. Headers, query strings and
// timestamps are skipped without being decoded into values.
type kongEntry struct {
	Request struct {
		Method string `json:"method"`
		Size   Number `json:"size"`
	} `json:"request"`
	Response struct {
		Status *Number `json:"status"`
		Size   Number  `json:"size"`
	} `json:"response"`
	Route *struct {
		ID    string   `json:"id"`
		Name  string   `json:"name"`
		Paths []string `json:"paths"`
	} `json:"route"`
	Service *struct {
		ID   string `json:"id"`
		Name string `json:"name"`
		Host string `json:"host"`
	} `json:"service"`
	Consumer *struct {
		ID       string `json:"id"`
		Username string `json:"username"`
		CustomID string `json:"custom_id"`
	} `json:"consumer"`
	Latencies struct {
		Kong    Number `json:"kong"`
		Proxy   Number `json:"proxy"`
		Request Number `json:"request"`
	} `json:"latencies"`
	Tries []struct {
		IP    string `json:"ip"`
		Port  Number `json:"port"`
		State string `json:"state"`
	} `json:"tries"`
	Source        string `json:"source"`
	WorkspaceName string `json:"workspace_name"`
	// AI is what Kong's AI plugins log, by namespace (kong_ai.go). Values
	// stay raw: only the one GenAI is read from is decoded.
	AI map[string]json.RawMessage `json:"ai"`
}

func (k *kongEntry) reset() {
	// The ai map is kept and emptied: json.Unmarshal fills a non-nil map in
	// place, so an AI gateway's entries do not allocate a map each.
	ai := k.AI
	clear(ai)
	*k = kongEntry{AI: ai}
	k.Request.Size, k.Response.Size = unknownNumber(), unknownNumber()
	k.Latencies.Kong, k.Latencies.Proxy, k.Latencies.Request = unknownNumber(), unknownNumber(), unknownNumber()
}

// DecodeKongHTTPLog maps a Kong http-log body: one entry object
// (queue.max_batch_size = 1, the default) or an array of them. fn is called
// once per valid entry; the *Event is valid only during the call. An entry
// that is not an object, or lacks a valid response.status, is reported in
// entryErrs and skipped; err is set only when the body as a whole is not
// JSON, in which case nothing was reported.
func DecodeKongHTTPLog(body []byte, fn func(*Event)) (entries int, entryErrs []EntryError, err error) {
	return decodeLog[kongEntry](body, false, fn)
}

// event maps a decoded entry (§1d, and §1c for the label rules).
func (k *kongEntry) event(e *Event) error {
	if err := startEntry(e, KindKong, k.Response.Status, k.Request.Method); err != nil {
		return err
	}
	if r := k.Route; r != nil {
		e.RouteID, e.RouteName = r.ID, r.Name
		if len(r.Paths) > 0 {
			e.Route = r.Paths[0]
		}
	}
	if s := k.Service; s != nil {
		e.ServiceID, e.ServiceName, e.ServiceHost = s.ID, s.Name, s.Host
		e.Upstream = s.Host
	}
	if c := k.Consumer; c != nil {
		// consumer.username only, as Kong's plugin labels it (§1c): a
		// consumer without a username has consumer="".
		e.Consumer = c.Username
	}
	e.Workspace = k.WorkspaceName
	// source: "upstream" when the service answered; "kong" for errors and
	// plugin exits (kong/constants.lua RESPONSE_SOURCE).
	switch k.Source {
	case "upstream", "service":
		e.Source = SourceUpstream
	case "":
	default:
		e.Source = SourceGateway
	}
	var p plausible
	e.TotalMS = p.ms("latencies.request", k.Latencies.Request)
	e.UpstreamMS = p.ms("latencies.proxy", k.Latencies.Proxy) // -1 (no upstream) reads as Unknown
	e.AddedMS = p.ms("latencies.kong", k.Latencies.Kong)
	e.RequestSize = p.count("request.size", k.Request.Size, maxBytes)
	e.ResponseSize = p.count("response.size", k.Response.Size, maxBytes)
	if p.err != nil {
		return p.err
	}
	if n := len(k.Tries); n > 0 {
		last := k.Tries[n-1]
		e.Target = last.IP
		if p := last.Port.size(); p > 0 && p < 65536 {
			e.TargetPort = p
		}
	}
	return kongGenAI(&e.GenAI, k.AI)
}

// jsonError shortens encoding/json's type errors to the field and what was
// wrong, which is what a gateway operator needs to fix a log format.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return errors.New("want a JSON object, got JSON " + te.Value)
		}
		return errors.New(te.Field + ": wrong type, got JSON " + te.Value)
	}
	return err
}
