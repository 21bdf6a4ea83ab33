package gatewayreceiver

import (
	"encoding/json"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// maxListedErrors bounds the entry errors echoed back in one answer.
const maxListedErrors = 10

// logFormat is one access-log ingest path.
type logFormat struct {
	name       string
	mediaTypes []string
	decode     func(body []byte, fn func(*gateway.Event)) (int, []gateway.EntryError, error)
	accepted   attribute.Set
	rejected   attribute.Set
}

func newLogFormat(name string, mediaTypes []string, decode func([]byte, func(*gateway.Event)) (int, []gateway.EntryError, error)) logFormat {
	return logFormat{
		name: name, mediaTypes: mediaTypes, decode: decode,
		accepted: attribute.NewSet(attribute.String("format", name), attribute.String("outcome", "accepted")),
		rejected: attribute.NewSet(attribute.String("format", name), attribute.String("outcome", "rejected")),
	}
}

var (
	kongLog   = newLogFormat("kong_http_log", kongMediaTypes, gateway.DecodeKongHTTPLog)
	apisixLog = newLogFormat("apisix_http_logger", apisixMediaTypes, gateway.DecodeAPISIXHTTPLogger)
)

// handleKongLog serves POST /kong/http-log (Kong's http-log plugin).
func (r *gatewayReceiver) handleKongLog(w http.ResponseWriter, req *http.Request) {
	r.handleLog(w, req, &kongLog)
}

// handleAPISIXLog serves POST /apisix/http-logger (APISIX's http-logger).
func (r *gatewayReceiver) handleAPISIXLog(w http.ResponseWriter, req *http.Request) {
	r.handleLog(w, req, &apisixLog)
}

// logAnswer is the JSON body of every log answer.
type logAnswer struct {
	Accepted int      `json:"accepted"`
	Rejected int      `json:"rejected"`
	Errors   []string `json:"errors,omitempty"`
}

// handleLog decodes a batch of log entries and aggregates the valid ones.
//
// A bad entry rejects only itself. The answer is 200 whenever at least one
// entry was accepted, with the rejected ones listed: Kong's and APISIX's
// batch queues resend a whole batch on any non-2xx answer, which would count
// the accepted entries again. Only a batch with nothing usable gets 400.
func (r *gatewayReceiver) handleLog(w http.ResponseWriter, req *http.Request, f *logFormat) {
	ctx := req.Context()
	if _, ok := r.readEncoding(w, req, f.mediaTypes); !ok {
		return
	}
	s := r.getScratch()
	defer r.putScratch(s)
	body, ok := r.readBody(w, req, jsonContentType, s)
	if !ok {
		return
	}
	_, entryErrs, err := f.decode(body, s.collect)
	if err != nil {
		r.reject(ctx, w, jsonContentType, http.StatusBadRequest, httpMalformed, "malformed "+f.name+" body: "+err.Error())
		return
	}
	ans := logAnswer{Accepted: len(s.events), Rejected: len(entryErrs)}
	for i := range entryErrs {
		if i == maxListedErrors {
			ans.Errors = append(ans.Errors, "… "+strconv.Itoa(len(entryErrs)-i)+" more")
			break
		}
		ans.Errors = append(ans.Errors, entryErrs[i].Error())
	}
	r.telemetry.ReceiverGatewayLogEntries.Add(ctx, int64(ans.Accepted), metric.WithAttributeSet(f.accepted))
	r.telemetry.ReceiverGatewayLogEntries.Add(ctx, int64(ans.Rejected), metric.WithAttributeSet(f.rejected))
	if r.next != nil {
		r.addEvents(ctx, s.events)
	}
	code, outcome := http.StatusOK, httpAccepted
	switch {
	case ans.Rejected > 0 && ans.Accepted == 0:
		code, outcome = http.StatusBadRequest, httpMalformed
	case ans.Rejected > 0:
		outcome = httpPartial
	}
	r.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(outcome))
	writeLogAnswer(w, code, &ans)
}

func writeLogAnswer(w http.ResponseWriter, code int, ans *logAnswer) {
	b, err := json.Marshal(ans)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeBody(w, jsonContentType, code, b)
}
