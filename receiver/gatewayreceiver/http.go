package gatewayreceiver

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/admission"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
)

const (
	pbContentType   = "application/x-protobuf"
	jsonContentType = "application/json"
)

// Outcomes of an HTTP export, the `outcome` attribute of
// otelcol_receiver_gateway_requests. A bounded set, one constant each.
var (
	httpAccepted         = httpOutcome("accepted")
	httpMalformed        = httpOutcome("malformed")
	httpUnsupportedMedia = httpOutcome("unsupported_media_type")
	httpTooLarge         = httpOutcome("too_large")
	httpBadMethod        = httpOutcome("method_not_allowed")
	httpRefused          = httpOutcome("refused")
	httpPartial          = httpOutcome("partially_accepted")
	httpThrottled        = httpOutcome("throttled")
	httpUnauthenticated  = httpOutcome("unauthenticated")
)

// Media types each path accepts; the first is named in 415 answers.
var (
	otlpMediaTypes = []string{pbContentType, jsonContentType}
)

func httpOutcome(o string) attribute.Set {
	return attribute.NewSet(attribute.String("transport", "http"), attribute.String("outcome", o))
}

// httpServer is the OTLP/HTTP transport (POST /v1/traces), with the
// gateways' access-log paths (http_logs.go) and the health push endpoint on
// the same server: it admits a request before its body is read, reads the
// body, and hands it to ingest.
type httpServer struct {
	cfg       *confighttp.ServerConfig
	ingest    *ingest
	telemetry *metadata.TelemetryBuilder
	srv       *http.Server
}

// start serves the paths, and the health push handler on pushPath when
// push is not nil.
func (h *httpServer) start(ctx context.Context, host component.Host, set receiver.Settings, servers *sync.WaitGroup, pushPath string, push http.Handler) error {
	mux := http.NewServeMux()
	mux.HandleFunc(tracesURLPath, h.handleTraces)
	mux.HandleFunc(metricsURLPath, h.handleMetrics)
	for _, f := range newLogFormats() {
		mux.HandleFunc(f.spec.Path, func(w http.ResponseWriter, req *http.Request) { h.handleLog(w, req, f) })
	}
	if push != nil {
		mux.Handle(pushPath, h.admitPush(push))
	}
	srv, err := h.cfg.ToServer(ctx, host.GetExtensions(), set.TelemetrySettings, countHTTP2Requests(mux),
		confighttp.WithErrorHandler(h.decompressError))
	if err != nil {
		return err
	}
	// Each connection carries the count of its requests in flight, which
	// only HTTP/2 can make more than one (admission.Conn).
	connContext := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if connContext != nil {
			ctx = connContext(ctx, c)
		}
		return context.WithValue(ctx, connKey{}, new(admission.Conn))
	}
	ln, err := h.cfg.ToListener(ctx)
	if err != nil {
		return err
	}
	h.srv = srv
	serve(servers, set.Logger, host, "HTTP", ln, srv.Serve, http.ErrServerClosed)
	return nil
}

// shutdown stops the server gracefully (requests in progress finish), or
// at once when ctx ends first.
func (h *httpServer) shutdown(ctx context.Context) error {
	if h.srv == nil {
		return nil
	}
	return h.srv.Shutdown(ctx)
}

// handleTraces serves POST /v1/traces (OTLP/HTTP, protobuf or JSON).
//
// A protobuf body that only feeds metrics (no traces pipeline to hand the
// spans to) is decoded straight into gateway events: building the pdata tree
// would cost twice the decoding, for a tree nobody reads.
func (h *httpServer) handleTraces(w http.ResponseWriter, req *http.Request) {
	enc, ok := h.readEncoding(w, req, otlpMediaTypes)
	if !ok {
		return
	}
	direct := enc == pbContentType && h.ingest.nextTraces == nil
	weight := int64(weightPdataProto)
	switch {
	case direct:
		weight = weightDirectProto
	case enc == jsonContentType:
		weight = weightOTLPJSON
	}
	s, ok := h.readBody(w, req, enc, weight)
	if !ok {
		return
	}
	defer h.ingest.putScratch(s)
	body := s.body
	if !direct && !h.chargePdata(w, req, enc, weight, s, gateway.OTLPProtoCost, "OTLP JSON") {
		return
	}
	var err error
	if direct {
		if err = h.ingest.proto(req.Context(), s, body); errors.Is(err, admission.ErrBusy) {
			h.rejectBusy(req.Context(), w, enc, err)
			return
		} else if err != nil {
			h.reject(req.Context(), w, enc, http.StatusBadRequest, httpMalformed, "malformed OTLP protobuf body: "+err.Error())
			return
		}
	} else if !h.ingestPdata(w, req, enc, body) {
		return
	}
	h.telemetry.ReceiverGatewayRequests.Add(req.Context(), 1, metric.WithAttributeSet(httpAccepted))
	if enc == pbContentType {
		// An empty ExportTraceServiceResponse is zero bytes.
		writeBody(w, enc, http.StatusOK, nil)
		return
	}
	msg, err := ptraceotlp.NewExportResponse().MarshalJSON()
	if err != nil {
		writeStatus(w, enc, http.StatusInternalServerError, "marshal response: "+err.Error())
		return
	}
	writeBody(w, enc, http.StatusOK, msg)
}

