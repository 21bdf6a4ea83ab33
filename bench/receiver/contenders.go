package receiver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/connector/spanmetricsconnector"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver"
)

// Contender keys, the rows of the report.
const (
	Unmarshal = "unmarshal" // ptraceotlp.ExportRequest.UnmarshalProto alone, no HTTP
	Walk      = "protowire" // every span, attribute key and value visited in the protobuf bytes, nothing built, no HTTP
	Transport = "transport" // loopback POST to a net/http handler that only reads the body
	OTLPNop   = "otlp-nop"  // otlpreceiver → a nop traces consumer: confighttp + unmarshal floor
	OursNop   = "ours-nop"  // gateway receiver in a traces pipeline only (nop consumer): its handler's floor
	OursOTel  = "ours-otel" // gateway receiver, default otel profile
	OursKong  = "ours-kong" // gateway receiver, kong profile
	Contrib   = "contrib"   // otlpreceiver → spanmetricsconnector
	FlushEach = time.Second // flush_interval / metrics_flush_interval of both pipelines
)

// Keys lists the contenders in report order.
var Keys = []string{Unmarshal, Walk, Transport, OTLPNop, OursNop, OursOTel, OursKong, Contrib}

// Path is one way of taking an export body in.
type Path interface {
	// Export takes one OTLP/HTTP protobuf body in, synchronously.
	Export(body []byte) error
	// Close stops the path; the sink has then seen every flushed point
	// that will ever come (Counted).
	Close() error
	// Counted is the number of requests the delta output reported so far
	// (summed over the request counter's points); -1 when the path has no
	// output.
	Counted() int64
}

// Start builds the contender named key.
func Start(key string) (Path, error) {
	switch key {
	case Unmarshal:
		return unmarshalPath{}, nil
	case Walk:
		return &walkPath{}, nil
	case Transport:
		return startTransport()
	case OTLPNop:
		return startOTLP(consumertest.NewNop())
	case OursNop:
		return startOursTraces()
	case OursOTel:
		return startOurs("otel")
	case OursKong:
		return startOurs("kong")
	case Contrib:
		return startContrib()
	}
	return nil, fmt.Errorf("unknown contender %q", key)
}

type unmarshalPath struct{}

func (unmarshalPath) Export(body []byte) error {
	req := ptraceotlp.NewExportRequest()
	return req.UnmarshalProto(body)
}
func (unmarshalPath) Close() error   { return nil }
func (unmarshalPath) Counted() int64 { return -1 }

// client posts bodies over one keep-alive loopback connection and reads the
// whole answer.
type client struct {
	url string
	hc  *http.Client
}

func newClient(addr string) *client {
	return &client{url: "http://" + addr + "/v1/traces", hc: &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true},
		Timeout:   30 * time.Second,
	}}
}

func (c *client) Export(body []byte) error {
	req, err := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	err = errors.Join(err, resp.Body.Close())
	if resp.StatusCode != http.StatusOK {
		return errors.Join(err, fmt.Errorf("POST /v1/traces: %s", resp.Status))
	}
	return err
}

func (c *client) close() { c.hc.CloseIdleConnections() }

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// transportPath is the HTTP floor: a plain net/http server whose handler
// reads the body and answers an empty ExportTraceServiceResponse.
type transportPath struct {
	*client
	srv *http.Server
}

func startTransport() (Path, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &transportPath{client: newClient(ln.Addr().String()), srv: srv}, nil
}

func (p *transportPath) Close() error {
	p.close()
	return p.srv.Shutdown(context.Background())
}
func (p *transportPath) Counted() int64 { return -1 }

// sink is the metrics pipeline's end: it sums the int points of one sum
// metric whose attribute key has value (every point when key is empty).
type sink struct {
	metric, key, value string
	counted            atomic.Int64
	points             atomic.Int64
}

func (s *sink) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (s *sink) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	var counted, points int64
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				switch m.Type() {
				case pmetric.MetricTypeSum:
					points += int64(m.Sum().DataPoints().Len())
				case pmetric.MetricTypeHistogram:
					points += int64(m.Histogram().DataPoints().Len())
				}
				if m.Name() != s.metric || m.Type() != pmetric.MetricTypeSum {
					continue
				}
				dps := m.Sum().DataPoints()
				for d := 0; d < dps.Len(); d++ {
					dp := dps.At(d)
					if s.key != "" {
						if v, ok := dp.Attributes().Get(s.key); !ok || v.Str() != s.value {
							continue
						}
					}
					counted += dp.IntValue()
				}
			}
		}
	}
	s.counted.Add(counted)
	s.points.Add(points)
	return nil
}

// oursPath is the gateway receiver built by its factory, metrics pipeline
// only, HTTP server on a loopback port; the workload is POSTed to it.
type oursPath struct {
	*client
	rcv  component.Component
	sink *sink
}

