package promstreamexporter

import (
	"slices"
	"strconv"

	"go.opentelemetry.io/collector/confmap"
	"go.uber.org/zap"
)

// The compatibility presets: one setting, `compatibility: kong | apisix |
// envoy`, in place of the keys under which the exposition is the one the
// gateway's own Prometheus exporter writes, so its dashboards and alerts
// work unchanged. A key the configuration sets itself wins over its preset
// (and is warned about when it contradicts it).

// Compatibility values.
const (
	compatNone   = "none"
	compatKong   = "kong"
	compatAPISIX = "apisix"
	compatEnvoy  = "envoy"
)

// The keys a preset sets, as users write them.
const (
	keyTranslationStrategy = "translation_strategy"
	keyWithoutScopeInfo    = "without_scope_info"
	keyLabelOrder          = "label_order"
	keyKeepEmptyLabels     = "keep_empty_labels"
	keyTextBucketFormat    = "text_bucket_format"
	keyEnableOpenMetrics   = "enable_open_metrics"
)

// presetKeys are the keys a preset may set: Unmarshal records which of them
// the configuration sets itself.
var presetKeys = []string{keyTranslationStrategy, keyWithoutScopeInfo, keyLabelOrder, keyKeepEmptyLabels,
	keyTextBucketFormat, keyEnableOpenMetrics}

// preset is what a compatibility value sets.
type preset struct {
	// The gateways' own exporters write names as they are (no unit or type
	// suffix: kong_bandwidth_bytes and apisix_http_status are counters
	// without _total), no scope labels, labels in the order the gateway
	// writes them (the receiver's profiles send them so), empty labels
	// (consumer=""), and le as client_golang and nginx-lua-prometheus
	// write it ("25", not "25.0").
	translationStrategy string
	withoutScopeInfo    bool
	labelOrder          string
	keepEmptyLabels     bool
	textBucketFormat    string
	// openMetrics, when not nil, is enable_open_metrics' value.
	openMetrics *bool
	// exactCounterNames: a counter x_total does not claim the name x
	// (series.Options.ExactCounterNames). No key of its own: only Envoy
	// names two counters x and x_total.
	exactCounterNames bool
}

// gatewayPreset is what every preset sets: the five keys of the recipe
// the READMEs gave before presets existed.
var gatewayPreset = preset{
	translationStrategy: underscoreEscapingWithoutSuffixes,
	withoutScopeInfo:    true,
	labelOrder:          labelOrderAsReceived,
	keepEmptyLabels:     true,
	textBucketFormat:    bucketFormatShortest,
}

// envoyPreset adds what Envoy's /stats/prometheus needs (docs/gateways.md
// §3d): counters named as their stats, x and x_total side by side
// (envoy_cluster_upstream_rq{envoy_response_code} beside
// envoy_cluster_upstream_rq_total), each `# TYPE … counter`; and no
// OpenMetrics, which Envoy's admin never serves (text 0.0.4, or protobuf
// when asked): in OpenMetrics a counter without _total can only be
// unknown, and x_total would be family x. Prometheus asks for text when
// OpenMetrics is not offered (every scrape_protocols list it accepts ends
// with a text format).
var envoyPreset = func() preset {
	p := gatewayPreset
	p.openMetrics = new(false)
	p.exactCounterNames = true
	return p
}()

var presets = map[string]preset{
	compatKong:   gatewayPreset,
	compatAPISIX: gatewayPreset,
	compatEnvoy:  envoyPreset,
}

// recordPresetKeys notes which preset keys conf sets, for withPreset, when
// conf names a preset (a configuration without one decodes to the plain
// defaults).
func (c *Config) recordPresetKeys(conf *confmap.Conf) {
	c.setKeys, c.decoded = nil, false
	if !conf.IsSet("compatibility") {
		return
	}
	for _, k := range presetKeys {
		if conf.IsSet(k) {
			c.setKeys = append(c.setKeys, k)
		}
	}
	c.decoded = true
}

// isSet reports whether the configuration sets key itself: a decoded
// configuration when its YAML has the key, one built in Go when the field
// differs from its default (changed says whether it does).
func (c *Config) isSet(key string, changed bool) bool {
	if c.decoded {
		return slices.Contains(c.setKeys, key)
	}
	return changed
}

// presetOverride is a key set explicitly to another value than the
// preset's: the explicit value wins.
type presetOverride struct {
	key, preset, set string
}

// withPreset returns the configuration in effect: c with its compatibility
// preset's values for the keys c does not set itself, and the keys c sets
// to another value than the preset's. Without a preset (or an unknown one,
// which Validate refuses) it is c.
func (c *Config) withPreset() (*Config, []presetOverride) {
	out := *c
	p, ok := presets[c.Compatibility]
	if !ok {
		return &out, nil
	}
	var over []presetOverride
	str := func(key string, field *string, def, want string) {
		switch {
		case !c.isSet(key, *field != def):
			*field = want
		case *field != want:
			over = append(over, presetOverride{key: key, preset: want, set: *field})
		}
	}
	boolean := func(key string, field *bool, def, want bool) {
		switch {
		case !c.isSet(key, *field != def):
			*field = want
		case *field != want:
			over = append(over, presetOverride{key: key, preset: strconv.FormatBool(want), set: strconv.FormatBool(*field)})
		}
	}
	str(keyTranslationStrategy, &out.TranslationStrategy, "", p.translationStrategy)
	boolean(keyWithoutScopeInfo, &out.WithoutScopeInfo, false, p.withoutScopeInfo)
	str(keyLabelOrder, &out.LabelOrder, labelOrderSorted, p.labelOrder)
	boolean(keyKeepEmptyLabels, &out.KeepEmptyLabels, false, p.keepEmptyLabels)
	str(keyTextBucketFormat, &out.TextBucketFormat, bucketFormatCanonical, p.textBucketFormat)
	if p.openMetrics != nil {
		switch {
		case !c.isSet(keyEnableOpenMetrics, c.EnableOpenMetrics != nil):
			out.EnableOpenMetrics = new(*p.openMetrics)
		case c.EnableOpenMetrics == nil || *c.EnableOpenMetrics != *p.openMetrics:
			set := "null" // written without a value: negotiated
			if c.EnableOpenMetrics != nil {
				set = strconv.FormatBool(*c.EnableOpenMetrics)
			}
			over = append(over, presetOverride{key: keyEnableOpenMetrics, preset: strconv.FormatBool(*p.openMetrics), set: set})
		}
	}
	out.exactCounterNames = p.exactCounterNames
	return &out, over
}

// warnOverrides logs each explicit key that contradicts the preset: the
// exposition then differs from the gateway's own, which is allowed (the
// key wins) but worth saying, since that is what the preset exists for.
func warnOverrides(log *zap.Logger, compatibility string, over []presetOverride) {
	for _, o := range over {
		log.Warn("A key set explicitly overrides the compatibility preset: the exposition differs from the gateway's own exporter there",
			zap.String("compatibility", compatibility), zap.String("key", o.key),
			zap.String("preset", o.preset), zap.String("set", o.set))
	}
}
