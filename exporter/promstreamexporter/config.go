package promstreamexporter // import "github.com/otelgateway/otelgateway/exporter/promstreamexporter"

import (
	"errors"
	"fmt"
	"time"

	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/common/model"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/featuregate"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
	"github.com/otelgateway/otelgateway/internal/rename"
)

const (
	defaultEndpoint         = "localhost:9464"
	defaultMetricExpiration = 5 * time.Minute
	defaultShutdownGrace    = 15 * time.Second
	// defaultReadHeaderTimeout bounds how long a client may take to send
	// its request header: a scraper sends a few hundred bytes at once, and
	// a client that sends half a header must not hold a connection
	// (confighttp's own default is a minute).
	defaultReadHeaderTimeout = 10 * time.Second
	metricsPath              = "/metrics"
)

// Label orders and bucket formats.
const (
	labelOrderSorted      = "sorted"
	labelOrderAsReceived  = "as_received"
	bucketFormatCanonical = "canonical"
	bucketFormatShortest  = "shortest"
)

// Translation strategies, as the contrib prometheus exporter names them.
const (
	underscoreEscapingWithSuffixes    = "UnderscoreEscapingWithSuffixes"
	underscoreEscapingWithoutSuffixes = "UnderscoreEscapingWithoutSuffixes"
	noUTF8EscapingWithSuffixes        = "NoUTF8EscapingWithSuffixes"
	noTranslation                     = "NoTranslation"
)

// Config is the promstream exporter's configuration.
type Config struct {
	// ServerConfig is the HTTP server /metrics is served on (endpoint, TLS,
	// auth, CORS, ...).
	ServerConfig confighttp.ServerConfig `mapstructure:",squash"`
	// MetricExpiration is how long a series is kept without an update before
	// it disappears from /metrics. Enforced in the background, never on
	// scrape.
	MetricExpiration time.Duration `mapstructure:"metric_expiration"`
	// Limits are every bound the exporter keeps on what it holds and
	// serves (limits.go).
	Limits LimitsConfig `mapstructure:"limits"`
	// ShutdownGrace is how long Shutdown keeps serving /metrics, when it
	// holds data no scrape has read yet, for a scrape to read the final
	// state: the collector's last flush lands here, and a pull exporter
	// that stops at once loses it. Shutdown ends as soon as a scrape that
	// read that state completes (at once when there is nothing new), and
	// at the latest after ShutdownGrace. 0 turns it off.
	ShutdownGrace time.Duration `mapstructure:"shutdown_grace"`

	// Namespace prefixes every metric name (namespace_name).
	Namespace string `mapstructure:"namespace"`
	// ConstLabels are added to every series.
	ConstLabels map[string]string `mapstructure:"const_labels"`
	// TranslationStrategy is how OTel names become Prometheus names; see the
	// README. When empty (the default), add_metric_suffixes decides as in
	// the contrib exporter, which means UnderscoreEscapingWithSuffixes with
	// the contrib feature gates at their defaults (translationStrategy).
	TranslationStrategy string `mapstructure:"translation_strategy"`
	// AddMetricSuffixes is the contrib exporter's deprecated switch, read
	// only when TranslationStrategy is empty and the contrib feature gate
	// exporter.prometheusexporter.DisableAddMetricSuffixes is off (it is on
	// by default): false then means UnderscoreEscapingWithoutSuffixes.
	// Default true.
	AddMetricSuffixes bool `mapstructure:"add_metric_suffixes"`
	// WithoutScopeInfo drops the otel_scope_* labels.
	WithoutScopeInfo bool `mapstructure:"without_scope_info"`
	// ResourceConstantLabels selects the resource attributes copied onto
	// every series of their resource as labels (the contrib exporter's
	// option: included / excluded patterns with * and ?).
	ResourceConstantLabels ResourceAttributesConfig `mapstructure:"resource_constant_labels"`
	// ResourceToTelemetryConversion is the contrib exporter's deprecated
	// form of ResourceConstantLabels (enabled: every resource attribute);
	// it is used only when ResourceConstantLabels is empty.
	ResourceToTelemetryConversion ResourceAttributesConfig `mapstructure:"resource_to_telemetry_conversion"`

	// EnableOpenMetrics: nil (absent, the default) negotiates OpenMetrics
	// like every other format; false never serves it (a scraper asking for
	// it gets protobuf or text), as the contrib exporter's default does;
	// true negotiates it.
	EnableOpenMetrics *bool `mapstructure:"enable_open_metrics"`
	// SendTimestamps writes each sample's point timestamp (milliseconds in
	// the Prometheus text formats and protobuf, seconds in OpenMetrics).
	SendTimestamps bool `mapstructure:"send_timestamps"`
	// SendingQueue is accepted for contrib configurations only disabled:
	// promstream stores every batch synchronously and has no queue.
	SendingQueue configoptional.Optional[exporterhelper.QueueBatchConfig] `mapstructure:"sending_queue"`

	// LabelOrder is sorted (by name, the default) or as_received (context
	// labels, then the point's attributes in their order): what a gateway's
	// own exporter writes, for byte-identical lines.
	LabelOrder string `mapstructure:"label_order"`
	// KeepEmptyLabels writes labels with empty values (`consumer=""`)
	// instead of leaving them out (Prometheus treats both alike).
	KeepEmptyLabels bool `mapstructure:"keep_empty_labels"`
	// TextBucketFormat is how le and quantile values are written in the text
	// formats: canonical ("5.0", the default) or shortest ("5", as
	// client_golang and Kong write them). OpenMetrics is always canonical.
	TextBucketFormat string `mapstructure:"text_bucket_format"`

	// Compatibility names the gateway whose own Prometheus exporter the
	// exposition reproduces, so its dashboards and alerts work unchanged:
	// kong, apisix or envoy; "" or none for none (compatibility.go). It
	// sets translation_strategy, without_scope_info, label_order,
	// keep_empty_labels and text_bucket_format (envoy also
	// enable_open_metrics, and names counters as sent); a key the
	// configuration sets itself wins. In a Config built in Go rather than
	// decoded, a field at its default value takes the preset's.
	Compatibility string `mapstructure:"compatibility"`

	// setKeys are the preset keys the decoded configuration sets itself;
	// decoded says it was decoded (Unmarshal), so setKeys is known.
	setKeys []string
	decoded bool
	// exactCounterNames is set by withPreset (compatibility: envoy).
	exactCounterNames bool

	// renamed are the deprecated keys this config was written with
	// (limits.go), warned about when the exporter is created.
	renamed []rename.Key

	// prevent unkeyed literal initialization
	_ struct{}
}

