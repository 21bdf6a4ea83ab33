package gatewayreceiver

import (
	"context"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// The OTLP MetricsService, registered by hand as the TraceService is
// (grpc.go): the message reaches Export as bytes, is admitted and charged
// like a trace export, then decoded into pdata for the gateways' metrics
// homes (metrics_push.go).

const metricsExportMethod = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"

var metricsServiceDesc = grpc.ServiceDesc{
	ServiceName: "opentelemetry.proto.collector.metrics.v1.MetricsService",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Export", Handler: metricsExportHandler}},
	Metadata:    "opentelemetry/proto/collector/metrics/v1/metrics_service.proto",
}

var (
	grpcRefused = attribute.NewSet(attribute.String("transport", "grpc"), attribute.String("outcome", "refused"))
	grpcPartial = attribute.NewSet(attribute.String("transport", "grpc"), attribute.String("outcome", "partially_accepted"))
)

// rawResponse is a response marshalled already (an
// ExportMetricsServiceResponse with its partial success).
type rawResponse struct{ b []byte }

// metricsExportHandler is exportHandler for MetricsService/Export.
func metricsExportHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) { //nolint:revive // gRPC's handler signature
	return receiveAndExport(srv, ctx, dec, interceptor, metricsExportMethod, func(g *grpcServer, ctx context.Context, raw *rawRequest) (any, error) {
		return g.exportMetrics(ctx, raw)
	})
}

func (g *grpcServer) exportMetrics(ctx context.Context, raw *rawRequest) (*rawResponse, error) {
	in, s := g.ingest, raw.s
	if in.pushed.next == nil {
		g.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(grpcRefused))
		return nil, status.Error(codes.Unimplemented, noMetricsPipeline)
	}
	if err := g.admitCall(ctx, s, weightPdataProto); err != nil {
		return nil, err
	}
	switch tooLarge, busy := in.chargeDecode(s, gateway.OTLPMetricsProtoCost(s.body), weightPdataProto, "protobuf"); {
	case tooLarge != "":
		return nil, status.Error(codes.ResourceExhausted, tooLarge) // counted too_large by refusalCounter
	case busy != nil:
		g.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(grpcThrottled))
		return nil, busyStatus(busy.Error())
	}
	req := pmetricotlp.NewExportRequest()
	if err := req.UnmarshalProto(s.body); err != nil {
		g.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(grpcMalformed))
		return nil, status.Error(codes.InvalidArgument, "malformed OTLP protobuf metrics message: "+err.Error())
	}
	res, err := in.pushed.metrics(ctx, req.Metrics(), clientOf(ctx))
	return g.answerMetrics(ctx, res, err)
}

// answerMetrics is handleMetrics' answer in gRPC's terms: InvalidArgument
// when every point was of no known gateway, Unavailable (InvalidArgument
// when permanent) when the pipeline refused the metrics, else the response
// with its partial success.
func (g *grpcServer) answerMetrics(ctx context.Context, res pushResult, err error) (*rawResponse, error) {
	switch {
	case res.unknownOnly:
		g.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(grpcMalformed))
		return nil, status.Error(codes.InvalidArgument, cutMessage(res.message))
	case err != nil:
		g.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(grpcRefused))
		code := codes.Unavailable
		if consumererror.IsPermanent(err) {
			code = codes.InvalidArgument
		}
		return nil, status.Error(code, "metrics pipeline refused the metrics: "+err.Error())
	}
	resp := pmetricotlp.NewExportResponse()
	outcome := grpcAccepted
	if res.rejected > 0 {
		resp.PartialSuccess().SetRejectedDataPoints(res.rejected)
		resp.PartialSuccess().SetErrorMessage(cutMessage(res.message))
		outcome = grpcPartial
	}
	b, err := resp.MarshalProto()
	if err != nil {
		return nil, status.Error(codes.Internal, "marshal response: "+err.Error())
	}
	g.telemetry.ReceiverGatewayRequests.Add(ctx, 1, metric.WithAttributeSet(outcome))
	return &rawResponse{b: b}, nil
}