// ingestPdata unmarshals an OTLP body into pdata and ingests it; it answers
// the request itself when that fails.
func (h *httpServer) ingestPdata(w http.ResponseWriter, req *http.Request, enc string, body []byte) bool {
	otlpReq := ptraceotlp.NewExportRequest()
	var err error
	if enc == pbContentType {
		err = otlpReq.UnmarshalProto(body)
	} else {
		err = otlpReq.UnmarshalJSON(body)
	}
	if err != nil {
		h.reject(req.Context(), w, enc, http.StatusBadRequest, httpMalformed, "malformed OTLP "+encodingName(enc)+" body: "+err.Error())
		return false
	}
	if err := h.ingest.traces(req.Context(), otlpReq.Traces()); err != nil {
		code := http.StatusServiceUnavailable
		if consumererror.IsPermanent(err) {
			code = http.StatusBadRequest
		}
		h.reject(req.Context(), w, enc, code, httpRefused, "traces pipeline refused the spans: "+err.Error())
		return false
	}
	return true
}

// readEncoding checks the method and the Content-Type, answering 405 or 415.
func (h *httpServer) readEncoding(w http.ResponseWriter, req *http.Request, allowed []string) (string, bool) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.reject(req.Context(), w, jsonContentType, http.StatusMethodNotAllowed, httpBadMethod, req.Method+" not allowed on "+req.URL.Path+", use POST")
		return "", false
	}
	ct := req.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || !slices.Contains(allowed, mt) {
		h.reject(req.Context(), w, jsonContentType, http.StatusUnsupportedMediaType, httpUnsupportedMedia,
			"unsupported Content-Type "+strconv.Quote(ct)+" on "+req.URL.Path+", use "+strings.Join(allowed, " or "))
		return "", false
	}
	return mt, true
}

// chargePdata checks a body pdata is about to decode, s's: an OTLP JSON
// body's nesting (maxOTLPJSONDepth), and what decoding it would hold,
// estimated from its elements (gateway.OTLPJSONCost; protoCost for
// protobuf: traces' OTLPProtoCost, metrics' OTLPMetricsProtoCost), against
// the weight it was charged per byte. Answered and counted here when it may
// not go on; what names the body in the answer ("OTLP JSON").
func (h *httpServer) chargePdata(w http.ResponseWriter, req *http.Request, enc string, weight int64, s *exportScratch,
	protoCost func([]byte) gateway.DecodeCost, what string) bool {
	ctx := req.Context()
	var cost gateway.DecodeCost
	if enc == jsonContentType {
		var err error
		if cost, err = gateway.OTLPJSONCost(s.body, maxOTLPJSONDepth); err != nil {
			h.reject(ctx, w, enc, http.StatusBadRequest, httpMalformed, "malformed "+what+" body: "+err.Error())
			return false
		}
	} else {
		cost = protoCost(s.body)
	}
	switch tooLarge, busy := h.ingest.chargeDecode(s, cost, weight, encodingName(enc)); {
	case tooLarge != "":
		h.reject(ctx, w, enc, http.StatusRequestEntityTooLarge, httpTooLarge, tooLarge)
		return false
	case busy != nil:
		h.rejectBusy(ctx, w, enc, busy)
		return false
	}
	return true
}

// maxOTLPJSONDepth bounds the nesting of an OTLP JSON body before pdata
// decodes it: pdata refuses protobuf values nested past 100 levels, and a
// JSON AnyValue level takes at most 4 JSON levels ({"kvlistValue":
// {"values":[{"key":…,"value":…), plus the export's own ~16.
const maxOTLPJSONDepth = 4*100 + 16

