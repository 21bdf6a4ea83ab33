package health

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver"
)

// Options configure one pipeline.
type Options struct {
	KongURL        string
	PollInterval   time.Duration // health.kong[0].interval (0: the default)
	ReportInterval time.Duration // health.report_interval
	// The poller's settings; 0 leaves each at its default.
	MaxConcurrency int
	PageSize       int
	// RequestRate is request_rate (0: spread over the interval). The
	// collector-side benchmarks set a rate no poll reaches, so a poll runs
	// as fast as max_concurrency lets it: they measure the receiver, not
	// the pacing.
	RequestRate float64
	// Exporter puts the promstream exporter behind the receiver; without it
	// the receiver's batches are counted and dropped.
	Exporter bool
}

// unpaced is a request_rate no poll reaches.
const unpaced = 1e6

// Pipeline is the gateway receiver (health part, kong profile) feeding the
// promstream exporter, both built by their factories from config, as the
// distribution builds them. A counting consumer sits between them.
type Pipeline struct {
	MetricsAddr string // the exporter's /metrics, when Options.Exporter

	tel  *componenttest.Telemetry
	recv receiver.Metrics
	exp  exporter.Metrics

	mu        sync.Mutex
	cond      *sync.Cond
	batches   int // ConsumeMetrics calls seen
	snapshots int // batches that carried the whole table (80k points)
	points    atomic.Int64
	wholeSize int
}

// receiverConfig is what a user would write under receivers.gateway.
func receiverConfig(o Options, httpAddr string) map[string]any {
	poller := map[string]any{"endpoint": o.KongURL, "instance": "kong-0", "timeout": "10s"}
	for k, v := range map[string]int{"max_concurrency": o.MaxConcurrency, "page_size": o.PageSize} {
		if v > 0 {
			poller[k] = v
		}
	}
	if o.PollInterval > 0 {
		poller["interval"] = o.PollInterval.String()
	}
	if o.RequestRate > 0 {
		poller["request_rate"] = o.RequestRate
	}
	return map[string]any{
		"protocols":      map[string]any{"grpc": map[string]any{"enabled": false}, "http": map[string]any{"endpoint": httpAddr}},
		"flush_interval": "1h", // no traffic in this benchmark; keep the traffic flush out of the figures
		"profile":        "kong",
		"health": map[string]any{
			"report_interval": o.ReportInterval.String(),
			"stale_after":     "24h",
			"push":            map[string]any{"enabled": false},
			"kong":            []any{poller},
		},
	}
}

// StartPipeline starts the exporter (if wanted), then the receiver; the
// receiver polls at once.
func StartPipeline(o Options) (*Pipeline, error) {
	ctx := context.Background()
	p := &Pipeline{tel: componenttest.NewTelemetry(), wholeSize: Upstreams * TargetsPer * 4}
	p.cond = sync.NewCond(&p.mu)
	var next consumer.Metrics
	if o.Exporter {
		ef := promstreamexporter.NewFactory()
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		ecfg := ef.CreateDefaultConfig().(*promstreamexporter.Config)
		ecfg.ServerConfig.NetAddr.Endpoint = addr
		ecfg.MetricExpiration = 24 * time.Hour
		ecfg.WithoutScopeInfo = true
		if err := ecfg.Validate(); err != nil {
			return nil, err
		}
		exp, err := ef.CreateMetrics(ctx, exportertest.NewNopSettings(ef.Type()), ecfg)
		if err != nil {
			return nil, err
		}
		if err := exp.Start(ctx, componenttest.NewNopHost()); err != nil {
			return nil, errors.Join(err, exp.Shutdown(ctx))
		}
		p.exp, p.MetricsAddr = exp, addr
	}
	next, _ = consumer.NewMetrics(p.consume)

	rf := gatewayreceiver.NewFactory()
	rcfg := rf.CreateDefaultConfig()
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, errors.Join(err, p.Close())
	}
	if err := confmap.NewFromStringMap(receiverConfig(o, httpAddr)).Unmarshal(rcfg); err != nil {
		return nil, errors.Join(err, p.Close())
	}
	if err := rcfg.(interface{ Validate() error }).Validate(); err != nil {
		return nil, errors.Join(err, p.Close())
	}
	set := receivertest.NewNopSettings(rf.Type())
	set.TelemetrySettings = p.tel.NewTelemetrySettings()
	recv, err := rf.CreateMetrics(ctx, set, rcfg, next)
	if err != nil {
		return nil, errors.Join(err, p.Close())
	}
	if err := recv.Start(ctx, componenttest.NewNopHost()); err != nil {
		return nil, errors.Join(err, recv.Shutdown(ctx), p.Close())
	}
	p.recv = recv
	return p, nil
}

