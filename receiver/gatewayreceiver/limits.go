package gatewayreceiver

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"go.uber.org/zap"

	"github.com/otelgateway/otelgateway/internal/foldlog"
	"github.com/otelgateway/otelgateway/internal/rename"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/traffic"
)

// Every bound the receiver keeps on what it holds is in the `limits`
// section, here: its defaults, its validation, the keys it replaced, and the
// log lines that say when a bound folds or refuses data. The README's
// "Limits" table documents each with its unit and the memory it implies.

// Defaults of the limits section.
const (
	// defaultMaxTuples counts the seeds' gateway exactly: a Kong with
	// 10,000 routes, 2 methods and 3 status codes is 60,000 label tuples
	// (otel profile; 30,000 under the kong profile, which has no method),
	// with room for more codes, methods or consumers. At the bound the
	// receiver holds about 115 MiB (otel profile, TestHeldTupleMemory), and
	// the whole collector peaks at 1.26 GiB of RSS (e2e TestSeedScale). The
	// processor's max_streams and the exporter's max_series hold every
	// series it can make by default (TestDefaultBoundsAgree).
	defaultMaxTuples   = 100_000
	defaultMaxGateways = 1000
	// defaultMaxLabelValueLength bounds each label value a tuple or a
	// health row keeps: route names and paths, hosts, consumers and models
	// fit with room to spare, and max_tuples tuples of such values stay
	// within about twice the memory of short ones through the pipeline,
	// where one request could otherwise carry a label of megabytes into
	// every family's series.
	defaultMaxLabelValueLength = 256
	// maxLabelValueLength is the most max_label_value_length allows.
	maxLabelValueLength = 16 << 10
	// defaultMaxInFlight bounds request bytes held at once (see
	// internal/admission): with the decode weights, one 20 MiB OTLP JSON
	// export at a time, or hundreds of typical gateway batches.
	defaultMaxInFlight = 64 << 20
	// defaultAdmissionQueueSize is how many requests may wait for room in
	// max_request_bytes_in_flight at once. A waiting request holds its
	// connection and headers (a few KiB), never its body: 1,024 of them
	// are a few MiB.
	defaultAdmissionQueueSize = 1024
	// defaultAdmissionQueueTimeout is how long one may wait: below the
	// senders' own timeouts (APISIX http-logger 3 s, Kong's OpenTelemetry
	// plugin 5 s, OTLP exporters 5-30 s), so that they get a 429 to retry
	// rather than time out on a request the collector may still serve.
	defaultAdmissionQueueTimeout = 2 * time.Second
	// defaultMaxPushedTargets bounds the health rows only pushes keep: five
	// times the seeds' 20,000 targets.
	defaultMaxPushedTargets = 100_000
)

