// Package rename keeps a configuration key that moved working under its
// old name, with a deprecation warning: the components' bounds moved into
// one `limits:` block each (issue 26), and a config written for the old
// keys must still start, saying what to write instead.
//
// A component's Config implements confmap.Unmarshaler and calls [Move]
// before it decodes itself; Move rewrites each old key to its new place in
// the raw map and returns the keys it moved, which the component keeps and
// logs with [Warn] when it is created (a Config has no logger while it is
// decoded). Setting a key under both names is an error: which one was meant
// cannot be told.
//
// Shared by the three components, hence the root internal/.
package rename // import "github.com/otelgateway/otelgateway/internal/rename"

import (
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/confmap"
	"go.uber.org/zap"
)

// Key is a key's old and new path, as confmap paths ("max_series",
// "limits::max_tuples").
type Key struct {
	Old, New string
}

// Move rewrites, in conf, every key of keys set under its old path to its
// new path, and returns those it moved. A key set under both paths is an
// error naming both.
func Move(conf *confmap.Conf, keys []Key) ([]Key, error) {
	var moved []Key
	for _, k := range keys {
		if !conf.IsSet(k.Old) {
			continue
		}
		if conf.IsSet(k.New) {
			return nil, fmt.Errorf("%s and %s are the same setting (%s is its deprecated name): set only %s",
				Dotted(k.Old), Dotted(k.New), Dotted(k.Old), Dotted(k.New))
		}
		v := conf.Get(k.Old)
		conf.Delete(k.Old)
		// Delete also removes the sections left empty; a section present
		// only for the old key (health: {push: {max_targets: 5}}) must stay
		// present, as it turns a part on.
		if i := strings.LastIndex(k.Old, confmap.KeyDelimiter); i > 0 && !conf.IsSet(k.Old[:i]) {
			if err := conf.Merge(confmap.NewFromStringMap(map[string]any{k.Old[:i]: map[string]any{}})); err != nil {
				return nil, fmt.Errorf("moving %s to %s: %w", Dotted(k.Old), Dotted(k.New), err)
			}
		}
		if err := conf.Merge(confmap.NewFromStringMap(map[string]any{k.New: v})); err != nil {
			return nil, fmt.Errorf("moving %s to %s: %w", Dotted(k.Old), Dotted(k.New), err)
		}
		moved = append(moved, k)
	}
	return moved, nil
}

// Unmarshal is a Config's confmap.Unmarshaler body: Move, then decode conf
// into cfg. It returns the keys moved, for Warn.
func Unmarshal(conf *confmap.Conf, keys []Key, cfg any) ([]Key, error) {
	moved, err := Move(conf, keys)
	if err != nil {
		return nil, err
	}
	if err := conf.Unmarshal(cfg); err != nil {
		return nil, err
	}
	return moved, nil
}

// Warn logs one deprecation warning per moved key.
func Warn(log *zap.Logger, moved []Key) {
	for _, k := range moved {
		log.Warn("Configuration key "+Dotted(k.Old)+" is deprecated: write "+Dotted(k.New)+" (the value was taken from "+Dotted(k.Old)+")",
			zap.String("deprecated", Dotted(k.Old)), zap.String("use", Dotted(k.New)))
	}
}

// Dotted writes a confmap path as users read keys in messages and READMEs:
// limits::max_tuples → limits.max_tuples.
func Dotted(path string) string { return strings.ReplaceAll(path, confmap.KeyDelimiter, ".") }
