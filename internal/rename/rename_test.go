package rename

import (
	"testing"

	"go.opentelemetry.io/collector/confmap"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var keys = []Key{
	{Old: "max_series", New: "limits::max_tuples"},
	{Old: "health::push::max_targets", New: "limits::max_pushed_targets"},
}

func TestMoveRewritesOldKeys(t *testing.T) {
	conf := confmap.NewFromStringMap(map[string]any{
		"max_series": 5,
		"limits":     map[string]any{"max_gateways": 7},
		"health":     map[string]any{"push": map[string]any{"max_targets": 9, "path": "/h"}},
	})
	moved, err := Move(conf, keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(moved) != 2 {
		t.Fatalf("moved %v, want both keys", moved)
	}
	var got struct {
		Limits struct {
			MaxTuples        int `mapstructure:"max_tuples"`
			MaxGateways      int `mapstructure:"max_gateways"`
			MaxPushedTargets int `mapstructure:"max_pushed_targets"`
		} `mapstructure:"limits"`
		Health struct {
			Push struct {
				Path string `mapstructure:"path"`
			} `mapstructure:"push"`
		} `mapstructure:"health"`
	}
	// No unused key may remain: the old names are gone.
	if err := conf.Unmarshal(&got); err != nil {
		t.Fatal(err)
	}
	if got.Limits.MaxTuples != 5 || got.Limits.MaxGateways != 7 || got.Limits.MaxPushedTargets != 9 || got.Health.Push.Path != "/h" {
		t.Fatalf("decoded %+v", got)
	}

	core, logs := observer.New(zapcore.InfoLevel)
	Warn(zap.New(core), moved)
	want := []string{
		"Configuration key max_series is deprecated: write limits.max_tuples (the value was taken from max_series)",
		"Configuration key health.push.max_targets is deprecated: write limits.max_pushed_targets (the value was taken from health.push.max_targets)",
	}
	if logs.Len() != len(want) {
		t.Fatalf("%d warnings, want %d", logs.Len(), len(want))
	}
	for i, e := range logs.All() {
		if e.Message != want[i] || e.Level != zapcore.WarnLevel {
			t.Errorf("warning %d: %v %q, want warn %q", i, e.Level, e.Message, want[i])
		}
	}
}

func TestMoveNothingToMove(t *testing.T) {
	conf := confmap.NewFromStringMap(map[string]any{"limits": map[string]any{"max_tuples": 3}})
	moved, err := Move(conf, keys)
	if err != nil || len(moved) != 0 {
		t.Fatalf("moved %v, %v; want nothing", moved, err)
	}
}

func TestMoveRefusesBothNames(t *testing.T) {
	conf := confmap.NewFromStringMap(map[string]any{"max_series": 5, "limits": map[string]any{"max_tuples": 6}})
	_, err := Move(conf, keys)
	want := "max_series and limits.max_tuples are the same setting (max_series is its deprecated name): set only limits.max_tuples"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v,\nwant %s", err, want)
	}
}

// A section present only for the old key stays present: it may turn a part
// on (health: {push: {max_targets: 5}} enables health).
func TestMoveKeepsTheOldKeysSection(t *testing.T) {
	conf := confmap.NewFromStringMap(map[string]any{"health": map[string]any{"push": map[string]any{"max_targets": 5}}})
	if _, err := Move(conf, keys); err != nil {
		t.Fatal(err)
	}
	if !conf.IsSet("health::push") || conf.IsSet("health::push::max_targets") || conf.Get("limits::max_pushed_targets") != 5 {
		t.Fatalf("after the move: %v", conf.ToStringMap())
	}
}
