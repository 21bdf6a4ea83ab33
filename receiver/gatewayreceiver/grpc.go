package gatewayreceiver

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configauth"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/extension/extensionauth"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/admission"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
)

var (
	grpcAccepted  = attribute.NewSet(attribute.String("transport", "grpc"), attribute.String("outcome", "accepted"))
	grpcMalformed = attribute.NewSet(attribute.String("transport", "grpc"), attribute.String("outcome", "malformed"))
	grpcThrottled = attribute.NewSet(attribute.String("transport", "grpc"), attribute.String("outcome", "throttled"))
	grpcTooLarge  = attribute.NewSet(attribute.String("transport", "grpc"), attribute.String("outcome", "too_large"))
	grpcStalled   = attribute.NewSet(attribute.String("transport", "grpc"), attribute.String("outcome", "stalled"))
	grpcUnauthed  = attribute.NewSet(attribute.String("transport", "grpc"), attribute.String("outcome", "unauthenticated"))
)

// grpcServer is the OTLP/gRPC transport: it admits a call before its
// message is read (admitStream), reads the message as bytes, and hands it
// to ingest.
type grpcServer struct {
	cfg       *configgrpc.ServerConfig
	ingest    *ingest
	telemetry *metadata.TelemetryBuilder
	logger    *zap.Logger
	// receiving bounds the calls whose message is still arriving and ends
	// the stalled ones, after receiveTimeout (grpc_receive_timeout);
	// stopReap stops its reaper.
	receiving      *admission.Receiving
	receiveTimeout time.Duration
	stopReap       chan struct{}
	// auth is the server's authenticator (auth:), run by admitStream
	// before a call's message is read; nil without one.
	auth extensionauth.Server
	srv  *grpc.Server
}

func (g *grpcServer) start(ctx context.Context, host component.Host, set receiver.Settings, servers *sync.WaitGroup) error {
	sc := *g.cfg
	if g.cfg.Auth.HasValue() {
		// The server's authenticator runs in admitStream, on the call's
		// headers, before gRPC reads a byte of its message: configgrpc's
		// runs as an interceptor, once the whole message has arrived, so
		// a client without credentials could hold receiving slots (and
		// was counted nowhere).
		auth, err := g.cfg.Auth.Get().GetServerAuthenticator(ctx, host.GetExtensions())
		if err != nil {
			return err
		}
		g.auth = auth
		sc.Auth = configoptional.None[configauth.Config]()
	}
	srv, err := sc.ToServer(ctx, host.GetExtensions(), set.TelemetrySettings,
		configgrpc.WithGrpcServerOption(grpc.ForceServerCodecV2(rawCodec{delegate: encoding.GetCodecV2("proto")})),
		configgrpc.WithGrpcServerOption(grpc.InTapHandle(g.admitStream)),
		// gRPC's default is 16 MiB of metadata per call, held while the
		// call lasts; the HTTP server's is 1 MiB (net/http).
		configgrpc.WithGrpcServerOption(grpc.MaxHeaderListSize(maxGRPCHeaderBytes)),
		configgrpc.WithGrpcServerOption(grpc.ConnectionTimeout(grpcHandshakeTimeout)),
		configgrpc.WithGrpcServerOption(grpc.StatsHandler(refusalCounter{g})))
	if err != nil {
		return err
	}
	srv.RegisterService(&traceServiceDesc, g)
	srv.RegisterService(&metricsServiceDesc, g)
	ln, err := g.cfg.NetAddr.Listen(ctx)
	if err != nil {
		return err
	}
	g.srv = srv
	serve(servers, set.Logger, host, "gRPC", ln, srv.Serve, grpc.ErrServerStopped)
	if g.receiveTimeout > 0 {
		g.stopReap = make(chan struct{})
		servers.Add(1)
		go g.reapLoop(servers, g.stopReap)
	}
	return nil
}

// shutdown ends the calls still receiving their message (their clients
// retry: a stalled one would hold the graceful stop), stops the server
// gracefully (calls in progress finish), or at once when ctx ends first,
// and stops the reaper.
func (g *grpcServer) shutdown(ctx context.Context) {
	if g.srv != nil {
		g.receiving.Close()
		stopped := make(chan struct{})
		go func() {
			g.srv.GracefulStop()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-ctx.Done():
			g.srv.Stop()
			<-stopped
		}
	}
	if g.stopReap != nil {
		close(g.stopReap)
		g.stopReap = nil
	}
}