// ResourceAttributesConfig mirrors the contrib exporter's
// resourcetotelemetry.Settings, the type of both resource_constant_labels
// and resource_to_telemetry_conversion.
type ResourceAttributesConfig struct {
	// Included are patterns of resource attribute keys to copy ('*' any
	// sequence, '?' any one character, no escaping). With Included empty
	// and Excluded not, every attribute Excluded does not match is copied.
	Included []string `mapstructure:"included"`
	// Excluded are patterns of keys never copied, whatever Included says.
	Excluded []string `mapstructure:"excluded"`
	// Enabled copies every resource attribute (deprecated in the contrib
	// exporter; refused under resource_constant_labels).
	Enabled bool `mapstructure:"enabled"`
	// ExcludeServiceAttributes, with Enabled, leaves out service.name,
	// service.namespace and service.instance.id (deprecated likewise).
	ExcludeServiceAttributes bool `mapstructure:"exclude_service_attributes"`
}

// isEmpty is resourcetotelemetry.Settings.IsEmpty.
func (s *ResourceAttributesConfig) isEmpty() bool {
	return !s.Enabled && !s.ExcludeServiceAttributes && len(s.Included) == 0 && len(s.Excluded) == 0
}

// validate is resourcetotelemetry.Settings.Validate, with its messages.
func (s *ResourceAttributesConfig) validate(key string) error {
	if (s.Enabled || s.ExcludeServiceAttributes) && (len(s.Included) > 0 || len(s.Excluded) > 0) {
		return fmt.Errorf("%s: cannot configure both legacy enabled/exclude_service_attributes and included/excluded patterns; enabled and exclude_service_attributes are deprecated", key)
	}
	return nil
}

