package promstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/prometheusexporter"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter"
)

// Contender keys, in report order.
const (
	Ours          = "ours"
	Contrib       = "contrib"
	ClientGolang  = "client_golang"
	Victoria      = "victoriametrics"
	LowerBound    = "lowerbound"
	longExpiry    = 24 * time.Hour
	shutdownAfter = 10 * time.Second
)

// Contenders lists the keys in report order.
var Contenders = []string{Ours, Contrib, ClientGolang, Victoria, LowerBound}

// Titles are the names printed in the report.
var Titles = map[string]string{
	Ours:         "promstream (ours)",
	Contrib:      "contrib prometheusexporter v0.165.1",
	ClientGolang: "client_golang v1.25.0 promhttp",
	Victoria:     "VictoriaMetrics/metrics v1.45.0",
	LowerBound:   "lower bound (prefix+AppendFloat)",
}

// Server is one running contender: an HTTP server on a loopback port serving
// /metrics, loaded with a workload.
type Server struct {
	Key  string
	Addr string
	// Consume feeds pdata to the OTel-based contenders (nil for the others).
	Consume func(context.Context, pmetric.Metrics) error
	close   func() error
}

// Close stops the server and everything it started.
func (s *Server) Close() error {
	if s == nil || s.close == nil {
		return nil
	}
	err := s.close()
	s.close = nil
	return err
}

// Start starts contender key loaded with w.
func Start(key string, w Workload) (*Server, error) {
	switch key {
	case Ours:
		return startCollectorExporter(key, promstreamexporter.NewFactory(), func(addr string, cfg any) {
			c := cfg.(*promstreamexporter.Config)
			c.ServerConfig.NetAddr.Endpoint = addr
			c.MetricExpiration = longExpiry
			// Configured like contrib below: no otel_scope_* labels.
			c.WithoutScopeInfo = true
			// Switching contenders must not wait for a final scrape.
			c.ShutdownGrace = 0
		}, w)
	case Contrib:
		return startCollectorExporter(key, prometheusexporter.NewFactory(), func(addr string, cfg any) {
			c := cfg.(*prometheusexporter.Config)
			c.ServerConfig.NetAddr.Endpoint = addr
			c.MetricExpiration = longExpiry
			// Names as close to ours as possible: default translation
			// (UnderscoreEscapingWithSuffixes), no otel_scope_* labels.
			c.WithoutScopeInfo = true
			// No sending queue: ConsumeMetrics stores synchronously, like
			// ours, so the ingest figures time the same work and the data is
			// in place when ConsumeMetrics returns.
			c.QueueBatchConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
		}, w)
	case ClientGolang:
		return startClientGolang(w)
	case Victoria:
		return startVictoria(w)
	case LowerBound:
		return startLowerBound(w)
	}
	return nil, fmt.Errorf("unknown contender %q", key)
}

// freeAddr returns a loopback address with a port that was free a moment ago
// (the collector components bind the endpoint themselves).
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

func startCollectorExporter(key string, f exporter.Factory, configure func(addr string, cfg any), w Workload) (*Server, error) {
	ctx := context.Background()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // the port may be taken between freeAddr and Start
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		cfg := f.CreateDefaultConfig()
		configure(addr, cfg)
		exp, err := f.CreateMetrics(ctx, exportertest.NewNopSettings(f.Type()), cfg)
		if err != nil {
			return nil, err
		}
		if err := exp.Start(ctx, componenttest.NewNopHost()); err != nil {
			lastErr = err
			_ = exp.Shutdown(ctx)
			continue
		}
		s := &Server{Key: key, Addr: addr, Consume: exp.ConsumeMetrics, close: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), shutdownAfter)
			defer cancel()
			return exp.Shutdown(ctx)
		}}
		if err := exp.ConsumeMetrics(ctx, w.Metrics()); err != nil {
			_ = s.Close()
			return nil, err
		}
		return s, nil
	}
	return nil, lastErr
}

// serve runs h on a fresh loopback port until Close.
func serve(key string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	return &Server{Key: key, Addr: ln.Addr().String(), close: func() error {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownAfter)
		defer cancel()
		err := srv.Shutdown(ctx)
		if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		return err
	}}, nil
}

func startClientGolang(w Workload) (*Server, error) {
	reg := prometheus.NewRegistry()
	health := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: HealthName, Help: healthHelp}, HealthLabels)
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: RequestsName, Help: requestsHelp}, RequestsLabels)
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: LatencyName, Help: latencyHelp, Buckets: LatencyBounds}, LatencyLabels)
	reg.MustRegister(health, requests, latency)
	w.ForEachHealth(func(s *HealthPoint) { health.WithLabelValues(s.Labels()...).Set(float64(s.Value)) })
	w.ForEachRequest(0, w.Routes, 0, func(s *RequestPoint) { requests.WithLabelValues(s.Labels()...).Add(float64(s.Value)) })
	w.ForEachLatency(0, w.Routes, 0, true, func(s *LatencyPoint) {
		h := latency.WithLabelValues(s.Labels()...)
		for _, v := range s.Observations {
			h.Observe(v)
		}
	})
	return serve(ClientGolang, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
}