// readBody reads the whole body into s's buffer, which the caller owns until
// it puts s back. The body is admitted against max_request_bytes_in_flight
// before it is read, in turn (admitRequest: it may wait for room; 429 when
// it may not or waited too long) and charged as its bytes arrive, then for
// decoding (weight × its size in all). One over max_request_body_size gets
// 413.
//
// The request's scratch (its working memory) is taken only once the body is
// in; the caller owns it and puts it back. On failure nothing is held.
func (h *httpServer) readBody(w http.ResponseWriter, req *http.Request, enc string, weight int64) (*exportScratch, bool) {
	if limit := h.maxBodySize(); req.ContentLength > limit {
		// Refused before a byte is read: a client announcing a terabyte
		// holds nothing until the read timeout.
		_ = req.Body.Close()
		h.reject(req.Context(), w, enc, http.StatusRequestEntityTooLarge, httpTooLarge, oversized(req.ContentLength, limit))
		return nil, false
	}
	charge, err := h.admitRequest(req, weight)
	if err != nil {
		_ = req.Body.Close()
		h.rejectBusy(req.Context(), w, enc, err)
		return nil, false
	}
	body, err := h.ingest.readBody(admission.NewBody(req.Body, charge), req.ContentLength)
	_ = req.Body.Close()
	if err == nil {
		err = charge.Add(int64(len(body)) * (weight - 1))
	}
	if err == nil {
		s := h.ingest.getScratch()
		s.body, s.charge = body, charge
		return s, true
	}
	charge.Release()
	h.ingest.putBody(body)
	if errors.Is(err, admission.ErrBusy) {
		h.rejectBusy(req.Context(), w, enc, err)
		return nil, false
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		h.reject(req.Context(), w, enc, http.StatusRequestEntityTooLarge, httpTooLarge,
			"request body exceeds max_request_body_size ("+strconv.FormatInt(tooLarge.Limit, 10)+" bytes)")
		return nil, false
	}
	h.reject(req.Context(), w, enc, http.StatusBadRequest, httpMalformed, "reading request body: "+err.Error())
	return nil, false
}

// admitRequest admits req against max_request_bytes_in_flight before its
// body is read, waiting in turn (at most admission_queue_timeout) until its
// need fits: the declared Content-Length times weight, what reading and
// decoding the body will hold (0 for a body of unknown size). Nothing is
// charged until the body arrives. A client refused for want of room keeps
// its turn by its address. The error wraps admission.ErrBusy: 429 with
// Retry-After.
func (h *httpServer) admitRequest(req *http.Request, weight int64) (*admission.Charge, error) {
	var need int64
	if req.ContentLength > 0 {
		need = req.ContentLength * weight
	}
	var conn *admission.Conn
	if req.ProtoMajor >= 2 {
		conn, _ = req.Context().Value(connKey{}).(*admission.Conn)
	}
	client, _, _ := net.SplitHostPort(req.RemoteAddr)
	return h.ingest.admit.Admit(req.Context(), admission.Request{Need: need, Conn: conn, Client: client})
}

// connKey keys a connection's *admission.Conn in its requests' contexts.
type connKey struct{}

// countHTTP2Requests counts each HTTP/2 request in its connection's
// admission.Conn while it is served: an HTTP/2 request of a connection that
// carries others never waits for admission (see admission.Limiter).
func countHTTP2Requests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.ProtoMajor >= 2 {
			if conn, ok := req.Context().Value(connKey{}).(*admission.Conn); ok {
				conn.Enter()
				defer conn.Leave()
			}
		}
		next.ServeHTTP(w, req)
	})
}

// decompressError answers failures of confighttp's decompression (a corrupt
// gzip body, or one that inflates past max_request_body_size).
func (h *httpServer) decompressError(w http.ResponseWriter, req *http.Request, msg string, code int) {
	outcome := httpMalformed
	switch code {
	case http.StatusRequestEntityTooLarge:
		outcome = httpTooLarge
	case http.StatusUnauthorized, http.StatusForbidden:
		// confighttp answers a refused authenticator through this handler too.
		outcome = httpUnauthenticated
	}
	enc := jsonContentType
	if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err == nil && mt == pbContentType {
		enc = pbContentType
	}
	h.reject(req.Context(), w, enc, code, outcome, msg)
}

// rejectBusy answers a request refused by max_request_bytes_in_flight: 429
// with Retry-After, which OTLP exporters and the gateways' batch queues
// retry.
func (h *httpServer) rejectBusy(ctx context.Context, w http.ResponseWriter, enc string, err error) {
	w.Header().Set("Retry-After", admission.RetryAfter)
	h.reject(ctx, w, enc, http.StatusTooManyRequests, httpThrottled, err.Error())
}

