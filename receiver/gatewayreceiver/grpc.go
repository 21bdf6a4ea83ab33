package gatewayreceiver

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var grpcAccepted = attribute.NewSet(attribute.String("transport", "grpc"), attribute.String("outcome", "accepted"))

func (r *gatewayReceiver) startGRPC(ctx context.Context, host component.Host) error {
	if !r.cfg.Protocols.GRPC.HasValue() {
		return nil
	}
	cfg := r.cfg.Protocols.GRPC.Get()
	srv, err := cfg.ToServer(ctx, host.GetExtensions(), r.settings.TelemetrySettings)
	if err != nil {
		return err
	}
	ptraceotlp.RegisterGRPCServer(srv, &traceService{r: r})
	ln, err := cfg.NetAddr.Listen(ctx)
	if err != nil {
		return err
	}
	r.serverGRPC = srv
	r.serve(host, "gRPC", ln, srv.Serve, grpc.ErrServerStopped)
	return nil
}

// traceService is the OTLP TraceService of the receiver. Malformed messages
// and oversized ones are refused by gRPC itself (InvalidArgument,
// ResourceExhausted) before they reach Export.
type traceService struct {
	ptraceotlp.UnimplementedGRPCServer
	r *gatewayReceiver
}

func (s *traceService) Export(ctx context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	if err := s.r.ingest(ctx, req.Traces()); err != nil {
		code := codes.Unavailable
		if consumererror.IsPermanent(err) {
			code = codes.InvalidArgument
		}
		return ptraceotlp.NewExportResponse(), status.Error(code, "traces pipeline refused the spans: "+err.Error())
	}
	s.r.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(grpcAccepted))
	return ptraceotlp.NewExportResponse(), nil
}