// Feature gates of the contrib prometheus exporter that change what its
// options mean. promstream reads them when the binary registers them (a
// distribution that also includes that exporter, where the command line can
// set them) and otherwise takes their defaults, the only values a
// distribution without it can have.
const (
	// gateDisableAddMetricSuffixes (beta, on by default since v0.132.0):
	// add_metric_suffixes is ignored.
	gateDisableAddMetricSuffixes = "exporter.prometheusexporter.DisableAddMetricSuffixes"
	// gateDisableResourceToTelemetry (alpha, off by default):
	// resource_to_telemetry_conversion is refused.
	gateDisableResourceToTelemetry = "exporter.prometheus.DisableResourceToTelemetryConversion"
)

// gateEnabled reads a feature gate from the global registry, or returns def
// when no component registered it.
func gateEnabled(id string, def bool) bool {
	enabled := def
	featuregate.GlobalRegistry().VisitAll(func(g *featuregate.Gate) {
		if g.ID() == id {
			enabled = g.IsEnabled()
		}
	})
	return enabled
}

func createDefaultConfig() *Config {
	srv := confighttp.NewDefaultServerConfig()
	srv.NetAddr.Endpoint = defaultEndpoint
	srv.ReadHeaderTimeout = defaultReadHeaderTimeout
	return &Config{
		ServerConfig:      srv,
		MetricExpiration:  defaultMetricExpiration,
		Limits:            defaultLimits(),
		ShutdownGrace:     defaultShutdownGrace,
		AddMetricSuffixes: true,
		LabelOrder:        labelOrderSorted,
		TextBucketFormat:  bucketFormatCanonical,
		SendingQueue:      configoptional.Default(exporterhelper.NewDefaultQueueConfig()),
	}
}

// Validate checks the exporter configuration, as its compatibility preset
// completes it.
func (c *Config) Validate() error {
	eff, _ := c.withPreset()
	return eff.validate()
}

