package scale

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter"
	"github.com/otelgateway/otelgateway/processor/cumulativeprocessor"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver"
)

// EnvChild holds a ChildConfig (JSON) in the child process.
const EnvChild = "SCALE_COLLECTOR"

// ChildConfig is what one child collector runs.
type ChildConfig struct {
	Profile string // receiver profile: otel or kong
	// Tuples sizes the limits: every bound (receiver max_tuples, processor
	// max_streams, exporter max_series) is raised to hold them all, the
	// defaults being sized for 100k tuples.
	Tuples        int
	FlushInterval time.Duration
	// ReceiverOnly: the receiver's flushes go to a consumer that drops
	// them (the cores comparison measures ingest alone).
	ReceiverOnly bool
	// MutexProfile turns on the mutex and block profiles (fraction 1 in
	// 10, block events of 10 µs and more).
	MutexProfile bool
}

// Ready is the child's first stdout line (after ReadyPrefix).
type Ready struct {
	Receiver, Metrics, Control string // host:port each
}

// ReadyPrefix starts the child's ready line.
const ReadyPrefix = "SCALE-READY "

// Flush is one flush seen between the receiver and the processor: the
// chunks of one tick.
type Flush struct {
	Tick       int   // k: the tick at Started + k × FlushInterval before the first chunk
	Start      int64 // the tick, or the end of the flush before when it ran past the tick (Unix ns)
	FirstChunk int64 // when the first chunk reached the processor (Unix ns)
	End        int64 // when the last chunk left the exporter (Unix ns)
	Points     int64
	Chunks     int
}

// Stats is GET /stats of the control server.
type Stats struct {
	Started  int64 // Unix ns, just before the receiver started (its ticker starts in Start)
	Interval time.Duration
	Flushes  []Flush
	// Flushed is the receiver's otelcol_receiver_gateway_flushed_points
	// {outcome=sent}: it grows by a flush's points once the whole flush has
	// gone through, so a flush is over when Flushed covers its points.
	Flushed int64
	// Heap (runtime.MemStats, read when asked): what Go holds.
	HeapInuse, HeapIdle, HeapReleased, StackSys, Sys uint64
	NumGC                                            uint32
}

// RunChild runs the collector of cfg until stdin closes, then shuts it down.
func RunChild(cfg ChildConfig) error {
	if cfg.MutexProfile {
		runtime.SetMutexProfileFraction(10)
		runtime.SetBlockProfileRate(int(10 * time.Microsecond))
	}
	c, err := startCollector(cfg)
	if err != nil {
		return err
	}
	ready, _ := json.Marshal(c.ready)
	fmt.Println(ReadyPrefix + string(ready))
	// The parent closes stdin to stop us.
	_, _ = bufio.NewReader(os.Stdin).ReadString(0)
	return c.close()
}

type collector struct {
	ready Ready
	tel   *componenttest.Telemetry
	comps []component.Component // in start order
	ctl   *http.Server

	mu     sync.Mutex
	stats  Stats
	points int64 // points of every flush seen (Flushes' sum)
}

