package gatewayreceiver // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver"

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"

	"github.com/otelgateway/otelgateway/internal/rename"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/traffic"
)

// Default endpoints sit next to, never on, the standard OTLP receiver's
// 4317/4318, so a collector can run both.
const (
	defaultGRPCEndpoint  = "localhost:14317"
	defaultHTTPEndpoint  = "localhost:14318"
	defaultFlushInterval = 5 * time.Second
	// defaultCollectorLabel names the collector on every series.
	defaultCollectorLabel = "collector"
	defaultTupleExpiry    = 5 * time.Minute
	// Timeouts of the HTTP server, on by default so a client that stops
	// half-way through its headers or body cannot hold a connection (and
	// its buffer) forever.
	defaultReadHeaderTimeout = 10 * time.Second
	// defaultReadTimeout bounds a whole request read, and (http.Server's
	// rule when no idle timeout is set) an idle keep-alive connection.
	defaultReadTimeout = 30 * time.Second
	// defaultGRPCReceiveTimeout is the gRPC counterpart of
	// defaultReadTimeout: the time a call's message may take to arrive.
	defaultGRPCReceiveTimeout = 30 * time.Second
	tracesURLPath             = "/v1/traces"

	// Defaults of the gRPC server, which gRPC leaves unbounded (the
	// README's configuration table says why). defaultGRPCMaxStreams bounds the
	// calls of one connection at once, and with them the handler
	// goroutines gRPC runs for calls a client resets (gRPC stops reading a
	// connection at that many); an OTLP exporter makes at most its
	// sending_queue.num_consumers (10) at once.
	defaultGRPCMaxStreams = 100
	// defaultGRPCMaxConnIdle closes (GOAWAY) a connection without a call
	// for this long, as protocols.http's keepalive.idle_timeout (1 min)
	// closes an idle HTTP connection; an exporter reconnects at its next
	// export.
	defaultGRPCMaxConnIdle = time.Minute
	// defaultGRPCMaxConnAge closes (GOAWAY, ±10 % jitter) a connection this
	// old, so exporters behind a load balancer spread over collectors
	// added since they connected, and defaultGRPCMaxConnAgeGrace is what
	// its calls in flight are given after that: grpc_receive_timeout's
	// default, the most a call's message may take.
	defaultGRPCMaxConnAge      = 5 * time.Minute
	defaultGRPCMaxConnAgeGrace = 30 * time.Second
	// defaultGRPCPingMinTime: a client pinging more often than this is
	// answered GOAWAY ENHANCE_YOUR_CALM after 3 pings (gRPC's rule); 10 s
	// is the keepalive time of configgrpc's clients (the collector's OTLP
	// exporter), allowed on connections without a call too
	// (permit_without_stream), so no exporter keeping its connection alive
	// is cut off. Pings do not keep a connection from being idle.
	defaultGRPCPingMinTime = 10 * time.Second
)