func (c *Config) validate() error {
	var errs error
	if _, ok := presets[c.Compatibility]; !ok && c.Compatibility != "" && c.Compatibility != compatNone {
		errs = errors.Join(errs, fmt.Errorf(`compatibility must be "kong", "apisix", "envoy" or "none" (or left out), got %q`, c.Compatibility))
	}
	if c.ServerConfig.NetAddr.Endpoint == "" {
		errs = errors.Join(errs, errors.New("endpoint must not be empty"))
	}
	if c.MetricExpiration <= 0 {
		errs = errors.Join(errs, fmt.Errorf("metric_expiration must be positive, got %v (0 makes the contrib exporter serve nothing: every series has expired by the time a scrape reads it)", c.MetricExpiration))
	}
	errs = errors.Join(errs, c.Limits.validate())
	if c.ShutdownGrace < 0 {
		errs = errors.Join(errs, fmt.Errorf("shutdown_grace must not be negative, got %v", c.ShutdownGrace))
	}
	switch c.TranslationStrategy {
	case "", underscoreEscapingWithSuffixes, underscoreEscapingWithoutSuffixes, noUTF8EscapingWithSuffixes, noTranslation:
	default:
		errs = errors.Join(errs, fmt.Errorf("translation_strategy %q is not one of %s, %s, %s, %s", c.TranslationStrategy,
			underscoreEscapingWithSuffixes, underscoreEscapingWithoutSuffixes, noUTF8EscapingWithSuffixes, noTranslation))
	}
	if c.LabelOrder != labelOrderSorted && c.LabelOrder != labelOrderAsReceived {
		errs = errors.Join(errs, fmt.Errorf("label_order must be %q or %q, got %q", labelOrderSorted, labelOrderAsReceived, c.LabelOrder))
	}
	if c.TextBucketFormat != bucketFormatCanonical && c.TextBucketFormat != bucketFormatShortest {
		errs = errors.Join(errs, fmt.Errorf("text_bucket_format must be %q or %q, got %q", bucketFormatCanonical, bucketFormatShortest, c.TextBucketFormat))
	}
	if c.Namespace != "" && c.namespace() == "" {
		errs = errors.Join(errs, fmt.Errorf("namespace %q has no character valid in a Prometheus metric name", c.Namespace))
	}
	for name := range c.ConstLabels {
		// What a scraper that asks for escaped names reads (text 0.0.4
		// always does): "__x" from "_.x" under a UTF-8 strategy.
		escaped := exposition.EscapeLabelName(name, exposition.EscapeUnderscores)
		switch {
		case name == "" || strings.HasPrefix(c.constLabelName(name), "__") || strings.HasPrefix(escaped, "__") ||
			!utf8.ValidString(name) || strings.IndexByte(name, 0) >= 0:
			errs = errors.Join(errs, fmt.Errorf("const_labels: %q is not a valid Prometheus label name", name))
		case escaped == "le" || escaped == "quantile":
			errs = errors.Join(errs, fmt.Errorf("const_labels: %q is the label a histogram (le) or summary (quantile) writes on its samples: choose another name", name))
		}
	}
	// The contrib exporter's own rules and messages for its resource
	// options (exporter/prometheusexporter config.go, v0.165.1).
	if c.ResourceConstantLabels.Enabled || c.ResourceConstantLabels.ExcludeServiceAttributes {
		errs = errors.Join(errs, errors.New("enabled and exclude_service_attributes are not supported under resource_constant_labels; use included and excluded instead"))
	}
	if gateEnabled(gateDisableResourceToTelemetry, false) {
		if !c.ResourceToTelemetryConversion.isEmpty() {
			errs = errors.Join(errs, errors.New("resource_to_telemetry_conversion is disabled by the exporter.prometheus.DisableResourceToTelemetryConversion feature gate; use resource_constant_labels instead"))
		}
	} else if !c.ResourceToTelemetryConversion.isEmpty() && !c.ResourceConstantLabels.isEmpty() {
		errs = errors.Join(errs, errors.New("cannot configure both resource_to_telemetry_conversion and resource_constant_labels; resource_to_telemetry_conversion is deprecated"))
	}
	errs = errors.Join(errs, c.ResourceToTelemetryConversion.validate("resource_to_telemetry_conversion"),
		c.ResourceConstantLabels.validate("resource_constant_labels"))
	if c.SendingQueue.HasValue() {
		errs = errors.Join(errs, errors.New("sending_queue: promstream has no sending queue (it stores every batch in its series table synchronously, a memory write that cannot fail transiently, so a queue would only delay what scrapes see and hold a second copy of it; the contrib exporter marks the queue as unused by a pull exporter too): remove sending_queue or set enabled: false"))
	}
	return errs
}

// translationStrategy is the strategy in effect, with the contrib
// exporter's precedence (collector.go getTranslationConfiguration): an
// explicit translation_strategy; else, with the feature gate
// DisableAddMetricSuffixes on (its default), UnderscoreEscapingWithSuffixes;
// else add_metric_suffixes (false: UnderscoreEscapingWithoutSuffixes).
func (c *Config) translationStrategy() string {
	switch {
	case c.TranslationStrategy != "":
		return c.TranslationStrategy
	case gateEnabled(gateDisableAddMetricSuffixes, true) || c.AddMetricSuffixes:
		return underscoreEscapingWithSuffixes
	default:
		return underscoreEscapingWithoutSuffixes
	}
}

// addMetricSuffixesIgnored reports whether add_metric_suffixes: false was
// set but has no effect (the exporter logs it).
func (c *Config) addMetricSuffixesIgnored() bool {
	return !c.AddMetricSuffixes && c.translationStrategy() == underscoreEscapingWithSuffixes
}

// resourceLabels is the resource attribute selection in effect, as the
// contrib exporter's factory picks it: resource_constant_labels, else the
// deprecated resource_to_telemetry_conversion (unless its feature gate
// disables it). deprecated reports the latter.
func (c *Config) resourceLabels() (sel ResourceAttributesConfig, deprecated bool) {
	if c.ResourceConstantLabels.isEmpty() && !gateEnabled(gateDisableResourceToTelemetry, false) && !c.ResourceToTelemetryConversion.isEmpty() {
		return c.ResourceToTelemetryConversion, true
	}
	return c.ResourceConstantLabels, false
}