// LimitsConfig is the `limits` section.
type LimitsConfig struct {
	// MaxTuples bounds the label tuples held, receiver-wide and across
	// flush windows, resources and profiles: a tuple is held from its first
	// event until tuple_expiry passes without one. Events of a new tuple
	// beyond it are counted under its gateway's otel.metric.overflow tuple.
	// 0: no bound.
	MaxTuples int `mapstructure:"max_tuples"`
	// MaxGateways bounds the distinct gateway resources (service.namespace,
	// service.name) held the same way; events of further gateways are
	// counted under one overflow tuple without a resource. 0: no bound.
	MaxGateways int `mapstructure:"max_gateways"`
	// MaxLabelValueLength cuts every label value a request tuple or a
	// health row keeps (routes, services, hosts, consumers, models, span
	// dimensions, gateway names, upstreams and targets) to this many bytes,
	// at a whole UTF-8 character: the request still counts, under the cut
	// value (otelcol_receiver_gateway_label_values_truncated counts them).
	MaxLabelValueLength int `mapstructure:"max_label_value_length"`
	// MaxRequestBytesInFlight bounds the request bytes held at once across
	// every ingest path (HTTP, gRPC, logs, push), weighted by what decoding
	// them costs; beyond it requests get HTTP 429 / gRPC Unavailable.
	// 0: no bound.
	MaxRequestBytesInFlight int64 `mapstructure:"max_request_bytes_in_flight"`
	// AdmissionQueueSize is how many requests may wait, before their body
	// is read, for room in max_request_bytes_in_flight; past it they are
	// refused at once. 0: none waits.
	AdmissionQueueSize int `mapstructure:"admission_queue_size"`
	// AdmissionQueueTimeout is how long a request may wait for room (to be
	// admitted, and again for each charge that finds none as its body
	// arrives and is decoded); then it is refused. 0: none waits.
	AdmissionQueueTimeout time.Duration `mapstructure:"admission_queue_timeout"`
	// MaxPushedTargets bounds the health rows only pushes keep (targets
	// no poller reports): an event that would add a row beyond it is
	// refused, existing rows still update.
	MaxPushedTargets int `mapstructure:"max_pushed_targets"`
	// MaxPushedPoints bounds the data points one pushed ResourceMetrics
	// (one gateway node's push, /v1/metrics) is mapped to; the points
	// beyond are dropped (over_limit) and the push answered with a partial
	// success.
	MaxPushedPoints int `mapstructure:"max_pushed_points"`
	// MaxPushedLabelBytes bounds a label value of a pushed point; a point
	// with a longer one is dropped whole (label_too_long): cutting it could
	// merge two series, which a gateway's own counters must never do.
	MaxPushedLabelBytes int `mapstructure:"max_pushed_label_bytes"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func defaultLimits() LimitsConfig {
	return LimitsConfig{
		MaxTuples:               defaultMaxTuples,
		MaxGateways:             defaultMaxGateways,
		MaxLabelValueLength:     defaultMaxLabelValueLength,
		MaxRequestBytesInFlight: defaultMaxInFlight,
		AdmissionQueueSize:      defaultAdmissionQueueSize,
		AdmissionQueueTimeout:   defaultAdmissionQueueTimeout,
		MaxPushedTargets:        defaultMaxPushedTargets,
		MaxPushedPoints:         gateway.DefaultMaxPushPoints,
		MaxPushedLabelBytes:     gateway.DefaultMaxPushLabelBytes,
	}
}

// validate checks the section; messages name the key, the value and the
// range.
func (l *LimitsConfig) validate() error {
	var errs error
	if l.MaxTuples < 0 {
		errs = errors.Join(errs, fmt.Errorf("limits.max_tuples must be 0 (no limit) or positive, got %d", l.MaxTuples))
	}
	if l.MaxGateways < 0 {
		errs = errors.Join(errs, fmt.Errorf("limits.max_gateways must be 0 (no limit) or positive, got %d", l.MaxGateways))
	}
	if l.MaxLabelValueLength < 16 || l.MaxLabelValueLength > maxLabelValueLength {
		errs = errors.Join(errs, fmt.Errorf("limits.max_label_value_length must be from 16 to %d bytes, got %d", maxLabelValueLength, l.MaxLabelValueLength))
	}
	if l.MaxRequestBytesInFlight < 0 {
		errs = errors.Join(errs, fmt.Errorf("limits.max_request_bytes_in_flight must be 0 (no limit) or positive, got %d", l.MaxRequestBytesInFlight))
	}
	if l.AdmissionQueueSize < 0 {
		errs = errors.Join(errs, fmt.Errorf("limits.admission_queue_size must be 0 (no request waits) or positive, got %d", l.AdmissionQueueSize))
	}
	if l.AdmissionQueueTimeout < 0 {
		errs = errors.Join(errs, fmt.Errorf("limits.admission_queue_timeout must be 0 (no request waits) or positive, got %s", l.AdmissionQueueTimeout))
	}
	if l.MaxPushedTargets < 1 {
		errs = errors.Join(errs, fmt.Errorf("limits.max_pushed_targets must be at least 1, got %d", l.MaxPushedTargets))
	}
	if l.MaxPushedPoints < 1 {
		errs = errors.Join(errs, fmt.Errorf("limits.max_pushed_points must be at least 1, got %d", l.MaxPushedPoints))
	}
	if l.MaxPushedLabelBytes < 16 || l.MaxPushedLabelBytes > maxLabelValueLength {
		errs = errors.Join(errs, fmt.Errorf("limits.max_pushed_label_bytes must be from 16 to %d bytes, got %d", maxLabelValueLength, l.MaxPushedLabelBytes))
	}
	return errs
}

// renamedKeys are the bounds' keys before the limits section: each still
// works, with a deprecation warning at start.
var renamedKeys = []rename.Key{
	{Old: "max_series", New: "limits::max_tuples"},
	{Old: "max_gateways", New: "limits::max_gateways"},
	{Old: "max_label_value_length", New: "limits::max_label_value_length"},
	{Old: "max_request_bytes_in_flight", New: "limits::max_request_bytes_in_flight"},
	{Old: "health::push::max_targets", New: "limits::max_pushed_targets"},
}

// Unmarshal reads the config, taking each deprecated key of renamedKeys as
// its new one.
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	moved, err := rename.Unmarshal(conf, renamedKeys, c)
	if err != nil {
		return err
	}
	c.renamed = moved
	return nil
}

// limits are traffic's bounds; tuple_expiry counts in whole flush windows
// (at least one).
func (c *Config) limits() traffic.Limits {
	l := traffic.Limits{MaxTuples: c.Limits.MaxTuples, MaxGateways: c.Limits.MaxGateways, MaxLabelBytes: c.Limits.MaxLabelValueLength}
	if c.TupleExpiry > 0 && c.FlushInterval > 0 {
		l.ExpiryWindows = max(int64((c.TupleExpiry+c.FlushInterval-1)/c.FlushInterval), 1)
	}
	return l
}

// tupleCost is what one held tuple costs, by profile, as the fold log and
// the README say it: the receiver's share (TestHeldTupleMemory and
// TestSeedGatewayMemory) and the whole collector's (receiver, cumulative
// processor and promstream exporter: peak RSS over the tuples, e2e
// TestSeedScale, otel profile, about 11 KiB at 60,000 and 13 KiB at
// 100,000 tuples; the other profiles make at most as many series a tuple).
var tupleCost = map[string]string{
	traffic.ProfileOTel:   "about 1.2 KiB per tuple in the receiver (2.4 KiB with GenAI labels), 11-13 KiB of the collector's RSS per tuple with the processor and exporter",
	traffic.ProfileKong:   "about 1-1.3 KiB per tuple in the receiver, at most 11-13 KiB of the collector's RSS per tuple with the processor and exporter",
	traffic.ProfileAPISIX: "about 0.5-0.6 KiB per tuple in the receiver, at most 11-13 KiB of the collector's RSS per tuple with the processor and exporter",
}

// folds are the log lines of the receiver's bounds (internal/foldlog).
type folds struct {
	tuples, gateways, pushed *foldlog.Logger
}

func newFolds(c *Config, log *zap.Logger) folds {
	var f folds
	if c.Limits.MaxTuples > 0 {
		until := "until held tuples go " + c.TupleExpiry.String() + " (tuple_expiry) without a request"
		if c.TupleExpiry == 0 {
			until = "for good: held tuples never expire (tuple_expiry 0)"
		}
		f.tuples = foldlog.New(log, foldlog.Bound{
			Key: "limits.max_tuples", Limit: int64(c.Limits.MaxTuples), Unit: "label tuples", Counted: "events",
			Folded: "requests of new label tuples are counted under their gateway's otel.metric.overflow series, without route, method or status, " + until,
			Cost:   tupleCost[c.Profile],
		})
	}
	if c.Limits.MaxGateways > 0 {
		f.gateways = foldlog.New(log, foldlog.Bound{
			Key: "limits.max_gateways", Limit: int64(c.Limits.MaxGateways), Unit: "gateway resources", Counted: "events",
			Folded: "requests of further gateways (service.namespace, service.name) are counted under one otel.metric.overflow series without a resource",
			Cost:   "a gateway costs its tuples (limits.max_tuples) and one overflow tuple",
		})
	}
	f.pushed = foldlog.New(log, foldlog.Bound{
		Key: "limits.max_pushed_targets", Limit: int64(c.Limits.MaxPushedTargets), Unit: "pushed health targets", Counted: "events",
		Folded: "pushed health events about new targets are refused (HTTP 200 with the event listed as rejected) until pushed targets expire (health.push.expiry)",
		Cost:   "about 0.6 KiB per target in the receiver, and a series per state downstream",
	})
	return f
}

// close logs what was folded since each bound's last log.
func (f *folds) close() {
	f.tuples.Close()
	f.gateways.Close()
	f.pushed.Close()
}

// StreamsBound is the most streams the receiver's traffic series make
// downstream under its limits: a stream per family of its profile (with the
// metrics it turns off left out) for each tuple it can hold, held or
// overflow (limits.max_tuples + limits.max_gateways + 1); 0 when
// limits.max_tuples is 0 (no bound). The distribution's converter sizes the
// cumulative processor's limits.max_streams from it.
func (c *Config) StreamsBound() int {
	if c.Limits.MaxTuples <= 0 {
		return 0
	}
	return (c.Limits.MaxTuples + c.Limits.MaxGateways + 1) * traffic.Families(c.Profile, c.disabledMetrics())
}

// PushedHealthSeriesBound is the most health series the pushed targets make
// downstream: a series per state of each target limits.max_pushed_targets
// allows, and as many upstream counts; 0 without a health section. Polled
// targets have no bound (a poll keeps what its admin API reports).
func (c *Config) PushedHealthSeriesBound() int {
	if !c.Health.HasValue() || !c.Health.Get().Push.HasValue() {
		return 0
	}
	return c.Limits.MaxPushedTargets * int(gateway.NumHealthStates) * 2
}