// Config is the gateway receiver's configuration.
type Config struct {
	// Protocols are the servers gateways export spans to. Both are on by
	// default; `enabled: false` turns one off.
	Protocols Protocols `mapstructure:"protocols"`
	// FlushInterval is how often the counted requests are emitted downstream
	// as delta sums (one point per label set touched in the interval).
	FlushInterval time.Duration `mapstructure:"flush_interval"`
	// Profile names the metrics: otel (default), kong or apisix.
	Profile string `mapstructure:"profile"`
	// Dimensions are the otel profile's optional attributes: the built-in
	// gateway.* ones by name (service, upstream, target, consumer,
	// response_source), and up to MaxSpanDimensions span attributes, as
	// the spanmetrics connector takes them ({name, default}).
	// (service, upstream, target, consumer, response_source).
	Dimensions []Dimension `mapstructure:"dimensions"`
	// Storage is the ID of a storage extension (file_storage) the receiver
	// checkpoints its flushed windows and open window start to after every
	// flush (checkpoint.go). Unset: none.
	Storage *component.ID `mapstructure:"storage"`
	// CheckpointReplay is how long a flushed window stays in the checkpoint,
	// to be replayed after a crash: at least the cumulative processor's
	// checkpoint_interval.
	CheckpointReplay time.Duration `mapstructure:"checkpoint_replay"`

	// Histogram chooses the otel profile's duration histogram buckets, as
	// the spanmetrics connector's `histogram.explicit.buckets` does.
	Histogram HistogramConfig `mapstructure:"histogram"`
	// Metrics turns the profile's metrics on or off by name, as the
	// `metrics:` block of contrib's receivers does ({enabled: false}): a
	// metric turned off costs no series, no state and no work per event.
	// Every metric is on unless listed.
	Metrics map[string]MetricConfig `mapstructure:"metrics"`
	// Exemplars keeps, per histogram bucket, the latest request that carried
	// a trace (its trace and span ids), as the spanmetrics connector's
	// `exemplars` does. On by default; off saves ~40 bytes per bucket of
	// every series and the work of recording them.
	Exemplars ExemplarsConfig `mapstructure:"exemplars"`
	// SamplingRates are the trace sampling probabilities of gateways that
	// sample without saying so (no ot=th threshold in their tracestate),
	// by gateway name: a span of such a gateway counts 1/rate requests, an
	// estimate (Kong's tracing_sampling_rate defaults to 0.01).
	SamplingRates map[string]float64 `mapstructure:"sampling_rates"`
	// NodeLabel keeps, on the kong and apisix profiles' series, the gateway
	// node that reported the request under this label (e.g. "instance", the
	// label Kong's and APISIX's dashboards filter on); "" (default) keeps
	// series per route across nodes. It multiplies series by the nodes.
	NodeLabel string `mapstructure:"node_label"`
	// PreferName makes the apisix profile label route and service by name,
	// as APISIX's prometheus plugin does with prefer_name: true (falling
	// back to the id where the input has no name).
	PreferName bool `mapstructure:"prefer_name"`
	// PerConsumer fills the kong profile's consumer label (on
	// kong_http_requests_total and kong_bandwidth_bytes) with the
	// consumer's username, as Kong's prometheus plugin does with
	// per_consumer: true; off, as the plugin's default, consumer is "" and
	// consumers do not multiply the series.
	PerConsumer bool `mapstructure:"per_consumer"`
	// EnvoyStatsPrefix is the `prefix` of Envoy's OpenTelemetry stats sink
	// when one is set: "<prefix>." is stripped from every pushed stat name,
	// as /stats/prometheus never has it (metrics_push.go).
	EnvoyStatsPrefix string `mapstructure:"envoy_stats_prefix"`
	// EnvoyStatsNamespaces are the custom stat namespaces registered in
	// Envoy (Wasm's): their stats are served without the envoy_ prefix, as
	// /stats/prometheus serves them.
	EnvoyStatsNamespaces []string `mapstructure:"envoy_stats_namespaces"`
	// Limits are every bound the receiver keeps on what it holds
	// (limits.go).
	Limits LimitsConfig `mapstructure:"limits"`
	// TupleExpiry is how long a held tuple (or gateway) lasts without an
	// event before it stops counting against limits.max_tuples
	// (limits.max_gateways); keep it at least the cumulative processor's
	// max_stale and the exporter's metric_expiration, so the bound holds
	// for their series too (the distribution's converter checks it).
	TupleExpiry time.Duration `mapstructure:"tuple_expiry"`
	// Detect forces the gateway kind of OTLP traces (auto, kong, apisix,
	// envoy, semconv).
	Detect string `mapstructure:"detect"`
	// CollectorLabel is the label naming the collector that aggregated a
	// series, on every point the receiver emits (traffic and health) and on
	// gateway resources (target_info), so the series of N collectors never
	// collide, pulled or pushed. "" turns it off (one collector only).
	CollectorLabel string `mapstructure:"collector_label"`
	// CollectorName is its value; default the host name and the port of the
	// receiver's listener (identity.go): unique among the collectors of one
	// host, the same after a restart.
	CollectorName string `mapstructure:"collector_name"`
	// GRPCReceiveTimeout ends a gRPC call whose message has not fully
	// arrived this long after its headers (DEADLINE_EXCEEDED): gRPC holds
	// what has arrived, and nothing else would end a client that stalls.
	// 0 turns it off. The HTTP paths have protocols.http.read_timeout.
	GRPCReceiveTimeout time.Duration `mapstructure:"grpc_receive_timeout"`
	// Health polls and receives upstream health (config_health.go); off
	// unless the section is present.
	Health configoptional.Optional[HealthConfig] `mapstructure:"health"`

	// renamed are the deprecated keys this config was written with
	// (limits.go), warned about when the receiver is created.
	renamed []rename.Key

	// prevent unkeyed literal initialization
	_ struct{}
}