// receivingSlots is how many gRPC calls may receive their message at once,
// which bounds what gRPC holds for incomplete messages to slots ×
// max_recv_msg_size: max_request_bytes_in_flight / max_recv_msg_size, but
// at least minReceivingSlots. A call is "receiving" from its headers until
// its handler has read the message, which under load includes waiting for a
// core: 64 clients exporting at once on 2 cores (~1M spans/s) had 0.1 % of
// their calls refused with 16 slots (64 MiB / 4 MiB), 0.015 % with 32, none
// with 64; a client stalling 4 MiB calls took the collector to ~200 MB of
// RSS with 16, ~330 MB with 32, ~520 MB with 64. 32 keeps both small. 0 (no
// bound) when max_request_bytes_in_flight is off.
func receivingSlots(cfg *Config) int {
	if cfg.Limits.MaxRequestBytesInFlight <= 0 {
		return 0
	}
	maxRecv := int64(4 << 20) // gRPC's default
	if g := cfg.Protocols.GRPC; g.HasValue() && g.Get().MaxRecvMsgSizeMiB > 0 {
		maxRecv = int64(g.Get().MaxRecvMsgSizeMiB) << 20
	}
	return int(max(minReceivingSlots, cfg.Limits.MaxRequestBytesInFlight/maxRecv))
}

// reapLoop ends, every second, the gRPC calls whose message has not arrived
// within grpc_receive_timeout.
func (g *grpcServer) reapLoop(servers *sync.WaitGroup, stop <-chan struct{}) {
	defer servers.Done()
	t := time.NewTicker(reapEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if n := g.receiving.Reap(); n > 0 {
				// Counted stalled where their read fails (exportHandler).
				g.logger.Warn("Ended gRPC calls whose message did not arrive within grpc_receive_timeout (DEADLINE_EXCEEDED)",
					zap.Int("calls", n), zap.Duration("grpc_receive_timeout", g.receiveTimeout))
			}
		}
	}
}

// connShareDiv: one connection holds at most 1/connShareDiv of the
// receiving slots (16 of the default 32), so one client, stalling calls or
// opening them faster than they are read, cannot refuse every other
// client's. An OTLP exporter sends over one connection, 10 calls at most at
// once at its default sending_queue.num_consumers: within it, with room.
const connShareDiv = 2

// minReceivingSlots: see receivingSlots.
const minReceivingSlots = 32

// maxGRPCHeaderBytes bounds a call's metadata, as http.DefaultMaxHeaderBytes
// bounds an HTTP request's headers.
const maxGRPCHeaderBytes = 1 << 20

// grpcHandshakeTimeout closes a connection that has not completed its TLS
// and HTTP/2 handshakes (the client preface and settings) this long after
// it was accepted, as protocols.http's read_header_timeout (10 s) closes
// one that has sent no request headers; gRPC's own is 120 s. A variable
// for tests.
var grpcHandshakeTimeout = defaultReadHeaderTimeout

// reapEvery is how often stalled calls are looked for: a call is ended
// between grpc_receive_timeout and a second more after its headers.
var reapEvery = time.Second

// The OTLP TraceService, registered by hand so that a request's bytes reach
// Export undecoded: like the HTTP path, a receiver in no traces pipeline
// decodes them straight into events (no pdata), and one in a traces pipeline
// unmarshals them into pdata to pass them on. Messages over
// max_recv_msg_size_mib and undecompressable ones are refused by gRPC itself
// (ResourceExhausted, Internal) before they reach Export.

// refusalCounter counts the calls gRPC itself refuses before they reach
// Export, which no handler of ours sees: a message over
// max_recv_msg_size_mib, or one that inflates past it (ResourceExhausted:
// too_large), or one that cannot be decompressed (Internal: malformed).
// Export answers ResourceExhausted itself only for a message too costly to
// decode into pdata (chargeDecode), too_large as well, and leaves its count
// here; it never answers Internal.
type refusalCounter struct{ g *grpcServer }

func (refusalCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (refusalCounter) HandleConn(context.Context, stats.ConnStats)                     {}

// TagConn marks the connection whose calls share one connShareDiv of the
// receiving slots (admission.TagConn).
func (refusalCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return admission.TagConn(ctx)
}

func (c refusalCounter) HandleRPC(ctx context.Context, s stats.RPCStats) {
	end, ok := s.(*stats.End)
	if !ok || end.Error == nil {
		return
	}
	switch status.Code(end.Error) {
	case codes.ResourceExhausted:
		c.g.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(grpcTooLarge))
	case codes.Internal:
		c.g.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(grpcMalformed))
	}
}

