// Package gatewayconverter is the otelcol-gateway distribution's confmap
// converter: it keeps the settings of the gateway receiver, the cumulative
// processor, the promstream exporter and contrib's remote-write exporter
// that must agree with each other in step, across the components of each
// metrics pipeline.
//
// Components cannot see each other's configuration: a receiver does not
// know which processor its points reach, nor with what max_stale. The
// converter runs once, on the whole resolved configuration, before any
// component decodes its own (confmap.Resolver applies converters after
// providers and ${env:…} expansion), so it is the one place that sees the
// pipelines and every component's settings together, and the log it writes
// to is the collector's own (confmap.ConverterSettings.Logger). The
// alternatives were worse: a process-wide registry the components fill as
// they are created sees no pipelines (which receiver feeds which processor)
// and only learns the configuration after the defaults it would derive have
// been applied; checking at Start is too late to derive a default.
//
// For each metrics pipeline it
//
//   - derives what is not set from what is (logged at info, so the
//     effective values can be read in the log):
//     the processor's overflow_keep from the receivers' collector_label;
//     the receiver's tuple_expiry from the processor's max_stale and the
//     exporter's metric_expiration (the longest); with storage on both, the
//     receiver's checkpoint_replay from the sum of the processor's
//     checkpoint_interval and its own flush_interval; the processor's
//     limits.max_streams and the exporter's limits.max_series from the
//     receiver's limits, when those need more than the defaults;
//   - refuses combinations that lose data, the fix in the message: a
//     tuple_expiry shorter than max_stale or metric_expiration (the
//     processor or exporter would hold series the receiver let go, so
//     their bounds no longer hold what the receiver admits), a
//     checkpoint_replay shorter than checkpoint_interval + flush_interval
//     (a crash loses the windows in between), an overflow_keep without the
//     collector label (several collectors' overflow series collide);
//   - warns about a remote-write exporter whose external_labels name the
//     collector label (the exporter never overrides a label a series has,
//     so it does nothing to the gateway series: remove it, set
//     collector_name), and about bounds set so that the processor or the
//     exporter folds what the receiver admits.
//
// Only keys the user did not set are ever written. Without this converter
// (the components in another distribution) each component keeps its own
// defaults, which agree with each other's defaults.
package gatewayconverter // import "github.com/otelgateway/otelgateway/converter/gatewayconverter"

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"go.uber.org/zap"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter"
	"github.com/otelgateway/otelgateway/processor/cumulativeprocessor"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver"
)

// The component types the converter knows.
const (
	typeReceiver  = "gateway"
	typeProcessor = "cumulative"
	typeExporter  = "promstream"
)

// remoteWriteTypes are contrib's remote-write exporter under its current
// key and its deprecated alias.
var remoteWriteTypes = []string{"prometheus_remote_write", "prometheusremotewrite"}

// NewFactory returns the converter's factory, for ocb's builder-config
// `converters:`.
func NewFactory() confmap.ConverterFactory {
	return confmap.NewConverterFactory(func(set confmap.ConverterSettings) confmap.Converter {
		log := set.Logger
		if log == nil {
			log = zap.NewNop()
		}
		return &converter{log: log}
	})
}

type converter struct {
	log *zap.Logger
}

// Convert derives, checks and warns, as the package comment says. It
// returns every refused combination, joined.
func (c *converter) Convert(_ context.Context, conf *confmap.Conf) error {
	g := readGraph(conf)
	if len(g.receivers) == 0 {
		return nil
	}
	var errs error
	errs = errors.Join(errs, c.overflowKeep(conf, g))
	errs = errors.Join(errs, c.tupleExpiry(conf, g))
	errs = errors.Join(errs, c.checkpointReplay(conf, g))
	c.maxStreams(conf, g)
	c.maxSeries(conf, g)
	c.externalLabels(conf, g)
	return errs
}

// graph is what the converter reads of the configuration: the gateway
// receivers, cumulative processors, promstream and remote-write exporters
// of the metrics pipelines, decoded over their defaults, and which reach
// which.
type graph struct {
	receivers  map[string]*gatewayreceiver.Config
	processors map[string]*cumulativeprocessor.Config
	exporters  map[string]*promstreamexporter.Config
	// remoteWrite are the remote-write exporters (their raw sections).
	remoteWrite map[string]*confmap.Conf
	// pipelines are the metrics pipelines with a gateway receiver.
	pipelines []pipeline
}

type pipeline struct {
	id                              string
	receivers, processors, exporter []string
}