// reject counts a refused request and answers it with a google.rpc.Status, as
// OTLP/HTTP requires, in the request's encoding.
func (h *httpServer) reject(ctx context.Context, w http.ResponseWriter, enc string, code int, outcome attribute.Set, msg string) {
	h.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(outcome))
	writeStatus(w, enc, code, msg)
}

// maxStatusMessage bounds an error message sent back: decode errors may
// quote the body, which is the client's input.
const maxStatusMessage = 1024

// writeStatus answers with a google.rpc.Status in enc. The message is cut to
// maxStatusMessage bytes and made valid UTF-8 (a proto3 string must be), so
// marshalling cannot fail and a client's raw bytes are never echoed back as
// they came.
func writeStatus(w http.ResponseWriter, enc string, code int, msg string) {
	if len(msg) > maxStatusMessage {
		msg = msg[:maxStatusMessage] + "…"
	}
	st := &spb.Status{Code: int32(grpcCodeOf(code)), Message: strings.ToValidUTF8(msg, "\uFFFD")}
	var body []byte
	var err error
	if enc == pbContentType {
		body, err = proto.Marshal(st)
	} else {
		body, err = protojson.Marshal(st)
	}
	if err != nil { // not reachable with a valid UTF-8 message; still the OTLP shape
		body, _ = protojson.Marshal(&spb.Status{Code: int32(codes.Internal), Message: "marshal error status"})
		enc = jsonContentType
	}
	writeBody(w, enc, code, body)
}

func writeBody(w http.ResponseWriter, contentType string, code int, body []byte) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// grpcCodeOf maps the HTTP statuses this receiver answers with to the code in
// the google.rpc.Status body (https://opentelemetry.io/docs/specs/otlp/#failures-1).
func grpcCodeOf(httpCode int) codes.Code {
	switch httpCode {
	case http.StatusBadRequest:
		return codes.InvalidArgument
	case http.StatusRequestEntityTooLarge:
		return codes.ResourceExhausted
	case http.StatusUnsupportedMediaType, http.StatusMethodNotAllowed:
		return codes.Unimplemented
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		return codes.Unavailable
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	default:
		return codes.Internal
	}
}

func encodingName(enc string) string {
	if enc == pbContentType {
		return "protobuf"
	}
	return "JSON"
}

// admitPush admits a health push against max_request_bytes_in_flight like
// every other body: in turn before anything is read (admitRequest; 429 when
// refused), then charged as it arrives (the push handler answers a body
// refused half-way with 429 too).
func (h *httpServer) admitPush(push http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if limit := h.maxBodySize(); req.ContentLength > limit {
			h.refusePush(w, req, http.StatusRequestEntityTooLarge, pushRejected, oversized(req.ContentLength, limit))
			return
		}
		charge, err := h.admitRequest(req, weightLogJSON)
		if err != nil {
			w.Header().Set("Retry-After", admission.RetryAfter)
			h.refusePush(w, req, http.StatusTooManyRequests, pushThrottled, err.Error())
			return
		}
		defer charge.Release()
		req.Body = admission.NewBody(req.Body, charge)
		push.ServeHTTP(w, req)
	})
}

// refusePush answers a push refused before its body is read, in the push
// endpoint's answer shape, and counts it as outcome.
func (h *httpServer) refusePush(w http.ResponseWriter, req *http.Request, code int, outcome attribute.Set, msg string) {
	_ = req.Body.Close()
	b, _ := json.Marshal(struct {
		Accepted   int    `json:"accepted"`
		OutOfOrder int    `json:"out_of_order"`
		Error      string `json:"error"`
	}{Error: msg})
	writeBody(w, jsonContentType, code, b)
	h.telemetry.ReceiverGatewayHealthEvents.Add(req.Context(), 1, metric.WithAttributeSet(outcome))
}

// oversized says why a declared Content-Length is refused.
func oversized(contentLength, limit int64) string {
	return "Content-Length " + strconv.FormatInt(contentLength, 10) + " exceeds max_request_body_size (" + strconv.FormatInt(limit, 10) + " bytes)"
}

var (
	pushThrottled = attribute.NewSet(attribute.String("outcome", "throttled"))
	pushRejected  = attribute.NewSet(attribute.String("outcome", "rejected"))
)

// defaultMaxRequestBodySize is confighttp's max_request_body_size when
// unset (20 MiB).
const defaultMaxRequestBodySize = 20 << 20

// maxBodySize is the HTTP server's max_request_body_size.
func (h *httpServer) maxBodySize() int64 {
	if h.cfg.MaxRequestBodySize > 0 {
		return h.cfg.MaxRequestBodySize
	}
	return defaultMaxRequestBodySize
}