// namespace is the metric name prefix. Under the underscore-escaping
// strategies it is escaped as the contrib exporter's scrapers see it:
// characters outside [a-zA-Z0-9:_] become '_' (the contrib exporter writes
// "test-space_x" and its default escaping sends "test_space_x"), and a
// leading digit gets a '_' before it, as otlptranslator does to a whole
// name. The UTF-8 strategies keep it as it is. "" when nothing valid
// remains.
func (c *Config) namespace() string {
	if c.Namespace == "" || c.utf8Allowed() {
		return c.Namespace
	}
	ns := c.Namespace
	if ns[0] >= '0' && ns[0] <= '9' {
		ns = "_" + ns
	}
	ns = model.EscapeName(ns, model.UnderscoreEscaping)
	if strings.Trim(ns, "_") == "" {
		return ""
	}
	return ns
}

// constLabelName is a const_labels name as it is written: unchanged under
// the UTF-8 strategies, else escaped with underscores, as the contrib
// exporter's default escaping sends it ("another label" → another_label).
func (c *Config) constLabelName(name string) string {
	if c.utf8Allowed() || model.LegacyValidation.IsValidLabelName(name) {
		return name
	}
	return strings.ReplaceAll(model.EscapeName(name, model.UnderscoreEscaping), ":", "_")
}

// withSuffixes and utf8Allowed read the translation strategy as the contrib
// exporter does.
func (c *Config) withSuffixes() bool {
	s := c.translationStrategy()
	return s == underscoreEscapingWithSuffixes || s == noUTF8EscapingWithSuffixes
}

func (c *Config) utf8Allowed() bool {
	s := c.translationStrategy()
	return s == noUTF8EscapingWithSuffixes || s == noTranslation
}

// resourceMatcher is resourcetotelemetry's resourceAttributeMatcher: which
// resource attribute keys become labels.
type resourceMatcher struct {
	all, none              bool
	hasIncluded            bool
	included, excluded     map[string]struct{}
	includedRe, excludedRe []*regexp.Regexp
}

func newResourceMatcher(sel ResourceAttributesConfig) *resourceMatcher {
	m := &resourceMatcher{included: map[string]struct{}{}, excluded: map[string]struct{}{}}
	switch {
	case len(sel.Included) > 0 || len(sel.Excluded) > 0:
		// Patterns win over the legacy switch.
	case sel.Enabled && sel.ExcludeServiceAttributes:
		sel.Excluded = []string{"service.name", "service.instance.id", "service.namespace"}
	case sel.Enabled:
		m.all = true
		return m
	default:
		m.none = true
		return m
	}
	if len(sel.Included) == 1 && sel.Included[0] == "*" && len(sel.Excluded) == 0 {
		m.all = true
		return m
	}
	m.hasIncluded = len(sel.Included) > 0
	for _, p := range sel.Included {
		if strings.ContainsAny(p, "*?") {
			m.includedRe = append(m.includedRe, globToRegexp(p))
		} else {
			m.included[p] = struct{}{}
		}
	}
	for _, p := range sel.Excluded {
		if strings.ContainsAny(p, "*?") {
			m.excludedRe = append(m.excludedRe, globToRegexp(p))
		} else {
			m.excluded[p] = struct{}{}
		}
	}
	return m
}

// globToRegexp is resourcetotelemetry's: '*' any sequence, '?' any one
// character, everything else literal; it always compiles.
func globToRegexp(pattern string) *regexp.Regexp {
	quoted := regexp.QuoteMeta(pattern)
	return regexp.MustCompile("(?s)^" + strings.ReplaceAll(strings.ReplaceAll(quoted, `\*`, `.*`), `\?`, `.`) + "$")
}

// matches reports whether the resource attribute key becomes a label.
func (m *resourceMatcher) matches(key string) bool {
	switch {
	case m.all:
		return true
	case m.none:
		return false
	}
	if _, ok := m.excluded[key]; ok {
		return false
	}
	for _, re := range m.excludedRe {
		if re.MatchString(key) {
			return false
		}
	}
	if !m.hasIncluded {
		return true // only exclusions: every other attribute
	}
	if _, ok := m.included[key]; ok {
		return true
	}
	for _, re := range m.includedRe {
		if re.MatchString(key) {
			return true
		}
	}
	return false
}