const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

var traceServiceDesc = grpc.ServiceDesc{
	ServiceName: "opentelemetry.proto.collector.trace.v1.TraceService",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Export", Handler: exportHandler}},
	Metadata:    "opentelemetry/proto/collector/trace/v1/trace_service.proto",
}

// rawRequest is an ExportTraceServiceRequest kept as bytes, in a pooled
// scratch owned by the call until exportHandler returns.
type rawRequest struct {
	in *ingest
	s  *exportScratch
}

// exportResponse is the empty ExportTraceServiceResponse (zero bytes).
type exportResponse struct{}

// rawCodec moves rawRequest bytes and exportResponse; anything else (the
// server's own messages) goes to the proto codec.
type rawCodec struct{ delegate encoding.CodecV2 }

func (c rawCodec) Name() string { return "proto" }

func (c rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch r := v.(type) {
	case *exportResponse:
		return nil, nil
	case *rawResponse:
		return mem.BufferSlice{mem.SliceBuffer(r.b)}, nil
	}
	return c.delegate.Marshal(v)
}

func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	req, ok := v.(*rawRequest)
	if !ok {
		return c.delegate.Unmarshal(data, v)
	}
	n := data.Len()
	body := req.in.getBody()
	if cap(body) < n {
		req.in.putBody(body)
		body = make([]byte, n)
	}
	req.s.body = body[:n]
	data.CopyTo(req.s.body)
	return nil
}

// exportHandler decodes the call into a rawRequest and runs Export through
// the server's interceptors (auth among them), so nothing is counted before
// they let the call through.
func exportHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) { //nolint:revive // gRPC's handler signature
	return receiveAndExport(srv, ctx, dec, interceptor, exportMethod, func(g *grpcServer, ctx context.Context, raw *rawRequest) (any, error) {
		return g.export(ctx, raw)
	})
}

// receiveAndExport is a unary Export handler (TraceService's or
// MetricsService's): it reads the call into a rawRequest on a pooled
// scratch, then runs export through the server's interceptors as method.
func receiveAndExport(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor, method string,
	export func(*grpcServer, context.Context, *rawRequest) (any, error)) (any, error) { //nolint:revive // gRPC's handler arguments
	g := srv.(*grpcServer)
	s := g.ingest.getScratch()
	defer g.ingest.putScratch(s)
	raw := &rawRequest{in: g.ingest, s: s}
	if err := g.receive(ctx, dec, raw); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return export(g, ctx, raw)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: method}
	return interceptor(ctx, raw, info, func(ctx context.Context, req any) (any, error) {
		return export(g, ctx, req.(*rawRequest))
	})
}

// receive reads the call's message into raw. The message has arrived (or
// never will): its receiving slot is free. A read the receiver ended is
// answered by gRPC (admission.Receiving), and counted here, once: a call
// ended while its whole message waited may still have read it, and is then
// served (and counted) as usual.
func (g *grpcServer) receive(ctx context.Context, dec func(any) error, raw *rawRequest) error {
	err := dec(raw)
	call := admission.CallOf(ctx)
	call.Leave()
	if err != nil && call.Stalled() {
		g.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(grpcStalled))
	}
	return err
}