func startCollector(cfg ChildConfig) (*collector, error) {
	ctx := context.Background()
	c := &collector{tel: componenttest.NewTelemetry()}
	c.stats.Interval = cfg.FlushInterval
	host := componenttest.NewNopHost()
	var next consumer.Metrics = consumerDrop{}
	if !cfg.ReceiverOnly {
		metricsAddr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		ef := promstreamexporter.NewFactory()
		ecfg := ef.CreateDefaultConfig().(*promstreamexporter.Config)
		ecfg.ServerConfig.NetAddr.Endpoint = metricsAddr
		ecfg.MetricExpiration = time.Hour
		ecfg.WithoutScopeInfo = true
		ecfg.Limits.MaxSeries = 0 // no limit: the bench's tuples make ~6 series each (otel)
		if err := ecfg.Validate(); err != nil {
			return nil, err
		}
		exp, err := ef.CreateMetrics(ctx, exportertest.NewNopSettings(ef.Type()), ecfg)
		if err != nil {
			return nil, err
		}
		if err := c.start(exp, host); err != nil {
			return nil, err
		}
		c.ready.Metrics = metricsAddr

		pf := cumulativeprocessor.NewFactory()
		pcfg := pf.CreateDefaultConfig()
		if err := confmap.NewFromStringMap(map[string]any{
			"max_stale": "1h",
			"limits":    map[string]any{"max_streams": max(200_000, 8*cfg.Tuples)},
		}).Unmarshal(pcfg); err != nil {
			return nil, errors.Join(err, c.close())
		}
		if err := pcfg.(interface{ Validate() error }).Validate(); err != nil {
			return nil, errors.Join(err, c.close())
		}
		proc, err := pf.CreateMetrics(ctx, processortest.NewNopSettings(pf.Type()), pcfg, exp)
		if err != nil {
			return nil, errors.Join(err, c.close())
		}
		if err := c.start(proc, host); err != nil {
			return nil, err
		}
		next = proc
	}
	next = &flushWatch{c: c, next: next}

	recvAddr, err := freeAddr()
	if err != nil {
		return nil, errors.Join(err, c.close())
	}
	rf := gatewayreceiver.NewFactory()
	rcfg := rf.CreateDefaultConfig()
	if err := confmap.NewFromStringMap(map[string]any{
		"protocols":      map[string]any{"grpc": map[string]any{"enabled": false}, "http": map[string]any{"endpoint": recvAddr}},
		"profile":        cfg.Profile,
		"flush_interval": cfg.FlushInterval.String(),
		"tuple_expiry":   "1h",
		"limits":         map[string]any{"max_tuples": max(100_000, 2*cfg.Tuples)},
	}).Unmarshal(rcfg); err != nil {
		return nil, errors.Join(err, c.close())
	}
	if err := rcfg.(interface{ Validate() error }).Validate(); err != nil {
		return nil, errors.Join(err, c.close())
	}
	set := receivertest.NewNopSettings(rf.Type())
	set.TelemetrySettings = c.tel.NewTelemetrySettings()
	recv, err := rf.CreateMetrics(ctx, set, rcfg, next)
	if err != nil {
		return nil, errors.Join(err, c.close())
	}
	c.stats.Started = time.Now().UnixNano()
	if err := c.start(recv, host); err != nil {
		return nil, err
	}
	c.ready.Receiver = recvAddr

	ctlAddr, err := freeAddr()
	if err != nil {
		return nil, errors.Join(err, c.close())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/stats", c.serveStats)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	c.ctl = &http.Server{Addr: ctlAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", ctlAddr)
	if err != nil {
		return nil, errors.Join(err, c.close())
	}
	go func() { _ = c.ctl.Serve(ln) }()
	c.ready.Control = ctlAddr
	return c, nil
}

// start starts comp; on failure it shuts down what did start.
func (c *collector) start(comp component.Component, host component.Host) error {
	if err := comp.Start(context.Background(), host); err != nil {
		return errors.Join(err, comp.Shutdown(context.Background()), c.close())
	}
	c.comps = append(c.comps, comp)
	return nil
}

// close shuts down in reverse start order: the receiver first, so that its
// final flush reaches a running processor and exporter.
func (c *collector) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	if c.ctl != nil {
		err = c.ctl.Close()
	}
	for i := len(c.comps) - 1; i >= 0; i-- {
		err = errors.Join(err, c.comps[i].Shutdown(ctx))
	}
	c.comps = nil
	return errors.Join(err, c.tel.Shutdown(ctx))
}

func (c *collector) serveStats(w http.ResponseWriter, _ *http.Request) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	flushed := flushedPoints(c.tel)
	c.mu.Lock()
	s := c.stats
	s.Flushes = append([]Flush(nil), c.stats.Flushes...)
	c.mu.Unlock()
	s.Flushed = flushed
	s.HeapInuse, s.HeapIdle, s.HeapReleased, s.StackSys, s.Sys, s.NumGC = ms.HeapInuse, ms.HeapIdle, ms.HeapReleased, ms.StackSys, ms.Sys, ms.NumGC
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s)
}

// flushWatch sits between the receiver and the processor: it dates each
// chunk of a flush (all chunks of one flush come from the flusher's
// goroutine, one after another, and the processor and exporter consume
// them synchronously).
type flushWatch struct {
	c    *collector
	next consumer.Metrics
}

func (f *flushWatch) Capabilities() consumer.Capabilities { return f.next.Capabilities() }

func (f *flushWatch) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	t0 := time.Now().UnixNano()
	// A chunk starts a new flush when the last one is over: the receiver
	// counts a flush's points in its telemetry once all went through.
	// (Not by tick: a flush of 1M tuples outlasts its interval.)
	flushed := flushedPoints(f.c.tel)
	n := int64(md.DataPointCount())
	err := f.next.ConsumeMetrics(ctx, md)
	t1 := time.Now().UnixNano()
	s := &f.c.stats
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if k := len(s.Flushes); k == 0 || flushed == f.c.points {
		tick := int((t0 - s.Started) / int64(s.Interval))
		start := s.Started + int64(tick)*int64(s.Interval)
		if k > 0 {
			// A tick that came while the last flush ran waited for it.
			start = max(start, s.Flushes[k-1].End)
		}
		s.Flushes = append(s.Flushes, Flush{Tick: tick, Start: start, FirstChunk: t0})
	}
	f.c.points += n
	fl := &s.Flushes[len(s.Flushes)-1]
	fl.End, fl.Points = t1, fl.Points+n
	fl.Chunks++
	return err
}

type consumerDrop struct{}

func (consumerDrop) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }
func (consumerDrop) ConsumeMetrics(context.Context, pmetric.Metrics) error {
	return nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}
