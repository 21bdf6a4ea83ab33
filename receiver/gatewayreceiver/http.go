package gatewayreceiver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
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

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/admission"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
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
		mux.Handle(r.health.PushPath(), r.admitPush(r.health.PushHandler()))
	}
	srv, err := cfg.ToServer(ctx, host.GetExtensions(), r.settings.TelemetrySettings, countHTTP2Requests(mux),
		confighttp.WithErrorHandler(r.decompressError))
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
	direct := enc == pbContentType && r.nextTraces == nil
	weight := int64(weightPdataProto)
	switch {
	case direct:
		weight = weightDirectProto
	case enc == jsonContentType:
		weight = weightOTLPJSON
	}
	s, ok := r.readBody(w, req, enc, weight)
	if !ok {
		return
	}
	defer r.putScratch(s)
	body := s.body
	if !direct && !r.chargePdata(w, req, enc, weight, s) {
		return
	}
	var err error
	if direct {
		if err = r.countProto(req.Context(), s, body); errors.Is(err, admission.ErrBusy) {
			r.rejectBusy(req.Context(), w, enc, err)
			return
		} else if err != nil {
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

// Decode weights: what holding and decoding a body costs, per body byte,
// charged against max_request_bytes_in_flight (measured: pdata's protobuf
// unmarshal allocates ~5× the body, its JSON unmarshal ~2.5× (JSON bodies
// are ~2.5× larger for the same spans); the direct protobuf path keeps
// only the body and the events; encoding/json log decoding ~2×).
const (
	weightDirectProto = 1
	weightPdataProto  = 6
	weightOTLPJSON    = 4
	weightLogJSON     = 3
)

// chargePdata checks a body pdata is about to decode, s's: an OTLP JSON
// body's nesting (maxOTLPJSONDepth), and what decoding it would hold,
// estimated from its elements (gateway.OTLPJSONCost, OTLPProtoCost),
// against the weight it was charged per byte. Answered and counted here
// when it may not go on.
func (r *gatewayReceiver) chargePdata(w http.ResponseWriter, req *http.Request, enc string, weight int64, s *exportScratch) bool {
	ctx := req.Context()
	var cost gateway.DecodeCost
	if enc == jsonContentType {
		var err error
		if cost, err = gateway.OTLPJSONCost(s.body, maxOTLPJSONDepth); err != nil {
			r.reject(ctx, w, enc, http.StatusBadRequest, httpMalformed, "malformed OTLP JSON body: "+err.Error())
			return false
		}
	} else {
		cost = gateway.OTLPProtoCost(s.body)
	}
	switch tooLarge, busy := r.chargeDecode(s, cost, weight, encodingName(enc)); {
	case tooLarge != "":
		r.reject(ctx, w, enc, http.StatusRequestEntityTooLarge, httpTooLarge, tooLarge)
		return false
	case busy != nil:
		r.rejectBusy(ctx, w, enc, busy)
		return false
	}
	return true
}

// chargeDecode charges request s what decoding its body into pdata would
// hold (cost), where that is more than weight per body byte (what it was
// charged: a legitimate export costs less, e.g. about 3.5× its body for
// Kong spans in JSON), and returns ErrBusy's error while others hold the
// room (429 / Unavailable). A body that costs more than weight per byte and
// more than all of max_request_bytes_in_flight (a flood of empty elements:
// 20 MiB of empty spans held over 4 GB in pdata) is refused (413 /
// ResourceExhausted, too_large: no wait makes room for it), with the
// message returned, where a lone legitimate export always passes.
func (r *gatewayReceiver) chargeDecode(s *exportScratch, cost gateway.DecodeCost, weight int64, encoding string) (tooLarge string, busy error) {
	extra := cost.Bytes - weight*int64(len(s.body))
	if extra <= 0 {
		return "", nil
	}
	if limit := r.admit.Limit(); limit > 0 && cost.Bytes > limit {
		return "decoding this OTLP " + encoding + " body would hold about " + strconv.FormatInt(cost.Bytes, 10) + " bytes (" +
			strconv.FormatInt(cost.Spans, 10) + " spans, " + strconv.FormatInt(cost.Elements, 10) +
			" elements in all), more than limits.max_request_bytes_in_flight (" + strconv.FormatInt(limit, 10) + "); send smaller batches", nil
	}
	if err := s.charge.Add(extra); err != nil {
		return "", err
	}
	return "", nil
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
func (r *gatewayReceiver) readBody(w http.ResponseWriter, req *http.Request, enc string, weight int64) (*exportScratch, bool) {
	if limit := r.maxBodySize(); req.ContentLength > limit {
		// Refused before a byte is read: a client announcing a terabyte
		// holds nothing until the read timeout.
		_ = req.Body.Close()
		r.reject(req.Context(), w, enc, http.StatusRequestEntityTooLarge, httpTooLarge, oversized(req.ContentLength, limit))
		return nil, false
	}
	charge, err := r.admitRequest(req, weight)
	if err != nil {
		_ = req.Body.Close()
		r.rejectBusy(req.Context(), w, enc, err)
		return nil, false
	}
	body, err := readAll(r.getBody(), admission.NewBody(req.Body, charge), req.ContentLength)
	_ = req.Body.Close()
	if err == nil {
		err = charge.Add(int64(len(body)) * (weight - 1))
	}
	if err == nil {
		s := r.getScratch()
		s.body, s.charge = body, charge
		return s, true
	}
	charge.Release()
	r.putBody(body)
	if errors.Is(err, admission.ErrBusy) {
		r.rejectBusy(req.Context(), w, enc, err)
		return nil, false
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

// admitRequest admits req against max_request_bytes_in_flight before its
// body is read, waiting in turn (at most admission_queue_timeout) until its
// need fits: the declared Content-Length times weight, what reading and
// decoding the body will hold (0 for a body of unknown size). Nothing is
// charged until the body arrives. A client refused for want of room keeps
// its turn by its address. The error wraps admission.ErrBusy: 429 with
// Retry-After.
func (r *gatewayReceiver) admitRequest(req *http.Request, weight int64) (*admission.Charge, error) {
	var need int64
	if req.ContentLength > 0 {
		need = req.ContentLength * weight
	}
	var conn *admission.Conn
	if req.ProtoMajor >= 2 {
		conn, _ = req.Context().Value(connKey{}).(*admission.Conn)
	}
	client, _, _ := net.SplitHostPort(req.RemoteAddr)
	return r.admit.Admit(req.Context(), admission.Request{Need: need, Conn: conn, Client: client})
}

// connKey keys a connection's *admission.Conn in its requests' contexts.
type connKey struct{}

// countHTTP2Requests counts each HTTP/2 request in its connection's
// admission.Conn while it is served: an HTTP/2 request of a connection that
// carries others never waits for admission (see admission.Limiter).
func countHTTP2Requests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.ProtoMajor >= 2 {
			if conn, ok := req.Context().Value(connKey{}).(*admission.Conn); ok {
				conn.Enter()
				defer conn.Leave()
			}
		}
		h.ServeHTTP(w, req)
	})
}

// minBuffer is the smallest body buffer; it grows only as bytes arrive
// (growBody), never to what a Content-Length announces alone, so a client
// that announces a huge body and sends little costs little.
const minBuffer = 16 << 10

// readAll appends rd's bytes to dst (io.ReadAll into a reused buffer). size
// is the body's declared size (Content-Length; 0 or less: unknown), the
// most the buffer grows to while it holds no more (growBody).
func readAll(dst []byte, rd io.Reader, size int64) ([]byte, error) {
	if cap(dst) < minBuffer {
		dst = make([]byte, 0, minBuffer)
	}
	for {
		if len(dst) == cap(dst) {
			dst = growBody(dst, size)
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

// growBody returns full with room for more: twice its capacity, but no
// more than the declared size (and a byte, to read the end without growing
// again) while that is larger than what has arrived. Doubling keeps what a
// body leaves behind (the buffers it outgrew, garbage until the next GC) at
// most its own size; append's growth (1.25× past 256 bytes) left four times
// a 19 MiB body behind, and copied it as often. Never more than twice what
// has arrived: a client that announces a large body and sends little still
// costs little.
func growBody(full []byte, size int64) []byte {
	n := 2 * cap(full)
	if size > int64(len(full)) && size <= int64(n) {
		n = int(size) + 1
	}
	b := make([]byte, len(full), n)
	copy(b, full)
	return b
}

// decompressError answers failures of confighttp's decompression (a corrupt
// gzip body, or one that inflates past max_request_body_size).
func (r *gatewayReceiver) decompressError(w http.ResponseWriter, req *http.Request, msg string, code int) {
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
	r.reject(req.Context(), w, enc, code, outcome, msg)
}

// rejectBusy answers a request refused by max_request_bytes_in_flight: 429
// with Retry-After, which OTLP exporters and the gateways' batch queues
// retry.
func (r *gatewayReceiver) rejectBusy(ctx context.Context, w http.ResponseWriter, enc string, err error) {
	w.Header().Set("Retry-After", admission.RetryAfter)
	r.reject(ctx, w, enc, http.StatusTooManyRequests, httpThrottled, err.Error())
}

// reject counts a refused request and answers it with a google.rpc.Status, as
// OTLP/HTTP requires, in the request's encoding.
func (r *gatewayReceiver) reject(ctx context.Context, w http.ResponseWriter, enc string, code int, outcome attribute.Set, msg string) {
	r.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(outcome))
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
func (r *gatewayReceiver) admitPush(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if limit := r.maxBodySize(); req.ContentLength > limit {
			r.refusePush(w, req, http.StatusRequestEntityTooLarge, pushRejected, oversized(req.ContentLength, limit))
			return
		}
		charge, err := r.admitRequest(req, weightLogJSON)
		if err != nil {
			w.Header().Set("Retry-After", admission.RetryAfter)
			r.refusePush(w, req, http.StatusTooManyRequests, pushThrottled, err.Error())
			return
		}
		defer charge.Release()
		req.Body = admission.NewBody(req.Body, charge)
		h.ServeHTTP(w, req)
	})
}

// refusePush answers a push refused before its body is read, in the push
// endpoint's answer shape, and counts it as outcome.
func (r *gatewayReceiver) refusePush(w http.ResponseWriter, req *http.Request, code int, outcome attribute.Set, msg string) {
	_ = req.Body.Close()
	b, _ := json.Marshal(struct {
		Accepted   int    `json:"accepted"`
		OutOfOrder int    `json:"out_of_order"`
		Error      string `json:"error"`
	}{Error: msg})
	writeBody(w, jsonContentType, code, b)
	r.telemetry.ReceiverGatewayHealthEvents.Add(req.Context(), 1, metric.WithAttributeSet(outcome))
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
func (r *gatewayReceiver) maxBodySize() int64 {
	if hc := r.cfg.Protocols.HTTP.Get(); hc != nil && hc.MaxRequestBodySize > 0 {
		return hc.MaxRequestBodySize
	}
	return defaultMaxRequestBodySize
}