// consume passes a batch on to the exporter and counts it; a batch of the
// whole table's size is a full snapshot (during the first poll changes come
// one upstream at a time, so a change batch never reaches that size here).
func (p *Pipeline) consume(ctx context.Context, md pmetric.Metrics) error {
	var err error
	if p.exp != nil {
		err = p.exp.ConsumeMetrics(ctx, md)
	}
	n := md.DataPointCount()
	p.points.Add(int64(n))
	p.mu.Lock()
	p.batches++
	if n == p.wholeSize {
		p.snapshots++
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	return err
}

// WaitSnapshots blocks until at least n full snapshots have been consumed.
func (p *Pipeline) WaitSnapshots(n int, timeout time.Duration) error {
	deadline := time.AfterFunc(timeout, func() { p.mu.Lock(); p.cond.Broadcast(); p.mu.Unlock() })
	defer deadline.Stop()
	start := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.snapshots < n {
		if time.Since(start) > timeout {
			return errors.New("timed out waiting for a full snapshot")
		}
		p.cond.Wait()
	}
	return nil
}

// Snapshots is the number of full snapshots consumed so far.
func (p *Pipeline) Snapshots() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snapshots
}

// PollStats is the receiver's own poll telemetry.
type PollStats struct {
	Polls    int64         // successful polls
	Failed   int64         // polls with another outcome
	Duration time.Duration // sum of otelcol_receiver_gateway_health_poll_duration
}

// Polls reads the receiver's poll telemetry (one collection of its
// componenttest meter provider: a few instruments, microseconds).
func (p *Pipeline) Polls() (PollStats, error) {
	var s PollStats
	m, err := p.tel.GetMetric("otelcol_receiver_gateway_health_polls")
	if err != nil {
		return s, nil // nothing recorded yet
	}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		if o, _ := dp.Attributes.Value("outcome"); o.AsString() == "success" {
			s.Polls += dp.Value
		} else {
			s.Failed += dp.Value
		}
	}
	if m, err := p.tel.GetMetric("otelcol_receiver_gateway_health_poll_duration"); err == nil {
		for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
			s.Duration += time.Duration(dp.Sum * 1e9)
		}
	}
	return s, nil
}

// WaitPolls waits (checking every 2 ms) until n polls have completed; a
// failed poll is an error.
func (p *Pipeline) WaitPolls(n int64, timeout time.Duration) (PollStats, error) {
	deadline := time.Now().Add(timeout)
	for {
		s, err := p.Polls()
		switch {
		case err != nil:
			return s, err
		case s.Failed > 0:
			return s, errors.New("a poll failed")
		case s.Polls >= n:
			return s, nil
		case time.Now().After(deadline):
			return s, errors.New("timed out waiting for a poll")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Close shuts the receiver down, then the exporter.
func (p *Pipeline) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	if p.recv != nil {
		err = errors.Join(err, p.recv.Shutdown(ctx))
		p.recv = nil
	}
	if p.exp != nil {
		err = errors.Join(err, p.exp.Shutdown(ctx))
		p.exp = nil
	}
	return errors.Join(err, p.tel.Shutdown(ctx))
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}
