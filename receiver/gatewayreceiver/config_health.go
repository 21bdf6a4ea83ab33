package gatewayreceiver // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver"

import (
	"errors"

	"go.opentelemetry.io/collector/config/configoptional"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/health"
)

// HealthConfig is the `health` section (internal/health/config.go): upstream
// health polled from admin APIs and pushed by gateways, kept as state and
// emitted as gauges.
type HealthConfig = health.Config

// PollerConfig is one admin API to poll, under the gateway's name in the
// health section (`kong:`, `apisix:`, `envoy:`).
type PollerConfig = health.PollerConfig

// HealthProfile is the naming profile of the health metrics.
type HealthProfile = health.Profile

// The naming profiles, as health.profile values.
const (
	ProfileOTel   HealthProfile = health.ProfileOTel
	ProfileKong   HealthProfile = health.ProfileKong
	ProfileAPISIX HealthProfile = health.ProfileAPISIX
)

func defaultHealthConfig() HealthConfig { return health.DefaultConfig() }

// validateHealth checks what involves the rest of the receiver's config.
func (c *Config) validateHealth() error {
	if c.Health.HasValue() && c.Health.Get().Push.HasValue() && !c.Protocols.HTTP.HasValue() {
		return errors.New("health.push needs protocols.http, which is disabled; set health.push.enabled: false")
	}
	return nil
}

// healthProfile is health.profile, or the receiver-wide profile when the
// health section does not set its own.
func (c *Config) healthProfile() HealthProfile {
	if c.Health.HasValue() && c.Health.Get().Profile != "" {
		return c.Health.Get().Profile
	}
	return HealthProfile(c.Profile)
}

// healthConfig is the health section as the health part runs it: with the
// push bound of the limits section (limits.max_pushed_targets).
func (c *Config) healthConfig() *HealthConfig {
	if !c.Health.HasValue() {
		return nil
	}
	hc := *c.Health.Get()
	if p := hc.Push.Get(); p != nil {
		pc := *p
		pc.MaxTargets = c.Limits.MaxPushedTargets
		hc.Push = configoptional.Some(pc)
	}
	return &hc
}