// readGraph decodes the components of the metrics pipelines that hold a
// gateway receiver. A component whose section does not decode is left out:
// the collector reports it, better than a converter could.
func readGraph(conf *confmap.Conf) *graph {
	g := &graph{
		receivers:   map[string]*gatewayreceiver.Config{},
		processors:  map[string]*cumulativeprocessor.Config{},
		exporters:   map[string]*promstreamexporter.Config{},
		remoteWrite: map[string]*confmap.Conf{},
	}
	pipes, err := conf.Sub("service::pipelines")
	if err != nil {
		return g
	}
	ids := make([]string, 0)
	for id := range pipes.ToStringMap() {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if typeOf(id) != "metrics" {
			continue
		}
		p := pipeline{
			id:         id,
			receivers:  stringList(pipes.Get(id + "::receivers")),
			processors: stringList(pipes.Get(id + "::processors")),
			exporter:   stringList(pipes.Get(id + "::exporters")),
		}
		has := false
		for _, r := range p.receivers {
			if typeOf(r) != typeReceiver {
				continue
			}
			if _, ok := g.receivers[r]; !ok {
				cfg := gatewayreceiver.NewFactory().CreateDefaultConfig().(*gatewayreceiver.Config)
				if !decode(conf, "receivers::"+r, cfg) {
					continue
				}
				g.receivers[r] = cfg
			}
			has = true
		}
		if !has {
			continue
		}
		g.pipelines = append(g.pipelines, p)
		for _, pr := range p.processors {
			if _, ok := g.processors[pr]; ok || typeOf(pr) != typeProcessor {
				continue
			}
			cfg := cumulativeprocessor.NewFactory().CreateDefaultConfig().(*cumulativeprocessor.Config)
			if decode(conf, "processors::"+pr, cfg) {
				g.processors[pr] = cfg
			}
		}
		for _, e := range p.exporter {
			switch {
			case typeOf(e) == typeExporter:
				if _, ok := g.exporters[e]; ok {
					continue
				}
				cfg := promstreamexporter.NewFactory().CreateDefaultConfig().(*promstreamexporter.Config)
				if decode(conf, "exporters::"+e, cfg) {
					g.exporters[e] = cfg
				}
			case slices.Contains(remoteWriteTypes, typeOf(e)):
				if sub, err := conf.Sub("exporters::" + e); err == nil {
					g.remoteWrite[e] = sub
				}
			}
		}
	}
	return g
}

// decode unmarshals the section at key over cfg's defaults.
func decode(conf *confmap.Conf, key string, cfg any) bool {
	sub, err := conf.Sub(key)
	if err != nil {
		return false
	}
	return sub.Unmarshal(cfg) == nil
}

// typeOf is a component ID's type: "gateway/edge" → "gateway".
func typeOf(id string) string {
	t, _, _ := strings.Cut(id, "/")
	return t
}