func startOurs(profile string) (Path, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	f := gatewayreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*gatewayreceiver.Config)
	cfg.Protocols.HTTP.Get().NetAddr.Endpoint = addr
	cfg.Protocols.GRPC = configoptional.None[configgrpc.ServerConfig]()
	cfg.Profile = profile
	cfg.FlushInterval = FlushEach
	cfg.Limits.MaxTuples = 0 // no bound, as the contenders have none
	s := &sink{metric: "gateway.requests"}
	if profile == "kong" {
		s.metric = "kong_http_requests_total"
	}
	r, err := f.CreateMetrics(context.Background(), receivertest.NewNopSettings(f.Type()), cfg, s)
	if err != nil {
		return nil, err
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		return nil, err
	}
	return &oursPath{client: newClient(addr), rcv: r, sink: s}, nil
}

// startOursTraces is the gateway receiver in a traces pipeline only: no
// metrics pipeline, so it counts nothing and hands the spans to a nop
// consumer (the floor of its handler).
func startOursTraces() (Path, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	f := gatewayreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*gatewayreceiver.Config)
	cfg.Protocols.HTTP.Get().NetAddr.Endpoint = addr
	cfg.Protocols.GRPC = configoptional.None[configgrpc.ServerConfig]()
	r, err := f.CreateTraces(context.Background(), receivertest.NewNopSettings(f.Type()), cfg, consumertest.NewNop())
	if err != nil {
		return nil, err
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		return nil, err
	}
	return &otlpPath{client: newClient(addr), rcv: r}, nil
}

// Close shuts the receiver down, which flushes the last window.
func (p *oursPath) Close() error {
	p.close()
	return p.rcv.Shutdown(context.Background())
}
func (p *oursPath) Counted() int64 { return p.sink.counted.Load() }

// contribPath is otlpreceiver v0.165.0 (HTTP only) feeding
// spanmetricsconnector v0.165.1 with delta temporality and the dimensions
// that match ours (route, method, status code), both built by their
// factories.
type contribPath struct {
	*client
	rcv, conn component.Component
	sink      *sink
}

func startContrib() (Path, error) {
	ctx := context.Background()
	s := &sink{metric: "traces.span.metrics.calls", key: "span.name", value: "kong"}

	cf := spanmetricsconnector.NewFactory()
	ccfg := cf.CreateDefaultConfig().(*spanmetricsconnector.Config)
	ccfg.AggregationTemporality = "AGGREGATION_TEMPORALITY_DELTA"
	ccfg.MetricsFlushInterval = FlushEach
	ccfg.Dimensions = []spanmetricsconnector.Dimension{{Name: "http.route"}, {Name: "http.method"}, {Name: "http.status_code"}}
	conn, err := cf.CreateTracesToMetrics(ctx, connectortest.NewNopSettings(cf.Type()), ccfg, s)
	if err != nil {
		return nil, err
	}

	if err := conn.Start(ctx, componenttest.NewNopHost()); err != nil {
		return nil, err
	}
	rcv, err := startOTLP(conn)
	if err != nil {
		return nil, errors.Join(err, conn.Shutdown(ctx))
	}
	return &contribPath{client: rcv.client, rcv: rcv.rcv, conn: conn, sink: s}, nil
}

// otlpPath is otlpreceiver v0.165.0, HTTP only, built by its factory.
type otlpPath struct {
	*client
	rcv component.Component
}

func startOTLP(next consumer.Traces) (*otlpPath, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	rf := otlpreceiver.NewFactory()
	rcfg := rf.CreateDefaultConfig().(*otlpreceiver.Config)
	rcfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = addr
	rcfg.Protocols.GRPC = configoptional.None[configgrpc.ServerConfig]()
	rcv, err := rf.CreateTraces(context.Background(), receivertest.NewNopSettings(rf.Type()), rcfg, next)
	if err != nil {
		return nil, err
	}
	if err := rcv.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		return nil, err
	}
	return &otlpPath{client: newClient(addr), rcv: rcv}, nil
}

func (p *otlpPath) Close() error {
	p.close()
	return p.rcv.Shutdown(context.Background())
}
func (p *otlpPath) Counted() int64 { return -1 }

func (p *contribPath) Close() error {
	p.close()
	ctx := context.Background()
	return errors.Join(p.rcv.Shutdown(ctx), p.conn.Shutdown(ctx))
}
func (p *contribPath) Counted() int64 { return p.sink.counted.Load() }

// Drain waits until the path's delta output has reported want requests: the
// spanmetrics connector does not flush on shutdown, so its last window is
// awaited before Close. It gives up after timeout.
func Drain(p Path, want int64, timeout time.Duration) int64 {
	deadline := time.Now().Add(timeout)
	for p.Counted() < want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	return p.Counted()
}
