package gatewayreceiver

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
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
)

// Media types each path accepts; the first is named in 415 answers.
var (
	otlpMediaTypes = []string{pbContentType, jsonContentType}
)

func httpOutcome(o string) attribute.Set {
	return attribute.NewSet(attribute.String("transport", "http"), attribute.String("outcome", o))
}

func (r *gatewayReceiver) startHTTP(ctx context.Context, host component.Host) error {
	if !r.cfg.Protocols.HTTP.HasValue() {
		return nil
	}
	cfg := r.cfg.Protocols.HTTP.Get()
	mux := http.NewServeMux()
	mux.HandleFunc(tracesURLPath, r.handleTraces)
	for _, f := range newLogFormats() {
		mux.HandleFunc(f.spec.Path, func(w http.ResponseWriter, req *http.Request) { r.handleLog(w, req, f) })
	}
	if r.health != nil && r.health.PushHandler() != nil {
		mux.Handle(r.health.PushPath(), r.health.PushHandler())
	}
	srv, err := cfg.ToServer(ctx, host.GetExtensions(), r.settings.TelemetrySettings, mux,
		confighttp.WithErrorHandler(r.decompressError))
	if err != nil {
		return err
	}
	ln, err := cfg.ToListener(ctx)
	if err != nil {
		return err
	}
	r.serverHTTP = srv
	r.serve(host, "HTTP", ln, srv.Serve, http.ErrServerClosed)
	return nil
}

// handleTraces serves POST /v1/traces (OTLP/HTTP, protobuf or JSON).
//
// A protobuf body that only feeds metrics (no traces pipeline to hand the
// spans to) is decoded straight into gateway events: building the pdata tree
// would cost twice the decoding, for a tree nobody reads.
func (r *gatewayReceiver) handleTraces(w http.ResponseWriter, req *http.Request) {
	enc, ok := r.readEncoding(w, req, otlpMediaTypes)
	if !ok {
		return
	}
	s := r.getScratch()
	defer r.putScratch(s)
	body, ok := r.readBody(w, req, enc, s)
	if !ok {
		return
	}
	var err error
	if enc == pbContentType && r.nextTraces == nil {
		if err = r.countProto(req.Context(), s, body); err != nil {
			r.reject(req.Context(), w, enc, http.StatusBadRequest, httpMalformed, "malformed OTLP protobuf body: "+err.Error())
			return
		}
	} else if !r.ingestPdata(w, req, enc, body) {
		return
	}
	r.telemetry.ReceiverGatewayRequests.Add(req.Context(), 1, metric.WithAttributeSet(httpAccepted))
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
func (r *gatewayReceiver) ingestPdata(w http.ResponseWriter, req *http.Request, enc string, body []byte) bool {
	otlpReq := ptraceotlp.NewExportRequest()
	var err error
	if enc == pbContentType {
		err = otlpReq.UnmarshalProto(body)
	} else {
		err = otlpReq.UnmarshalJSON(body)
	}
	if err != nil {
		r.reject(req.Context(), w, enc, http.StatusBadRequest, httpMalformed, "malformed OTLP "+encodingName(enc)+" body: "+err.Error())
		return false
	}
	if err := r.ingest(req.Context(), otlpReq.Traces()); err != nil {
		code := http.StatusServiceUnavailable
		if consumererror.IsPermanent(err) {
			code = http.StatusBadRequest
		}
		r.reject(req.Context(), w, enc, code, httpRefused, "traces pipeline refused the spans: "+err.Error())
		return false
	}
	return true
}

// readEncoding checks the method and the Content-Type, answering 405 or 415.
func (r *gatewayReceiver) readEncoding(w http.ResponseWriter, req *http.Request, allowed []string) (string, bool) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		r.reject(req.Context(), w, jsonContentType, http.StatusMethodNotAllowed, httpBadMethod, req.Method+" not allowed on "+req.URL.Path+", use POST")
		return "", false
	}
	ct := req.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || !slices.Contains(allowed, mt) {
		r.reject(req.Context(), w, jsonContentType, http.StatusUnsupportedMediaType, httpUnsupportedMedia,
			"unsupported Content-Type "+strconv.Quote(ct)+" on "+req.URL.Path+", use "+strings.Join(allowed, " or "))
		return "", false
	}
	return mt, true
}

// readBody reads the whole body into s's buffer, which the caller owns until
// it puts s back; one over max_request_body_size gets 413.
func (r *gatewayReceiver) readBody(w http.ResponseWriter, req *http.Request, enc string, s *exportScratch) ([]byte, bool) {
	body, err := readAll(s.body[:0], req.Body, req.ContentLength)
	s.body = body
	_ = req.Body.Close()
	if err == nil {
		return body, true
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		r.reject(req.Context(), w, enc, http.StatusRequestEntityTooLarge, httpTooLarge,
			"request body exceeds max_request_body_size ("+strconv.FormatInt(tooLarge.Limit, 10)+" bytes)")
		return nil, false
	}
	r.reject(req.Context(), w, enc, http.StatusBadRequest, httpMalformed, "reading request body: "+err.Error())
	return nil, false
}

// maxPresize bounds what a declared Content-Length makes readAll allocate up
// front, so a client that announces a huge body and sends little costs
// nothing; bigger bodies grow as they arrive.
const maxPresize = 4 << 20

// readAll appends rd's bytes to dst (io.ReadAll into a reused buffer).
func readAll(dst []byte, rd io.Reader, contentLength int64) ([]byte, error) {
	if want := min(contentLength, maxPresize) + 1; want > 1 && int64(cap(dst)) < want {
		dst = make([]byte, 0, want) // +1: room to see EOF without growing
	}
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := rd.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// decompressError answers failures of confighttp's decompression (a corrupt
// gzip body, or one that inflates past max_request_body_size).
func (r *gatewayReceiver) decompressError(w http.ResponseWriter, req *http.Request, msg string, code int) {
	outcome := httpMalformed
	if code == http.StatusRequestEntityTooLarge {
		outcome = httpTooLarge
	}
	enc := jsonContentType
	if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err == nil && mt == pbContentType {
		enc = pbContentType
	}
	r.reject(req.Context(), w, enc, code, outcome, msg)
}

// reject counts a refused request and answers it with a google.rpc.Status, as
// OTLP/HTTP requires, in the request's encoding.
func (r *gatewayReceiver) reject(ctx context.Context, w http.ResponseWriter, enc string, code int, outcome attribute.Set, msg string) {
	r.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(outcome))
	writeStatus(w, enc, code, msg)
}

func writeStatus(w http.ResponseWriter, enc string, code int, msg string) {
	st := &spb.Status{Code: int32(grpcCodeOf(code)), Message: msg}
	var body []byte
	var err error
	if enc == pbContentType {
		body, err = proto.Marshal(st)
	} else {
		body, err = protojson.Marshal(st)
	}
	if err != nil {
		http.Error(w, msg, code)
		return
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
	case http.StatusServiceUnavailable:
		return codes.Unavailable
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