func stringList(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// downstream lists, for receiver r, the processors, promstream exporters and
// remote-write exporters of the metrics pipelines it is in.
func (g *graph) downstream(r string) (procs, exps, rws []string) {
	for _, p := range g.pipelines {
		if !slices.Contains(p.receivers, r) {
			continue
		}
		for _, pr := range p.processors {
			if _, ok := g.processors[pr]; ok && !slices.Contains(procs, pr) {
				procs = append(procs, pr)
			}
		}
		for _, e := range p.exporter {
			if _, ok := g.exporters[e]; ok && !slices.Contains(exps, e) {
				exps = append(exps, e)
			}
			if _, ok := g.remoteWrite[e]; ok && !slices.Contains(rws, e) {
				rws = append(rws, e)
			}
		}
	}
	return procs, exps, rws
}

// upstream lists the gateway receivers of the metrics pipelines component
// id (a processor or an exporter) is in.
func (g *graph) upstream(id string, isProcessor bool) []string {
	var out []string
	for _, p := range g.pipelines {
		in := p.exporter
		if isProcessor {
			in = p.processors
		}
		if !slices.Contains(in, id) {
			continue
		}
		for _, r := range p.receivers {
			if _, ok := g.receivers[r]; ok && !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	sort.Strings(out)
	return out
}

// sortedKeys returns m's keys in order, so messages and logs are stable.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// set writes value at key (a key the user did not set) and logs it.
func (c *converter) set(conf *confmap.Conf, key string, value any, from string) {
	_ = conf.Merge(confmap.NewFromStringMap(map[string]any{key: value}))
	c.log.Info("Derived "+dotted(key)+" from "+from, zap.Any("value", value))
}

// dotted writes a confmap key as a path users read: receivers::gateway::x
// → receivers.gateway.x.
func dotted(key string) string { return strings.ReplaceAll(key, confmap.KeyDelimiter, ".") }

// overflowKeep: a processor's overflow streams keep the collector label of
// the receivers feeding it, so several collectors' overflow series stay
// apart. Unset: derived; set without a receiver's label: refused.
func (c *converter) overflowKeep(conf *confmap.Conf, g *graph) error {
	var errs error
	for _, pr := range sortedKeys(g.processors) {
		var labels []string
		for _, r := range g.upstream(pr, true) {
			if l := g.receivers[r].CollectorLabel; l != "" && !slices.Contains(labels, l) {
				labels = append(labels, l)
			}
		}
		key := "processors::" + pr + "::overflow_keep"
		if !conf.IsSet(key) {
			if !slices.Equal(labels, g.processors[pr].OverflowKeep) {
				list := make([]any, len(labels))
				for i, l := range labels {
					list[i] = l
				}
				c.set(conf, key, list, "the collector_label of the gateway receivers feeding it")
			}
			continue
		}
		for _, l := range labels {
			if !slices.Contains(g.processors[pr].OverflowKeep, l) {
				errs = errors.Join(errs, fmt.Errorf("processors::%s: overflow_keep %v lacks %q, the collector_label of the gateway receivers feeding it: "+
					"the overflow series of several collectors would collide; add %q to overflow_keep, or remove overflow_keep (it then follows collector_label)",
					pr, g.processors[pr].OverflowKeep, l, l))
			}
		}
	}
	return errs
}

// tupleExpiry: a receiver lets a tuple go after tuple_expiry without an
// event; the processor and the exporter keep its series for max_stale and
// metric_expiration. Shorter than either, the receiver admits new tuples
// while their series are still held downstream, and the downstream bounds
// no longer hold what it admits. Unset: the longest of them; set shorter:
// refused.
func (c *converter) tupleExpiry(conf *confmap.Conf, g *graph) error {
	var errs error
	for _, r := range sortedKeys(g.receivers) {
		rc := g.receivers[r]
		procs, exps, _ := g.downstream(r)
		var longest time.Duration
		var by string
		for _, pr := range procs {
			if d := g.processors[pr].MaxStale; d > longest {
				longest, by = d, "processors::"+pr+" max_stale"
			}
		}
		for _, e := range exps {
			if d := g.exporters[e].MetricExpiration; d > longest {
				longest, by = d, "exporters::"+e+" metric_expiration"
			}
		}
		if longest == 0 || rc.Limits.MaxTuples == 0 {
			continue // nothing downstream keeps series, or no tuple bound to hold
		}
		key := "receivers::" + r + "::tuple_expiry"
		if !conf.IsSet(key) {
			if rc.TupleExpiry != 0 && rc.TupleExpiry < longest {
				c.set(conf, key, longest.String(), by)
			}
			continue
		}
		if rc.TupleExpiry != 0 && rc.TupleExpiry < longest {
			errs = errors.Join(errs, fmt.Errorf("receivers::%s: tuple_expiry (%v) is shorter than %s (%v): the receiver would admit new label tuples "+
				"while the series of those it let go are still held downstream, beyond what their bounds hold; set tuple_expiry to at least %v, "+
				"or remove it (it then follows the longest of max_stale and metric_expiration)", r, rc.TupleExpiry, by, longest, longest))
		}
	}
	return errs
}

// checkpointReplay: with storage on the receiver and the processor, a
// crash loses the windows the receiver flushed after the processor's last
// checkpoint unless the receiver's checkpoint still holds them: replay
// must cover checkpoint_interval + flush_interval. Unset: that sum; set
// shorter: refused.
func (c *converter) checkpointReplay(conf *confmap.Conf, g *graph) error {
	var errs error
	for _, r := range sortedKeys(g.receivers) {
		rc := g.receivers[r]
		if rc.Storage == nil {
			continue
		}
		procs, _, _ := g.downstream(r)
		var need time.Duration
		var by string
		for _, pr := range procs {
			pc := g.processors[pr]
			if pc.Storage == nil {
				continue
			}
			if d := pc.CheckpointInterval + rc.FlushInterval; d > need {
				need, by = d, "processors::"+pr+" checkpoint_interval ("+pc.CheckpointInterval.String()+") + flush_interval ("+rc.FlushInterval.String()+")"
			}
		}
		if need == 0 {
			continue
		}
		key := "receivers::" + r + "::checkpoint_replay"
		if !conf.IsSet(key) {
			if rc.CheckpointReplay != need {
				c.set(conf, key, need.String(), by)
			}
			continue
		}
		if rc.CheckpointReplay < need {
			errs = errors.Join(errs, fmt.Errorf("receivers::%s: checkpoint_replay (%v) is shorter than %s = %v: a crash would lose the windows flushed "+
				"after the processor's last checkpoint; set checkpoint_replay to at least %v, or remove it (it then follows them)",
				r, rc.CheckpointReplay, by, need, need))
		}
	}
	return errs
}

// maxStreams: a processor holds every stream the receivers feeding it can
// make (StreamsBound). Unset and the default too small: raised; set too
// small: warned (folding is logged and counted, and may be meant).
func (c *converter) maxStreams(conf *confmap.Conf, g *graph) {
	for _, pr := range sortedKeys(g.processors) {
		need, bounded := 0, true
		for _, r := range g.upstream(pr, true) {
			b := g.receivers[r].StreamsBound()
			bounded = bounded && b > 0
			need += b
		}
		have := g.processors[pr].Limits.MaxStreams
		if !bounded || need <= have {
			continue
		}
		if !conf.IsSet("processors::"+pr+"::limits::max_streams") && !conf.IsSet("processors::"+pr+"::max_streams") {
			c.set(conf, "processors::"+pr+"::limits::max_streams", need, "the limits of the gateway receivers feeding it (a stream per family per tuple)")
			g.processors[pr].Limits.MaxStreams = need
			continue
		}
		c.log.Warn("processors::"+pr+" limits.max_streams is below what the gateway receivers feeding it can send: new streams beyond it are folded "+
			"into overflow streams; raise it to "+strconv.Itoa(need)+", or remove it (it then follows the receivers' limits)",
			zap.Int("limits.max_streams", have), zap.Int("receivers_streams", need))
	}
}

// maxSeries: a promstream exporter holds every stream of the processors
// before it, the pushed health series of the receivers, and target_info.
// Unset and the default too small: raised; set too small: warned.
func (c *converter) maxSeries(conf *confmap.Conf, g *graph) {
	for _, e := range sortedKeys(g.exporters) {
		need := 0
		var procs []string
		for _, r := range g.upstream(e, false) {
			rc := g.receivers[r]
			need += rc.PushedHealthSeriesBound() + rc.Limits.MaxGateways + 1
			ps, _, _ := g.downstream(r)
			for _, pr := range ps {
				if !slices.Contains(procs, pr) {
					procs = append(procs, pr)
					// Its streams, and an overflow stream per metric.
					need += g.processors[pr].Limits.MaxStreams + overflowStreams
				}
			}
		}
		have := g.exporters[e].Limits.MaxSeries
		if len(procs) == 0 || have == 0 || int64(need) <= have {
			continue
		}
		if !conf.IsSet("exporters::"+e+"::limits::max_series") && !conf.IsSet("exporters::"+e+"::max_series") {
			c.set(conf, "exporters::"+e+"::limits::max_series", need, "the bounds of the processors and gateway receivers before it")
			continue
		}
		c.log.Warn("exporters::"+e+" limits.max_series is below what the pipeline before it can send: points of new series beyond it are "+
			"dropped; raise it to "+strconv.Itoa(need)+", or remove it (it then follows the bounds before it)",
			zap.Int64("limits.max_series", have), zap.Int("pipeline_series", need))
	}
}

// overflowStreams bounds a processor's overflow streams: one per metric
// (per overflow_keep value), a few dozen for the gateway profiles.
const overflowStreams = 64

// externalLabels: the remote-write exporter adds external_labels only to
// series that lack them, and every gateway series carries the collector
// label already, so external_labels naming it does nothing to them: the
// recipe used to tell collectors apart before the receiver labelled its
// series. Warned, with the fix.
func (c *converter) externalLabels(conf *confmap.Conf, g *graph) {
	for _, e := range sortedKeys(g.remoteWrite) {
		labels := g.remoteWrite[e].Get("external_labels")
		m, _ := labels.(map[string]any)
		if len(m) == 0 {
			continue
		}
		for _, r := range g.upstream(e, false) {
			rc := g.receivers[r]
			v, ok := m[rc.CollectorLabel]
			if rc.CollectorLabel == "" || !ok {
				continue
			}
			value := "its default, the host name and the port of its listener"
			if rc.CollectorName != "" {
				value = strconv.Quote(rc.CollectorName)
			}
			c.log.Warn("exporters::"+e+": external_labels."+rc.CollectorLabel+" does nothing to the series of receivers::"+r+
				", which carry their own "+rc.CollectorLabel+" label ("+value+"; the exporter never overrides a label a series has): "+
				"remove it from external_labels, and set receivers::"+r+"::collector_name where another value is wanted",
				zap.Any("external_label_value", v), zap.String("receiver", r))
		}
	}
}
