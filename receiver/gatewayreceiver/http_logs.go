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

// logFormat is one access-log ingest path (a gateway's gateway.LogSpec)
// with its telemetry attribute sets.
type logFormat struct {
	spec     *gateway.LogSpec
	accepted attribute.Set
	rejected attribute.Set
}

// newLogFormats lists the registered gateways' log paths (read when a
// receiver starts, so a gateway registered by a test is served too).
func newLogFormats() []*logFormat {
	var out []*logFormat
	for _, spec := range gateway.Logs() {
		out = append(out, &logFormat{
			spec:     spec,
			accepted: attribute.NewSet(attribute.String("format", spec.Format), attribute.String("outcome", "accepted")),
			rejected: attribute.NewSet(attribute.String("format", spec.Format), attribute.String("outcome", "rejected")),
		})
	}
	return out
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
func (h *httpServer) handleLog(w http.ResponseWriter, req *http.Request, f *logFormat) {
	ctx := req.Context()
	if _, ok := h.readEncoding(w, req, f.spec.MediaTypes); !ok {
		return
	}
	s, ok := h.readBody(w, req, jsonContentType, weightLogJSON)
	if !ok {
		return
	}
	defer h.ingest.putScratch(s)
	body := s.body
	s.aggregating(ctx)
	entries, entryErrs, err := f.spec.Decode(body, s.collect)
	if err != nil {
		h.reject(ctx, w, jsonContentType, http.StatusBadRequest, httpMalformed, "malformed "+f.spec.Format+" body: "+err.Error())
		return
	}
	// Decode lists the first entry errors only: every entry it did not
	// hand on was rejected.
	ans := logAnswer{Accepted: s.collected, Rejected: entries - s.collected}
	for i := range min(len(entryErrs), maxListedErrors) {
		ans.Errors = append(ans.Errors, entryErrs[i].Error())
	}
	if more := ans.Rejected - len(ans.Errors); more > 0 {
		ans.Errors = append(ans.Errors, "… "+strconv.Itoa(more)+" more")
	}
	h.telemetry.ReceiverGatewayLogEntries.Add(ctx, int64(ans.Accepted), metric.WithAttributeSet(f.accepted))
	h.telemetry.ReceiverGatewayLogEntries.Add(ctx, int64(ans.Rejected), metric.WithAttributeSet(f.rejected))
	if h.ingest.metrics {
		h.ingest.events(ctx, s.events)
	}
	code, outcome := http.StatusOK, httpAccepted
	switch {
	case ans.Rejected > 0 && ans.Accepted == 0:
		code, outcome = http.StatusBadRequest, httpMalformed
	case ans.Rejected > 0:
		outcome = httpPartial
	}
	h.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(outcome))
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
