package gatewayreceiver

import (
	"net"
	"net/http"
	"strings"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// metricsURLPath is where gateways push their own OTLP metrics.
const metricsURLPath = "/v1/metrics"

// handleMetrics serves POST /v1/metrics (OTLP/HTTP, protobuf or JSON): the
// gateways' own metrics (metrics_push.go). It is admitted, bounded and
// charged as /v1/traces is (readBody, chargeMetrics), then decoded into
// pdata, which the mapping reads.
func (h *httpServer) handleMetrics(w http.ResponseWriter, req *http.Request) {
	enc, ok := h.readEncoding(w, req, otlpMediaTypes)
	if !ok {
		return
	}
	if h.ingest.pushed.next == nil {
		h.reject(req.Context(), w, enc, http.StatusNotFound, httpRefused, noMetricsPipeline)
		return
	}
	weight := int64(weightPdataProto)
	if enc == jsonContentType {
		weight = weightOTLPJSON
	}
	s, ok := h.readBody(w, req, enc, weight)
	if !ok {
		return
	}
	defer h.ingest.putScratch(s)
	if !h.chargePdata(w, req, enc, weight, s, gateway.OTLPMetricsProtoCost, "OTLP JSON metrics") {
		return
	}
	otlpReq := pmetricotlp.NewExportRequest()
	var err error
	if enc == pbContentType {
		err = otlpReq.UnmarshalProto(s.body)
	} else {
		err = otlpReq.UnmarshalJSON(s.body)
	}
	if err != nil {
		h.reject(req.Context(), w, enc, http.StatusBadRequest, httpMalformed, "malformed OTLP "+encodingName(enc)+" metrics body: "+err.Error())
		return
	}
	client, _, _ := net.SplitHostPort(req.RemoteAddr)
	res, err := h.ingest.pushed.metrics(req.Context(), otlpReq.Metrics(), client)
	h.answerMetrics(w, req, enc, res, err)
}

// noMetricsPipeline answers a push to a receiver in no metrics pipeline.
const noMetricsPipeline = "this gateway receiver is in no metrics pipeline, so it takes no pushed metrics: " +
	"list it under a metrics pipeline's receivers (service::pipelines::metrics::receivers)"

// answerMetrics answers a decoded push: 400 when every point was of no
// known gateway, 503 (or 400 when permanent) when the pipeline refused the
// metrics, else 200 with the partial success (the points refused and why)
// when some were.
func (h *httpServer) answerMetrics(w http.ResponseWriter, req *http.Request, enc string, res pushResult, err error) {
	ctx := req.Context()
	switch {
	case res.unknownOnly:
		h.reject(ctx, w, enc, http.StatusBadRequest, httpMalformed, res.message)
		return
	case err != nil:
		code := http.StatusServiceUnavailable
		if consumererror.IsPermanent(err) {
			code = http.StatusBadRequest
		}
		h.reject(ctx, w, enc, code, httpRefused, "metrics pipeline refused the metrics: "+err.Error())
		return
	}
	resp := pmetricotlp.NewExportResponse()
	outcome := httpAccepted
	if res.rejected > 0 {
		resp.PartialSuccess().SetRejectedDataPoints(res.rejected)
		resp.PartialSuccess().SetErrorMessage(cutMessage(res.message))
		outcome = httpPartial
	}
	var body []byte
	if enc == pbContentType {
		body, err = resp.MarshalProto()
	} else {
		body, err = resp.MarshalJSON()
	}
	if err != nil {
		writeStatus(w, enc, http.StatusInternalServerError, "marshal response: "+err.Error())
		return
	}
	h.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(outcome))
	writeBody(w, enc, http.StatusOK, body)
}

// cutMessage bounds a message sent back, as writeStatus does.
func cutMessage(msg string) string {
	if len(msg) > maxStatusMessage {
		msg = msg[:maxStatusMessage] + "…"
	}
	return strings.ToValidUTF8(msg, "\uFFFD")
}