// admitStream refuses a new call before its message is read while the
// admission queue in front of max_request_bytes_in_flight is full (or, with
// no queue, the bound is used up), or while every receiving slot is
// taken by a call younger than a second (Unavailable: OTLP exporters retry
// it), or when the server's authenticator (auth:) refuses its headers
// (Unauthenticated, as configgrpc answers); otherwise the call takes a
// receiving slot, which bounds what gRPC holds for it until its message has
// arrived (admission.Receiving). The call's context carries what the
// authenticator found (client.Info), as configgrpc's interceptor passes it.
//
// gRPC runs it holding the connection's lock: an authenticator that blocks
// (fetching keys from an identity provider) delays that connection's other
// calls until it returns.
func (g *grpcServer) admitStream(ctx context.Context, info *tap.Info) (context.Context, error) {
	if g.ingest.admit.QueueFull() {
		g.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(grpcThrottled))
		return ctx, busyStatus("every place of the admission queue (limits.admission_queue_size) is taken, or the calls waiting " +
			"in it hold limits.max_request_bytes_in_flight; retry later")
	}
	if info.FullMethodName != exportMethod && info.FullMethodName != metricsExportMethod {
		return ctx, nil // refused by gRPC before anything is read
	}
	if g.auth != nil {
		authed, err := g.auth.Authenticate(ctx, info.Header)
		if err != nil {
			g.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(grpcUnauthed))
			if s, ok := status.FromError(err); ok {
				return ctx, s.Err()
			}
			return ctx, status.Error(codes.Unauthenticated, err.Error())
		}
		ctx = authed
	}
	// A call this one sheds is counted where its read fails (exportHandler).
	call, _, err := g.receiving.Enter(ctx)
	if err != nil {
		g.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(grpcThrottled))
		switch {
		case errors.Is(err, admission.ErrBusy):
			err = errors.New("every one of the " + strconv.Itoa(g.receiving.Slots()) +
				" receiving slots is taken by a call whose message is still arriving; retry later")
		case errors.Is(err, admission.ErrConnBusy):
			err = errors.New("this connection holds " + strconv.Itoa(g.receiving.Share()) + " of the " +
				strconv.Itoa(g.receiving.Slots()) + " receiving slots, the most one connection may, with calls whose message is still arriving; retry later")
		}
		return ctx, status.Error(codes.Unavailable, err.Error())
	}
	return call, nil
}

func (g *grpcServer) export(ctx context.Context, raw *rawRequest) (*exportResponse, error) {
	in, s := g.ingest, raw.s
	weight := int64(weightDirectProto)
	if in.nextTraces != nil {
		weight = weightPdataProto
	}
	if err := g.admitCall(ctx, s, weight); err != nil {
		return nil, err
	}
	if in.nextTraces == nil {
		if err := in.proto(ctx, s, s.body); errors.Is(err, admission.ErrBusy) {
			g.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(grpcThrottled))
			return nil, busyStatus(err.Error())
		} else if err != nil {
			g.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(grpcMalformed))
			return nil, status.Error(codes.InvalidArgument, "malformed OTLP protobuf message: "+err.Error())
		}
	} else {
		switch tooLarge, busy := in.chargeDecode(s, gateway.OTLPProtoCost(s.body), weight, "protobuf"); {
		case tooLarge != "":
			return nil, status.Error(codes.ResourceExhausted, tooLarge) // counted too_large by refusalCounter
		case busy != nil:
			g.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(grpcThrottled))
			return nil, busyStatus(busy.Error())
		}
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(s.body); err != nil {
			g.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(grpcMalformed))
			return nil, status.Error(codes.InvalidArgument, "malformed OTLP protobuf message: "+err.Error())
		}
		if err := in.traces(ctx, req.Traces()); err != nil {
			code := codes.Unavailable
			if consumererror.IsPermanent(err) {
				code = codes.InvalidArgument
			}
			return nil, status.Error(code, "traces pipeline refused the spans: "+err.Error())
		}
	}
	g.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(grpcAccepted))
	return &exportResponse{}, nil
}

// admitCall admits a call whose message has arrived (gRPC reads it before
// a handler can see its size): it waits in turn holding it, which the queue
// bounds, and is charged weight per byte. The error is the call's answer.
func (g *grpcServer) admitCall(ctx context.Context, s *exportScratch, weight int64) error {
	need := int64(len(s.body)) * weight
	charge, err := g.ingest.admit.Admit(ctx, admission.Request{Need: need, Holding: int64(len(s.body)), Client: clientOf(ctx)})
	if err == nil {
		s.charge = charge
		err = charge.Add(need)
	}
	if err != nil {
		g.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(grpcThrottled))
		return busyStatus(err.Error())
	}
	return nil
}

// busyStatus is the answer of a call refused for room in
// max_request_bytes_in_flight: Unavailable, which the OTLP specification
// has servers answer when they cannot keep up (clients retry it), with
// RetryInfo saying when, as HTTP's Retry-After does (the collector's OTLP
// exporter waits that long instead of its own backoff).
func busyStatus(msg string) error {
	st := status.New(codes.Unavailable, msg)
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(admission.RetryDelay)}); err == nil {
		st = d
	}
	return st.Err()
}

// clientOf is the address (IP) of the call's client, by which a client
// refused for want of room keeps its turn (admission.Request.Client).
func clientOf(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	if a, ok := p.Addr.(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, _ := net.SplitHostPort(p.Addr.String())
	return host
}