// promName renders name{l1="v1",...} (values need no escaping in this
// workload).
func promName(dst []byte, name string, labels, values []string, extra ...string) []byte {
	dst = append(dst, name...)
	dst = append(dst, '{')
	for i, l := range labels {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, l...)
		dst = append(dst, '=', '"')
		dst = append(dst, values[i]...)
		dst = append(dst, '"')
	}
	for i := 0; i+1 < len(extra); i += 2 {
		dst = append(dst, ',')
		dst = append(dst, extra[i]...)
		dst = append(dst, '=', '"')
		dst = append(dst, extra[i+1]...)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

var vmMetadataOnce sync.Once

func startVictoria(w Workload) (*Server, error) {
	// # TYPE lines, so every contender exposes the same kinds of lines.
	// (Process-wide setting of the VictoriaMetrics package only.)
	vmMetadataOnce.Do(func() { metrics.ExposeMetadata(true) })
	set := metrics.NewSet()
	var b []byte
	w.ForEachHealth(func(s *HealthPoint) {
		b = promName(b[:0], HealthName, HealthLabels, s.Labels())
		set.NewGauge(string(b), nil).Set(float64(s.Value))
	})
	w.ForEachRequest(0, w.Routes, 0, func(s *RequestPoint) {
		b = promName(b[:0], RequestsName, RequestsLabels, s.Labels())
		set.NewCounter(string(b)).Set(uint64(s.Value))
	})
	w.ForEachLatency(0, w.Routes, 0, true, func(s *LatencyPoint) {
		b = promName(b[:0], LatencyName, LatencyLabels, s.Labels())
		h := set.NewPrometheusHistogramExt(string(b), LatencyBounds)
		for _, v := range s.Observations {
			h.Update(v)
		}
	})
	return serve(Victoria, http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		set.WritePrometheus(rw)
	}))
}

// lowerBound is the floor: every sample line's `name{labels}` pre-rendered
// into one arena, values in a float64 slice; a scrape appends prefix, value
// (strconv.AppendFloat) and newline into a 64 KiB buffer and writes it to the
// connection whenever it is nearly full. No locks, no per-line allocation.
type lowerBound struct {
	families []lbFamily
	arena    []byte
	ends     []int32 // ends[i] is the end of line i's prefix in arena
	values   []float64
	bufs     sync.Pool
}

type lbFamily struct {
	header     []byte
	start, end int // line range
}

const lbBufSize = 64 << 10

func (lb *lowerBound) add(prefix []byte, v float64) {
	lb.arena = append(lb.arena, prefix...)
	lb.ends = append(lb.ends, int32(len(lb.arena)))
	lb.values = append(lb.values, v)
}

func (lb *lowerBound) family(name, help, typ string, fill func()) {
	f := lbFamily{header: []byte("# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n"), start: len(lb.values)}
	fill()
	f.end = len(lb.values)
	lb.families = append(lb.families, f)
}

func startLowerBound(w Workload) (*Server, error) {
	lb := &lowerBound{}
	lb.bufs.New = func() any { b := make([]byte, 0, lbBufSize); return &b }
	var b []byte
	lb.family(HealthName, healthHelp, "gauge", func() {
		w.ForEachHealth(func(s *HealthPoint) {
			b = promName(b[:0], HealthName, HealthLabels, s.Labels())
			lb.add(b, float64(s.Value))
		})
	})
	lb.family(RequestsName, requestsHelp, "counter", func() {
		w.ForEachRequest(0, w.Routes, 0, func(s *RequestPoint) {
			b = promName(b[:0], RequestsName, RequestsLabels, s.Labels())
			lb.add(b, float64(s.Value))
		})
	})
	lb.family(LatencyName, latencyHelp, "histogram", func() {
		w.ForEachLatency(0, w.Routes, 0, false, func(s *LatencyPoint) {
			var cum uint64
			for i, bound := range LatencyBounds {
				cum += s.Counts[i]
				b = promName(b[:0], LatencyName+"_bucket", LatencyLabels, s.Labels(), "le", strconv.FormatFloat(bound, 'g', -1, 64))
				lb.add(b, float64(cum))
			}
			b = promName(b[:0], LatencyName+"_bucket", LatencyLabels, s.Labels(), "le", "+Inf")
			lb.add(b, float64(s.Count))
			b = promName(b[:0], LatencyName+"_sum", LatencyLabels, s.Labels())
			lb.add(b, s.Sum)
			b = promName(b[:0], LatencyName+"_count", LatencyLabels, s.Labels())
			lb.add(b, float64(s.Count))
		})
	})
	return serve(LowerBound, lb)
}

func (lb *lowerBound) ServeHTTP(rw http.ResponseWriter, _ *http.Request) {
	rw.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	bp := lb.bufs.Get().(*[]byte)
	defer lb.bufs.Put(bp)
	buf := (*bp)[:0]
	for _, f := range lb.families {
		buf = append(buf, f.header...)
		start := 0
		if f.start > 0 {
			start = int(lb.ends[f.start-1])
		}
		for i := f.start; i < f.end; i++ {
			end := int(lb.ends[i])
			buf = append(buf, lb.arena[start:end]...)
			start = end
			buf = append(buf, ' ')
			buf = strconv.AppendFloat(buf, lb.values[i], 'g', -1, 64)
			buf = append(buf, '\n')
			if len(buf) > lbBufSize-1024 {
				if _, err := rw.Write(buf); err != nil {
					panic(http.ErrAbortHandler)
				}
				buf = buf[:0]
			}
		}
	}
	if _, err := rw.Write(buf); err != nil {
		panic(http.ErrAbortHandler)
	}
	*bp = buf
}
