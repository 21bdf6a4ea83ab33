package gatewayreceiver // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver"

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
)

// Defaults of the health section. A poller field left at zero takes the
// default: list entries are decoded without a template, so zero is the only
// way to tell "not set".
const (
	defaultReportInterval       = 30 * time.Second
	defaultStaleAfter           = time.Minute
	defaultPollInterval         = 10 * time.Second
	defaultPollTimeout          = 5 * time.Second
	defaultKongMaxConcurrency   = 16
	defaultKongPageSize         = 1000
	defaultHealthPushPath       = "/v1/health"
	defaultPushStaleAfter       = 5 * time.Minute
	defaultPushExpiry           = time.Hour
	defaultPushMaxTargets       = 100_000
	maxKongPageSize             = 1000 // Kong refuses size > 1000
	healthBackoffMaxMultiplier  = 8    // a failing poller waits at most 8 intervals
	defaultPollerMaxConcurrency = 1
)

// HealthConfig is the `health` section: upstream health polled from admin
// APIs and pushed by gateways, kept as state and emitted as gauges.
type HealthConfig struct {
	// Profile names the emitted health metrics; empty (the default) follows
	// the receiver's own `profile`, so one setting names traffic and health.
	Profile HealthProfile `mapstructure:"profile"`
	// ReportInterval is how often the whole state is emitted, so exporters
	// never expire a live target whose state did not change.
	ReportInterval time.Duration `mapstructure:"report_interval"`
	// StaleAfter is how long a polled target keeps its last state while its
	// poller fails; then it becomes `unknown`.
	StaleAfter time.Duration `mapstructure:"stale_after"`
	// Shard splits the polled upstreams across collectors by name.
	Shard ShardConfig `mapstructure:"shard"`
	// Push is the health-event endpoint on the receiver's HTTP server.
	Push configoptional.Optional[HealthPushConfig] `mapstructure:"push"`

	Kong   []PollerConfig `mapstructure:"kong"`
	APISIX []PollerConfig `mapstructure:"apisix"`
	Envoy  []PollerConfig `mapstructure:"envoy"`

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

// HealthPushConfig configures the push endpoint and the lifetime of the
// rows only pushes keep (a row a poller reports stays the poller's).
type HealthPushConfig struct {
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
	// Interval between the end of one poll and the start of the next.
	Interval time.Duration `mapstructure:"interval"`
	// MaxConcurrency bounds the requests in flight (Kong polls one health
	// endpoint per upstream).
	MaxConcurrency int `mapstructure:"max_concurrency"`
	// AdminToken is sent as Kong-Admin-Token (Kong only).
	AdminToken configopaque.String `mapstructure:"admin_token"`
	// PageSize is Kong's `size` for paginated lists, at most 1000 (Kong only).
	PageSize int `mapstructure:"page_size"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// HealthProfile is the naming profile of the health metrics.
type HealthProfile string

// The naming profiles.
const (
	ProfileOTel   HealthProfile = "otel"
	ProfileKong   HealthProfile = "kong"
	ProfileAPISIX HealthProfile = "apisix"
)

// UnmarshalText normalises the profile while decoding and names the bad
// value when it is none of the three.
func (p *HealthProfile) UnmarshalText(b []byte) error {
	switch v := HealthProfile(strings.ToLower(string(b))); v {
	case ProfileOTel, ProfileKong, ProfileAPISIX:
		*p = v
		return nil
	}
	return fmt.Errorf("profile must be one of otel, kong, apisix, got %q", string(b))
}

func defaultHealthConfig() HealthConfig {
	return HealthConfig{
		Profile:        "",
		ReportInterval: defaultReportInterval,
		StaleAfter:     defaultStaleAfter,
		Shard:          ShardConfig{Index: 0, Count: 1},
		Push: configoptional.Some(HealthPushConfig{
			Path: defaultHealthPushPath, StaleAfter: defaultPushStaleAfter, Expiry: defaultPushExpiry, MaxTargets: defaultPushMaxTargets,
		}),
	}
}

// Validate checks the health section; messages name the field and value.
func (c *HealthConfig) Validate() error {
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
	for _, group := range c.pollerGroups() {
		for i := range group.list {
			errs = errors.Join(errs, group.list[i].validate(group.name+"["+strconv.Itoa(i)+"]", group.kind, c.StaleAfter))
		}
	}
	return errs
}

func (p *HealthPushConfig) validate() error {
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
	return errs
}

func (p *PollerConfig) validate(name string, kind pollerKind, staleAfter time.Duration) error {
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
	if p.PageSize < 0 || p.PageSize > maxKongPageSize {
		errs = errors.Join(errs, fmt.Errorf("%s.page_size must be in [1, %d], got %d", name, maxKongPageSize, p.PageSize))
	}
	if kind != pollKong && (p.AdminToken != "" || p.PageSize != 0) {
		errs = errors.Join(errs, fmt.Errorf("%s: admin_token and page_size apply to kong pollers only", name))
	}
	if iv := p.interval(); staleAfter > 0 && staleAfter <= iv {
		errs = errors.Join(errs, fmt.Errorf("stale_after (%v) must be longer than %s.interval (%v)", staleAfter, name, iv))
	}
	return errs
}

// validateHealth checks what involves the rest of the receiver's config.
func (c *Config) validateHealth() error {
	if c.Health.HasValue() && c.Health.Get().Push.HasValue() && !c.Protocols.HTTP.HasValue() {
		return errors.New("health.push needs protocols.http, which is disabled; set health.push.enabled: false")
	}
	return nil
}

type pollerKind uint8

const (
	pollKong pollerKind = iota
	pollAPISIX
	pollEnvoy
)

type pollerGroup struct {
	name string
	kind pollerKind
	list []PollerConfig
}

func (c *HealthConfig) pollerGroups() []pollerGroup {
	return []pollerGroup{{"kong", pollKong, c.Kong}, {"apisix", pollAPISIX, c.APISIX}, {"envoy", pollEnvoy, c.Envoy}}
}

func (p *PollerConfig) interval() time.Duration {
	if p.Interval > 0 {
		return p.Interval
	}
	return defaultPollInterval
}

func (p *PollerConfig) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return defaultPollTimeout
}

func (p *PollerConfig) maxConcurrency(kind pollerKind) int {
	switch {
	case p.MaxConcurrency > 0:
		return p.MaxConcurrency
	case kind == pollKong:
		return defaultKongMaxConcurrency
	}
	return defaultPollerMaxConcurrency
}

func (p *PollerConfig) pageSize() int {
	if p.PageSize > 0 {
		return p.PageSize
	}
	return defaultKongPageSize
}
