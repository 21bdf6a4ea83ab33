package health

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// Defaults of the health section. A poller field left at zero takes the
// default: list entries are decoded without a template, so zero is the only
// way to tell "not set".
const (
	defaultReportInterval = 30 * time.Second
	defaultStaleAfter     = time.Minute
	defaultPollInterval   = 10 * time.Second
	defaultPollTimeout    = 5 * time.Second
	defaultPageSize       = 100 // Kong's own default; see PollerConfig.PageSize
	DefaultPushPath       = "/v1/health"
	defaultPushStaleAfter = 5 * time.Minute
	defaultPushExpiry     = time.Hour
	defaultPushMaxTargets = 100_000
	defaultPushClockSkew  = 5 * time.Minute
	maxPageSize           = 1000 // Kong refuses size > 1000
	// defaultMaxResponseBodySize bounds an answer of a gateway whose home
	// names no bound of its own.
	defaultMaxResponseBodySize = 16 << 20
	backoffMaxMultiplier       = 8 // a failing poller waits at most 8 intervals
)

// Config is the `health` section: upstream health polled from admin APIs and pushed by
// gateways, kept as state and emitted as gauges.
type Config struct {
	// Profile names the emitted health metrics; empty (the default) follows
	// the receiver's own `profile`, so one setting names traffic and health.
	Profile Profile `mapstructure:"profile"`
	// ReportInterval is how often the whole state is emitted, so exporters
	// never expire a live target whose state did not change.
	ReportInterval time.Duration `mapstructure:"report_interval"`
	// StaleAfter is how long a polled target keeps its last state while its
	// poller fails; then it becomes `unknown`.
	StaleAfter time.Duration `mapstructure:"stale_after"`
	// Shard splits the polled upstreams across collectors by name.
	Shard ShardConfig `mapstructure:"shard"`
	// Push is the health-event endpoint on the receiver's HTTP server.
	Push configoptional.Optional[PushConfig] `mapstructure:"push"`
	// Pollers are the admin APIs to poll, by gateway name (`kong:`,
	// `apisix:`, `envoy:`: every registered gateway with a poller).
	Pollers map[string][]PollerConfig `mapstructure:",remain"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// ShardConfig keeps the upstreams whose name hashes to Index modulo Count.
type ShardConfig struct {
	Index int `mapstructure:"index"`
	Count int `mapstructure:"count"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// PushConfig configures the push endpoint and the lifetime of the
// rows only pushes keep (a row a poller reports stays the poller's).
type PushConfig struct {
	// Path on the receiver's HTTP server that accepts POSTed events.
	Path string `mapstructure:"path"`
	// StaleAfter is how long a pushed row keeps its state without a new
	// event about it; then it becomes `unknown`. Pushers re-send each
	// target's state more often than this (a heartbeat).
	StaleAfter time.Duration `mapstructure:"stale_after"`
	// Expiry is how long a pushed row lives without a new event; then it is
	// removed and its series withdrawn, as a target gone from a poll is.
	Expiry time.Duration `mapstructure:"expiry"`
	// MaxTargets bounds the pushed rows: an event that would add a row
	// beyond it is refused (existing rows still update), so a pusher
	// inventing names cannot grow the table without bound.
	MaxTargets int `mapstructure:"max_targets"`
	// MaxClockSkew is how far an event's timestamp may be from the
	// collector's clock, either way; an event beyond it is refused
	// (outcome clock_skew), so a wrong clock can never pin a row.
	MaxClockSkew time.Duration `mapstructure:"max_clock_skew"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// PollerConfig is one admin API to poll. Every confighttp client setting
// applies (endpoint, tls, headers, timeout per request, proxy_url, auth).
type PollerConfig struct {
	confighttp.ClientConfig `mapstructure:",squash"`
	// Instance names the gateway node in the emitted series
	// (service.instance.id, Prometheus `instance`); default: the endpoint's
	// host:port.
	Instance string `mapstructure:"instance"`
	// Interval between the starts of two polls; a poll's requests are
	// spread over it.
	Interval time.Duration `mapstructure:"interval"`
	// MaxConcurrency bounds the requests in flight (Kong polls one health
	// endpoint per upstream). Requests are paced (RequestRate), so it is a
	// cap reached only when the admin API answers slowly.
	MaxConcurrency int `mapstructure:"max_concurrency"`
	// AdminToken is sent as Kong-Admin-Token (Kong only).
	AdminToken configopaque.String `mapstructure:"admin_token"`
	// PageSize is Kong's `size` for paginated lists, at most 1000 (Kong
	// only). The default, 100, is Kong's own: a page of 1,000 upstreams
	// keeps a gateway worker busy encoding ~1 MB of JSON while proxy
	// requests wait (bench/health TestGatewayCost).
	PageSize int `mapstructure:"page_size"`
	// RequestRate is the requests per second a poll sends; 0 (the
	// default): a poll's requests are spread evenly over its interval,
	// however many there are.
	RequestRate float64 `mapstructure:"request_rate"`
	// MaxResponseBodySize bounds one answer's body in bytes (after gzip
	// decoding); a larger answer is refused unread (outcome too_large) and
	// the rows keep their last state. Default: the gateway's
	// (PollerSpec.MaxResponseBodySize).
	MaxResponseBodySize int64 `mapstructure:"max_response_body_size"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// Profile is the naming profile of the health metrics: one of
// ProfileNames, or "" to follow the receiver's profile.
type Profile string

// ProfileNames are the naming profiles (naming.go), the default first.
func ProfileNames() []string {
	names := make([]string, len(namings))
	for i, n := range namings {
		names[i] = string(n.profile)
	}
	return names
}

// UnmarshalText normalises the profile while decoding and names the bad
// value when it is none of ProfileNames.
func (p *Profile) UnmarshalText(b []byte) error {
	v := strings.ToLower(string(b))
	for _, name := range ProfileNames() {
		if v == name {
			*p = Profile(v)
			return nil
		}
	}
	return fmt.Errorf("profile must be one of %s, got %q", strings.Join(ProfileNames(), ", "), string(b))
}

// DefaultConfig is the health section's defaults: no pollers, push on.
func DefaultConfig() Config {
	return Config{
		ReportInterval: defaultReportInterval,
		StaleAfter:     defaultStaleAfter,
		Shard:          ShardConfig{Index: 0, Count: 1},
		Push: configoptional.Some(PushConfig{
			Path: DefaultPushPath, StaleAfter: defaultPushStaleAfter, Expiry: defaultPushExpiry, MaxTargets: defaultPushMaxTargets,
			MaxClockSkew: defaultPushClockSkew,
		}),
	}
}

// Validate checks the health section; messages name the field and value.
func (c *Config) Validate() error {
	var errs error
	if c.ReportInterval <= 0 {
		errs = errors.Join(errs, fmt.Errorf("report_interval must be positive, got %v", c.ReportInterval))
	}
	if c.StaleAfter <= 0 {
		errs = errors.Join(errs, fmt.Errorf("stale_after must be positive, got %v", c.StaleAfter))
	}
	if c.Shard.Count < 1 {
		errs = errors.Join(errs, fmt.Errorf("shard.count must be at least 1, got %d", c.Shard.Count))
	} else if c.Shard.Index < 0 || c.Shard.Index >= c.Shard.Count {
		errs = errors.Join(errs, fmt.Errorf("shard.index must be in [0, %d), got %d", c.Shard.Count, c.Shard.Index))
	}
	if c.Push.HasValue() {
		errs = errors.Join(errs, c.Push.Get().validate())
	}
	for name := range c.Pollers {
		if g, ok := gateway.Lookup(name); !ok || g.Poller == nil {
			errs = errors.Join(errs, fmt.Errorf("%q is neither a health setting nor a gateway with a poller (%s)", name, gateway.OneOf(gateway.PollerNames())))
		}
	}
	for _, group := range c.pollerGroups() {
		for i := range group.list {
			errs = errors.Join(errs, group.list[i].validate(group.name+"["+strconv.Itoa(i)+"]", group.spec, c.StaleAfter))
		}
	}
	return errs
}

func (p *PushConfig) validate() error {
	var errs error
	if !strings.HasPrefix(p.Path, "/") {
		errs = errors.Join(errs, fmt.Errorf("push.path must start with \"/\", got %q", p.Path))
	}
	if p.StaleAfter <= 0 {
		errs = errors.Join(errs, fmt.Errorf("push.stale_after must be positive, got %v", p.StaleAfter))
	} else if p.Expiry <= p.StaleAfter {
		errs = errors.Join(errs, fmt.Errorf("push.expiry (%v) must be longer than push.stale_after (%v)", p.Expiry, p.StaleAfter))
	}
	if p.MaxTargets < 1 {
		errs = errors.Join(errs, fmt.Errorf("push.max_targets must be at least 1, got %d", p.MaxTargets))
	}
	if p.MaxClockSkew <= 0 {
		errs = errors.Join(errs, fmt.Errorf("push.max_clock_skew must be positive, got %v", p.MaxClockSkew))
	}
	return errs
}

func (p *PollerConfig) validate(name string, spec *gateway.PollerSpec, staleAfter time.Duration) error {
	var errs error
	if u, err := url.Parse(p.Endpoint); p.Endpoint == "" {
		errs = errors.Join(errs, fmt.Errorf("%s.endpoint must not be empty", name))
	} else if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = errors.Join(errs, fmt.Errorf("%s.endpoint must be an http:// or https:// URL, got %q", name, p.Endpoint))
	}
	if p.Interval < 0 {
		errs = errors.Join(errs, fmt.Errorf("%s.interval must be positive, got %v", name, p.Interval))
	}
	if p.Timeout < 0 {
		errs = errors.Join(errs, fmt.Errorf("%s.timeout must be positive, got %v", name, p.Timeout))
	}
	if p.MaxConcurrency < 0 {
		errs = errors.Join(errs, fmt.Errorf("%s.max_concurrency must be positive, got %d", name, p.MaxConcurrency))
	}
	if p.PageSize < 0 || p.PageSize > maxPageSize {
		errs = errors.Join(errs, fmt.Errorf("%s.page_size must be in [1, %d], got %d", name, maxPageSize, p.PageSize))
	}
	if p.RequestRate < 0 {
		errs = errors.Join(errs, fmt.Errorf("%s.request_rate must be positive (requests per second; 0: spread over the interval), got %v", name, p.RequestRate))
	}
	if p.MaxResponseBodySize < 0 {
		errs = errors.Join(errs, fmt.Errorf("%s.max_response_body_size must be positive (bytes), got %d", name, p.MaxResponseBodySize))
	}
	if !spec.Paged && (p.AdminToken != "" || p.PageSize != 0) {
		errs = errors.Join(errs, fmt.Errorf("%s: admin_token and page_size apply to %s pollers only", name, gateway.OneOf(gateway.PagedPollerNames())))
	}
	if iv := p.interval(spec); staleAfter > 0 && staleAfter <= iv {
		errs = errors.Join(errs, fmt.Errorf("stale_after (%v) must be longer than %s.interval (%v)", staleAfter, name, iv))
	}
	return errs
}

type pollerGroup struct {
	name string
	spec *gateway.PollerSpec
	list []PollerConfig
}

// pollerGroups lists the configured pollers in registry order, so pollers
// are built and named the same way on every start.
func (c *Config) pollerGroups() []pollerGroup {
	var groups []pollerGroup
	for _, g := range gateway.Gateways() {
		if g.Poller != nil && len(c.Pollers[g.Name]) > 0 {
			groups = append(groups, pollerGroup{g.Name, g.Poller, c.Pollers[g.Name]})
		}
	}
	return groups
}

func (p *PollerConfig) interval(spec *gateway.PollerSpec) time.Duration {
	switch {
	case p.Interval > 0:
		return p.Interval
	case spec.Interval > 0:
		return spec.Interval
	}
	return defaultPollInterval
}

func (p *PollerConfig) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return defaultPollTimeout
}

func (p *PollerConfig) maxConcurrency(spec *gateway.PollerSpec) int {
	if p.MaxConcurrency > 0 {
		return p.MaxConcurrency
	}
	return max(spec.MaxConcurrency, 1)
}

func (p *PollerConfig) maxResponseBodySize(spec *gateway.PollerSpec) int64 {
	switch {
	case p.MaxResponseBodySize > 0:
		return p.MaxResponseBodySize
	case spec.MaxResponseBodySize > 0:
		return spec.MaxResponseBodySize
	}
	return defaultMaxResponseBodySize
}

func (p *PollerConfig) pageSize() int {
	if p.PageSize > 0 {
		return p.PageSize
	}
	return defaultPageSize
}