// Dimension is one entry of `dimensions`: a built-in name, or a span
// attribute with an optional default for spans without it (a bare string in
// YAML is the name alone).
type Dimension struct {
	Name    string  `mapstructure:"name"`
	Default *string `mapstructure:"default"`
}

// UnmarshalText reads the short form, a bare name.
func (d *Dimension) UnmarshalText(b []byte) error {
	d.Name = string(b)
	return nil
}

// HistogramConfig is the `histogram` section.
type HistogramConfig struct {
	// Explicit sets the bucket upper bounds of the otel profile's duration
	// histograms (http.server.request.duration, gateway.upstream.duration,
	// gateway.added.duration, gateway.llm.duration); default the semantic
	// conventions' 5ms … 10s.
	Explicit ExplicitHistogramConfig `mapstructure:"explicit"`
	// Exponential makes those histograms exponential (native in
	// Prometheus), with at most max_size buckets each, as the spanmetrics
	// connector's `histogram.exponential`. Exclusive with explicit.
	Exponential configoptional.Optional[ExponentialHistogramConfig] `mapstructure:"exponential"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// ExponentialHistogramConfig is `histogram.exponential`.
type ExponentialHistogramConfig struct {
	// MaxSize bounds the positive buckets of each histogram point; the scale
	// drops (the resolution halves) when a window's values need more.
	MaxSize int `mapstructure:"max_size"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// defaultCheckpointReplay is twice the cumulative processor's default
// checkpoint_interval: a window flushed after its last checkpoint is still
// in ours.
const defaultCheckpointReplay = 20 * time.Second

// defaultExpoMaxSize is the spanmetrics connector's default max_size.
const defaultExpoMaxSize = 160

// maxExpoMaxSize bounds max_size: the buckets are held per series (8 bytes
// each), so the bound keeps a held tuple's cost within what README states.
const maxExpoMaxSize = 1024

// ExplicitHistogramConfig lists bucket upper bounds as durations.
type ExplicitHistogramConfig struct {
	Buckets []time.Duration `mapstructure:"buckets"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// MetricConfig is one entry of `metrics`.
type MetricConfig struct {
	// Enabled must be given: an entry is there to say it.
	Enabled *bool `mapstructure:"enabled"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// ExemplarsConfig is the `exemplars` section.
type ExemplarsConfig struct {
	Enabled bool `mapstructure:"enabled"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// Protocols holds the OTLP servers of the receiver.
type Protocols struct {
	GRPC configoptional.Optional[configgrpc.ServerConfig] `mapstructure:"grpc"`
	HTTP configoptional.Optional[confighttp.ServerConfig] `mapstructure:"http"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func createDefaultConfig() *Config {
	grpcCfg := configgrpc.NewDefaultServerConfig()
	grpcCfg.NetAddr.Endpoint = defaultGRPCEndpoint
	grpcCfg.MaxConcurrentStreams = defaultGRPCMaxStreams
	grpcCfg.Keepalive = configoptional.Some(configgrpc.KeepaliveServerConfig{
		ServerParameters: configoptional.Some(configgrpc.KeepaliveServerParameters{
			MaxConnectionIdle:     defaultGRPCMaxConnIdle,
			MaxConnectionAge:      defaultGRPCMaxConnAge,
			MaxConnectionAgeGrace: defaultGRPCMaxConnAgeGrace,
		}),
		EnforcementPolicy: configoptional.Some(configgrpc.KeepaliveEnforcementPolicy{
			MinTime:             defaultGRPCPingMinTime,
			PermitWithoutStream: true,
		}),
	})
	httpCfg := confighttp.NewDefaultServerConfig()
	httpCfg.NetAddr.Endpoint = defaultHTTPEndpoint
	httpCfg.ReadHeaderTimeout = defaultReadHeaderTimeout
	httpCfg.ReadTimeout = defaultReadTimeout
	return &Config{
		Protocols: Protocols{
			GRPC: configoptional.Some(grpcCfg),
			HTTP: configoptional.Some(httpCfg),
		},
		FlushInterval:      defaultFlushInterval,
		Profile:            traffic.ProfileOTel,
		Limits:             defaultLimits(),
		TupleExpiry:        defaultTupleExpiry,
		GRPCReceiveTimeout: defaultGRPCReceiveTimeout,
		CollectorLabel:     defaultCollectorLabel,
		Detect:             "auto",
		CheckpointReplay:   defaultCheckpointReplay,
		Health:             configoptional.Default(defaultHealthConfig()),
		Histogram: HistogramConfig{
			Exponential: configoptional.Default(ExponentialHistogramConfig{MaxSize: defaultExpoMaxSize}),
		},
		Exemplars: ExemplarsConfig{Enabled: true},
	}
}

// Validate checks the receiver configuration.
func (c *Config) Validate() error {
	var errs error
	if !c.Protocols.GRPC.HasValue() && !c.Protocols.HTTP.HasValue() {
		errs = errors.Join(errs, errors.New("protocols: at least one of grpc and http must be enabled"))
	}
	if c.Protocols.GRPC.HasValue() && c.Protocols.GRPC.Get().NetAddr.Endpoint == "" {
		errs = errors.Join(errs, errors.New("protocols.grpc.endpoint must not be empty"))
	}
	if c.Protocols.HTTP.HasValue() && c.Protocols.HTTP.Get().NetAddr.Endpoint == "" {
		errs = errors.Join(errs, errors.New("protocols.http.endpoint must not be empty"))
	}
	if c.FlushInterval <= 0 {
		errs = errors.Join(errs, fmt.Errorf("flush_interval must be positive, got %v", c.FlushInterval))
	}
	if !slices.Contains(traffic.ProfileNames(), c.Profile) {
		errs = errors.Join(errs, fmt.Errorf("profile must be %s, got %q", quotedOr(traffic.ProfileNames()), c.Profile))
	}
	for name, rate := range c.SamplingRates {
		if _, ok := gateway.Lookup(name); !ok {
			errs = errors.Join(errs, fmt.Errorf("sampling_rates: unknown gateway %q, want one of %s", name, gateway.OneOf(gateway.DetectNames()[1:])))
		}
		if !(rate > 0 && rate <= 1) {
			errs = errors.Join(errs, fmt.Errorf("sampling_rates.%s must be in (0, 1], got %v", name, rate))
		}
	}
	errs = errors.Join(errs, c.validateMetrics())
	if c.NodeLabel != "" {
		if c.Profile == traffic.ProfileOTel {
			errs = errors.Join(errs, fmt.Errorf("node_label applies to the %q and %q profiles; the otel profile's resource is the gateway", traffic.ProfileKong, traffic.ProfileAPISIX))
		}
		if !model.LegacyValidation.IsValidLabelName(c.NodeLabel) || strings.HasPrefix(c.NodeLabel, "__") || c.NodeLabel == c.CollectorLabel {
			errs = errors.Join(errs, fmt.Errorf("node_label must be a Prometheus label name, not reserved and not collector_label, got %q", c.NodeLabel))
		}
	}
	if e := c.Histogram.Exponential.Get(); e != nil {
		if c.Profile != traffic.ProfileOTel {
			errs = errors.Join(errs, fmt.Errorf("histogram applies to the %q profile only; the kong and apisix profiles keep their gateway's buckets", traffic.ProfileOTel))
		}
		if len(c.Histogram.Explicit.Buckets) > 0 {
			errs = errors.Join(errs, errors.New("histogram: set explicit or exponential, not both"))
		}
		if e.MaxSize < 2 || e.MaxSize > maxExpoMaxSize {
			errs = errors.Join(errs, fmt.Errorf("histogram.exponential.max_size must be in [2, %d], got %d", maxExpoMaxSize, e.MaxSize))
		}
	}
	if b := c.Histogram.Explicit.Buckets; len(b) > 0 {
		if c.Profile != traffic.ProfileOTel {
			errs = errors.Join(errs, fmt.Errorf("histogram applies to the %q profile only; the kong and apisix profiles keep their gateway's buckets", traffic.ProfileOTel))
		}
		for i, d := range b {
			if d <= 0 || i > 0 && d <= b[i-1] {
				errs = errors.Join(errs, fmt.Errorf("histogram.explicit.buckets must be positive and increasing, got %v", b))
				break
			}
		}
	}
	if c.Storage != nil && c.CheckpointReplay <= 0 {
		errs = errors.Join(errs, fmt.Errorf("checkpoint_replay must be positive with storage, got %v", c.CheckpointReplay))
	}
	if c.PreferName && c.Profile != traffic.ProfileAPISIX {
		errs = errors.Join(errs, fmt.Errorf("prefer_name applies to the %q profile only; profile is %q", traffic.ProfileAPISIX, c.Profile))
	}
	if c.PerConsumer && c.Profile != traffic.ProfileKong {
		errs = errors.Join(errs, fmt.Errorf("per_consumer applies to the %q profile only; profile is %q", traffic.ProfileKong, c.Profile))
	}
	if len(c.Dimensions) > 0 && c.Profile != traffic.ProfileOTel {
		errs = errors.Join(errs, fmt.Errorf("dimensions apply to the %q profile only; profile is %q", traffic.ProfileOTel, c.Profile))
	}
	spanDims := 0
	for _, d := range c.Dimensions {
		if _, ok := dimensionOf(d.Name); ok {
			continue
		}
		spanDims++
		if !strings.Contains(d.Name, ".") || strings.HasPrefix(d.Name, ".") || strings.HasSuffix(d.Name, ".") {
			errs = errors.Join(errs, fmt.Errorf("dimensions: unknown dimension %q, want one of service, upstream, target, consumer, response_source, or a span attribute name (dotted, e.g. http.flavor)", d.Name))
		}
	}
	if spanDims > gateway.MaxSpanDimensions {
		errs = errors.Join(errs, fmt.Errorf("dimensions: at most %d span attributes, got %d", gateway.MaxSpanDimensions, spanDims))
	}
	if c.CollectorLabel != "" && !model.LegacyValidation.IsValidLabelName(c.CollectorLabel) {
		errs = errors.Join(errs, fmt.Errorf("collector_label must be a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*), got %q", c.CollectorLabel))
	}
	if c.CollectorLabel != "" && strings.HasPrefix(c.CollectorLabel, "__") {
		errs = errors.Join(errs, fmt.Errorf("collector_label must not start with \"__\" (reserved by Prometheus), got %q", c.CollectorLabel))
	}
	if c.GRPCReceiveTimeout < 0 {
		errs = errors.Join(errs, fmt.Errorf("grpc_receive_timeout must be 0 (off) or positive, got %s", c.GRPCReceiveTimeout))
	}
	errs = errors.Join(errs, c.Limits.validate())
	if c.TupleExpiry < 0 {
		errs = errors.Join(errs, fmt.Errorf("tuple_expiry must be positive (0: never), got %v", c.TupleExpiry))
	}
	if k, ok := gateway.ParseKind(c.Detect); !ok || k.String() != c.Detect {
		errs = errors.Join(errs, fmt.Errorf("detect must be one of %s, got %q", gateway.OneOf(gateway.DetectNames()), c.Detect))
	}
	errs = errors.Join(errs, c.validateHealth())
	errs = errors.Join(errs, c.validateEnvoyStats())
	return errs
}

// validateEnvoyStats checks envoy_stats_prefix and envoy_stats_namespaces:
// names as Envoy takes them, without the dot that joins them to a stat.
func (c *Config) validateEnvoyStats() error {
	var errs error
	if p := c.EnvoyStatsPrefix; strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") {
		errs = errors.Join(errs, fmt.Errorf("envoy_stats_prefix is the sink's prefix without its dot (e.g. \"envoy\"), got %q", p))
	}
	for i, ns := range c.EnvoyStatsNamespaces {
		if ns == "" || strings.HasPrefix(ns, ".") || strings.HasSuffix(ns, ".") {
			errs = errors.Join(errs, fmt.Errorf("envoy_stats_namespaces[%d] must be a namespace name without a leading or trailing dot (e.g. \"wasmcustom\"), got %q", i, ns))
		}
	}
	return errs
}

// quotedOr words names as `"a", "b" or "c"`.
func quotedOr(names []string) string {
	var b strings.Builder
	for i, n := range names {
		switch {
		case i == 0:
		case i == len(names)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(n))
	}
	return b.String()
}

// dimensionOf names an optional otel-profile attribute.
func dimensionOf(name string) (func(*traffic.Dimensions), bool) {
	switch name {
	case "service":
		return func(d *traffic.Dimensions) { d.Service = true }, true
	case "upstream":
		return func(d *traffic.Dimensions) { d.Upstream = true }, true
	case "target":
		return func(d *traffic.Dimensions) { d.Target = true }, true
	case "consumer":
		return func(d *traffic.Dimensions) { d.Consumer = true }, true
	case "response_source":
		return func(d *traffic.Dimensions) { d.Source = true }, true
	}
	return nil, false
}

func (c *Config) dimensions() traffic.Dimensions {
	d := traffic.Dimensions{PreferName: c.PreferName, PerConsumer: c.PerConsumer, Node: c.NodeLabel != ""}
	for _, dim := range c.Dimensions {
		if set, ok := dimensionOf(dim.Name); ok {
			set(&d)
			continue
		}
		d.Span = append(d.Span, traffic.SpanDimension{Name: dim.Name, Key: gateway.RegisterAttribute(dim.Name), Default: dim.Default})
	}
	return d
}

// validateMetrics checks that every `metrics` entry names a metric of the
// profile and says whether it is enabled.
func (c *Config) validateMetrics() error {
	if len(c.Metrics) == 0 || !slices.Contains(traffic.ProfileNames(), c.Profile) {
		return nil
	}
	known := traffic.MetricNames(c.Profile)
	var errs error
	for _, name := range slices.Sorted(maps.Keys(c.Metrics)) {
		if !slices.Contains(known, name) {
			errs = errors.Join(errs, fmt.Errorf("metrics: the %s profile has no metric %q, want one of %s", c.Profile, name, quotedOr(known)))
		} else if c.Metrics[name].Enabled == nil {
			errs = errors.Join(errs, fmt.Errorf("metrics.%s: set enabled to true or false", name))
		}
	}
	return errs
}

// disabledMetrics lists the metrics turned off in `metrics`.
func (c *Config) disabledMetrics() []string {
	var off []string
	for name, m := range c.Metrics {
		if m.Enabled != nil && !*m.Enabled {
			off = append(off, name)
		}
	}
	return off
}

// durationBounds is histogram.explicit.buckets in seconds (nil: defaults).
func (c *Config) durationBounds() []float64 {
	var out []float64
	for _, d := range c.Histogram.Explicit.Buckets {
		out = append(out, d.Seconds())
	}
	return out
}

// expoSize is histogram.exponential.max_size (0: explicit histograms).
func (c *Config) expoSize() int {
	if e := c.Histogram.Exponential.Get(); e != nil {
		return e.MaxSize
	}
	return 0
}

// samplingRates indexes sampling_rates by gateway kind.
func (c *Config) samplingRates() []float64 {
	var rates []float64
	for name, rate := range c.SamplingRates {
		if g, ok := gateway.Lookup(name); ok {
			for len(rates) <= int(g.Kind()) {
				rates = append(rates, 0)
			}
			rates[g.Kind()] = rate
		}
	}
	return rates
}

func (c *Config) detect() gateway.Kind {
	k, _ := gateway.ParseKind(c.Detect)
	return k
}
