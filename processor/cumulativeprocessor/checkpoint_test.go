package cumulativeprocessor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	ckpt "github.com/otelgateway/otelgateway/internal/checkpoint"
	"github.com/otelgateway/otelgateway/internal/metadatacheck"
	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/processor/cumulativeprocessor/internal/metadata"
)

// memClient and memExtension are internal/testutil's in-memory storage.
type (
	memClient    = testutil.MemClient
	memExtension = testutil.MemExtension
	extHost      = testutil.ExtHost
)

func newMemClient() *memClient { return testutil.NewMemClient() }

// memExt is a storage extension handing client to processors.
func memExt(client *memClient) *memExtension {
	return &memExtension{Client: client, Kind: component.KindProcessor}
}

var storageID = component.MustNewIDWithName("file_storage", "test")

func storageConfig() *Config {
	cfg := createDefaultConfig()
	id := storageID
	cfg.Storage = &id
	cfg.CheckpointInterval = time.Hour // tests save at shutdown unless they say otherwise
	return cfg
}

// storeProcessor is a processor with its telemetry and observed logs.
type storeProcessor struct {
	*cumulativeProcessor
	tel  *componenttest.Telemetry
	logs *observer.ObservedLogs
}

func newStoreProcessor(t *testing.T, cfg *Config) storeProcessor {
	t.Helper()
	tel := componenttest.NewTelemetry()
	set := processortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	core, logs := observer.New(zap.InfoLevel)
	set.Logger = zap.New(core)
	p, err := newProcessor(cfg, set, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		metadatacheck.Attributes(t, metadatacheck.Read(t, "metadata.yaml"), tel)
		_ = tel.Shutdown(context.Background())
	})
	return storeProcessor{p, tel, logs}
}

// startWith starts p on a host holding ext as storageID.
func (p storeProcessor) startWith(t *testing.T, ext component.Component) {
	t.Helper()
	if err := p.start(context.Background(), extHost{storageID: ext}); err != nil {
		t.Fatal(err)
	}
}

func (p storeProcessor) stop(t *testing.T) {
	t.Helper()
	if err := p.shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (p storeProcessor) checkpoints(t *testing.T, outcome string) int64 {
	t.Helper()
	return testutil.Int64Sum(t, p.tel, "otelcol_processor_cumulative_checkpoints", attribute.String("outcome", outcome))
}

// states renders every stream's full state, keyed by its identity, for
// comparing two processors.
func states(p *cumulativeProcessor) map[string]string {
	out := map[string]string{}
	for i := range p.shards {
		sh := &p.shards[i]
		sh.mu.Lock()
		for s := range sh.all() {
			d := s.desc
			key := fmt.Sprintf("%q %q %q %q %q %s %s %v %v %q", d.resource.String(), d.scopeName, d.scopeVersion, d.scopeAttrs.String(),
				d.name, d.unit, d.description, d.typ, d.monotonic, s.attrs.String())
			v := fmt.Sprintf("overflow=%v started=%v dirty=%v int=%v fresh=%v start=%d last=%d win=%d seen=%d total=%#x prev=%d",
				s.overflow, s.started, s.dirty, s.isInt, s.fresh, s.start, s.last, s.winStart, s.seen, s.total, s.prev)
			if h := s.hist; h != nil {
				v += fmt.Sprintf(" hist{%+v %d %v %v", h.moments, h.count, h.bounds(), h.counts())
				if p := h.prev; p != nil {
					v += fmt.Sprintf(" prev{%+v %d %v}", p.moments, p.count, p.counts)
				}
				v += "}"
			}
			if e := s.exp; e != nil {
				v += " exp" + expString(e)
				if e.prev != nil {
					v += " prev" + expString(e.prev)
				}
			}
			out[key] = v
		}
		sh.mu.Unlock()
	}
	return out
}

func expString(e *expState) string {
	return fmt.Sprintf("{%+v %d %d %d %g %d %v %d %v}", e.moments, e.count, e.zeroCount, e.scale, e.zeroThreshold,
		e.pos.offset, e.pos.counts, e.neg.offset, e.neg.counts)
}

// feedEverything gives p streams of every kind and shape: int and double
// sums (one mid-retry), explicit histograms (two sharing bounds, one with
// other bounds), exponential histograms with both ranges and a replaced
// window, unusual attribute values, and an overflow stream.
func feedEverything(t *testing.T, p *cumulativeProcessor) {
	t.Helper()
	process(t, p, batch(point{"kong", "/a", 10, 20, 3}, point{"kong", "/b", 10, 20, 5}))
	process(t, p, batch(point{"kong", "/a", 20, 30, 4}))
	process(t, p, batch(point{"kong", "/a", 20, 40, 6})) // a resend: /a is 3 + 6, before its window 3
	md := batch(point{"envoy", "/d", 10, 20, 0})
	dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	dp.SetDoubleValue(1.25)
	s := dp.Attributes().PutEmptySlice("tags")
	s.AppendEmpty().SetStr("x")
	s.AppendEmpty().SetEmptyMap().PutBool("deep", true)
	dp.Attributes().PutEmptyBytes("raw").FromRaw([]byte{0, 1, 2})
	dp.Attributes().PutDouble("ratio", 0.5)
	dp.Attributes().PutEmpty("nothing")
	md.ResourceMetrics().At(0).SetSchemaUrl("https://opentelemetry.io/schemas/1.26.0")
	sm := md.ResourceMetrics().At(0).ScopeMetrics().At(0)
	sm.Scope().SetName("gateway")
	sm.Scope().SetVersion("1.2")
	sm.Scope().Attributes().PutStr("scope.attr", "v")
	sm.Metrics().At(0).SetDescription("requests served")
	sm.Metrics().At(0).SetUnit("{request}")
	process(t, p, md)

	b := []float64{1, 5}
	histOut(t, p, histBatch(histPoint{10, 20, b, []uint64{1, 2, 3}, 10}))
	histOut(t, p, histBatch(histPoint{20, 30, b, []uint64{0, 1, 1}, 4}))
	other := histBatch(histPoint{10, 20, b, []uint64{4, 0, 0}, 1}, histPoint{10, 20, []float64{2}, []uint64{1, 1}, 3})
	dps := other.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints()
	dps.At(0).Attributes().PutStr("http.route", "/b")
	dps.At(1).Attributes().PutStr("http.route", "/c")
	dps.At(1).SetMin(0.5)
	dps.At(1).SetMax(4)
	histOut(t, p, other)

	expOut(t, p, expBatch(expPoint{start: 10, end: 20, scale: 2, zt: 0.01, zero: 1, off: -3, counts: []uint64{1, 2}, negOff: 4, neg: []uint64{3}}))
	expOut(t, p, expBatch(expPoint{start: 20, end: 30, scale: 1, off: 2, counts: []uint64{5}}))
	expOut(t, p, expBatch(expPoint{start: 20, end: 40, scale: 1, off: 2, counts: []uint64{5, 1}}))

	// Streams beyond the limit fold into the overflow stream.
	for i := range 3 {
		md := batch(point{"apisix", fmt.Sprintf("/o%d", i), 10, 20, 1})
		md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).SetName("overflowing")
		process(t, p, md)
	}
}

func TestCheckpointRestoresEveryStream(t *testing.T) {
	cfg := storageConfig()
	cfg.Limits.MaxStreams = 8 // 7 streams, then /o0; /o1 and /o2 overflow
	client := newMemClient()
	ext := memExt(client)

	a := newStoreProcessor(t, cfg)
	a.startWith(t, ext)
	feedEverything(t, a.cumulativeProcessor)
	want := states(a.cumulativeProcessor)
	a.stop(t)
	if !client.Closed || ext.Owner != a.id {
		t.Errorf("client closed %v, owner %v; want closed, owned by %v", client.Closed, ext.Owner, a.id)
	}
	if n := a.checkpoints(t, "saved"); n != 1 {
		t.Errorf("saved = %d, want 1 (at shutdown)", n)
	}

	b := newStoreProcessor(t, cfg)
	b.startWith(t, memExt(client))
	defer b.stop(t)
	got := states(b.cumulativeProcessor)
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got[k] != want[k] {
			t.Errorf("stream %s:\n got %s\nwant %s", k, got[k], want[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d streams restored, want %d", len(got), len(want))
	}
	if n := b.checkpoints(t, "restored"); n != 1 {
		t.Errorf("restored = %d, want 1", n)
	}
	if n := testutil.Int64Sum(t, b.tel, "otelcol_processor_cumulative_streams_tracked"); n != int64(len(want)) {
		t.Errorf("streams tracked = %d, want %d", n, len(want))
	}

	// Counters continue, with their original start times: no reset.
	assertEmitted(t, process(t, b.cumulativeProcessor, batch(point{"kong", "/a", 40, 50, 1}, point{"kong", "/b", 20, 50, 1})),
		"kong /a 10 50 10", "kong /b 10 50 6")
	// A window resent across the restart still replaces the last one.
	assertEmitted(t, process(t, b.cumulativeProcessor, batch(point{"kong", "/a", 40, 60, 2})), "kong /a 10 60 11")
	assertEmitted(t, histOut(t, b.cumulativeProcessor, histBatch(histPoint{30, 40, []float64{1, 5}, []uint64{1, 0, 0}, 0.5})),
		"10 40 9 14.5 [1 5] [2 3 4]")
	if got := expOut(t, b.cumulativeProcessor, expBatch(expPoint{start: 20, end: 50, scale: 1, off: 2, counts: []uint64{5, 2}})); got != "14 1 0.011048543456039806 1 pos:-2 [1 2 0 0 5 2] neg:2 [3]" {
		t.Errorf("exponential after restore: %s", got)
	}
	// The restored overflow stream keeps absorbing what is beyond the limit.
	md := batch(point{"apisix", "/o9", 20, 30, 1})
	md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).SetName("overflowing")
	out, _ := b.processMetrics(context.Background(), md)
	assertEmitted(t, pointsWithOverflow(t, out), "overflow 3 @30")
}

func TestCheckpointRespectsASmallerMaxStreams(t *testing.T) {
	client := newMemClient()
	a := newStoreProcessor(t, storageConfig())
	a.startWith(t, memExt(client))
	process(t, a.cumulativeProcessor, batch(point{"kong", "/a", 10, 20, 1}, point{"kong", "/b", 10, 20, 1}, point{"kong", "/c", 10, 20, 1}))
	a.stop(t)

	cfg := storageConfig()
	cfg.Limits.MaxStreams = 2
	b := newStoreProcessor(t, cfg)
	b.startWith(t, memExt(client))
	defer b.stop(t)
	if n := len(states(b.cumulativeProcessor)); n != 2 {
		t.Errorf("%d streams restored, want 2 (max_streams)", n)
	}
	if e := b.logs.FilterMessage("Restored the streams' checkpoint").All(); len(e) != 1 || e[0].ContextMap()["beyond_max_streams"] != int64(1) {
		t.Errorf("restore log %v, want one with beyond_max_streams=1", e)
	}
}

func TestCheckpointLeavesOutStaleStreams(t *testing.T) {
	client := newMemClient()
	a := newStoreProcessor(t, storageConfig())
	a.startWith(t, memExt(client))
	process(t, a.cumulativeProcessor, batch(point{"kong", "/a", 10, 20, 1}, point{"kong", "/b", 10, 20, 1}))
	// /a last had a point longer than max_stale ago: the sweep would
	// remove it, so the restore leaves it out.
	for i := range a.shards {
		sh := &a.shards[i]
		sh.mu.Lock()
		for s := range sh.all() {
			if strings.Contains(s.attrs.String(), "/a") {
				s.seen = time.Now().Add(-a.cfg.MaxStale - time.Minute).UnixNano()
			}
		}
		sh.mu.Unlock()
	}
	a.stop(t)

	b := newStoreProcessor(t, storageConfig())
	b.startWith(t, memExt(client))
	defer b.stop(t)
	assertEmitted(t, process(t, b.cumulativeProcessor, batch(point{"kong", "/a", 20, 30, 1}, point{"kong", "/b", 20, 30, 1})),
		"kong /a 20 30 1", "kong /b 10 30 2")
}

// TestCheckpointIsWrittenPeriodically: a crash loses at most what was
// accumulated since the last periodic checkpoint.
func TestCheckpointIsWrittenPeriodically(t *testing.T) {
	cfg := storageConfig()
	cfg.CheckpointInterval = 10 * time.Millisecond
	client := newMemClient()
	a := newStoreProcessor(t, cfg)
	a.startWith(t, memExt(client))
	process(t, a.cumulativeProcessor, batch(point{"kong", "/a", 10, 20, 3}))
	deadline := time.Now().Add(10 * time.Second)
	var crashed []byte
	for {
		// A checkpoint taken after the point: the state a crash now leaves.
		if b := client.Bytes(checkpointKey); b != nil && bytes.Contains(b, []byte("/a")) {
			crashed = b
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no periodic checkpoint within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	a.stop(t)
	if n := a.checkpoints(t, "saved"); n < 2 {
		t.Errorf("saved = %d, want periodic ones and the last one", n)
	}

	restarted := newMemClient()
	restarted.Put(checkpointKey, crashed)
	b := newStoreProcessor(t, storageConfig())
	b.startWith(t, memExt(restarted))
	defer b.stop(t)
	assertEmitted(t, process(t, b.cumulativeProcessor, batch(point{"kong", "/a", 20, 30, 1})), "kong /a 10 30 4")
}

// validCheckpoint returns the checkpoint of a processor holding one stream
// of each kind.
func validCheckpoint(t *testing.T) []byte {
	t.Helper()
	client := newMemClient()
	a := newStoreProcessor(t, storageConfig())
	a.startWith(t, memExt(client))
	feedEverything(t, a.cumulativeProcessor)
	a.stop(t)
	return client.Bytes(checkpointKey)
}

func TestCheckpointDiscardedWhole(t *testing.T) {
	valid := validCheckpoint(t)
	flip := func(i int) []byte {
		b := bytes.Clone(valid)
		b[i] ^= 0x40
		return b
	}
	// reseal recomputes the CRC, so that only the decoder can tell.
	reseal := func(b []byte) []byte {
		ckpt.Reseal(b, checkpointMagic)
		return b
	}
	otherVersion := bytes.Clone(valid)
	otherVersion[len(checkpointMagic)] = checkpointVersion + 1
	truncated := reseal(bytes.Clone(valid[:len(valid)-3]))
	extra := reseal(append(bytes.Clone(valid), 0))

	for _, tc := range []struct {
		name    string
		b       []byte
		cfg     func(*Config)
		outcome string
	}{
		{"garbage", []byte("not a checkpoint at all"), nil, "discarded_corrupt"},
		{"empty", []byte{}, nil, "discarded_corrupt"},
		{"a flipped byte", flip(len(valid) / 2), nil, "discarded_corrupt"},
		{"truncated, CRC resealed", truncated, nil, "discarded_corrupt"},
		{"trailing bytes, CRC resealed", extra, nil, "discarded_corrupt"},
		{"another format version", otherVersion, nil, "discarded_version"},
		{"other max_buckets", valid, func(c *Config) { c.Limits.MaxBuckets = 80 }, "discarded_config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := newMemClient()
			client.Put(checkpointKey, tc.b)
			cfg := storageConfig()
			if tc.cfg != nil {
				tc.cfg(cfg)
			}
			p := newStoreProcessor(t, cfg)
			p.startWith(t, memExt(client))
			defer p.stop(t)
			if n := p.checkpoints(t, tc.outcome); n != 1 {
				t.Errorf("%s = %d, want 1", tc.outcome, n)
			}
			if n := len(states(p.cumulativeProcessor)); n != 0 {
				t.Errorf("%d streams installed from a discarded checkpoint", n)
			}
			e := p.logs.FilterMessage("Discarding the streams' checkpoint; starting empty (counters reset)").All()
			if len(e) != 1 || e[0].ContextMap()["reason"] != tc.outcome {
				t.Errorf("logs %v, want one discard with reason %s", e, tc.outcome)
			}
			// Starts empty and works: a clean counter reset.
			assertEmitted(t, process(t, p.cumulativeProcessor, batch(point{"kong", "/a", 40, 50, 1})), "kong /a 40 50 1")
		})
	}
}

// TestCheckpointNeverPanics: every single-byte change and every truncation
// of a valid checkpoint (CRC resealed, so the decoder sees them) is either
// restored or discarded as corrupt.
func TestCheckpointNeverPanics(t *testing.T) {
	valid := validCheckpoint(t)
	body := len(checkpointMagic) + 1 + 4
	cfg := createDefaultConfig()
	cfg.Limits.MaxStreams = 16 // a small identity cache: thousands of processors
	check := func(b []byte) {
		cp, outcome, err := decodeCheckpoint(b, checkpointFingerprint(cfg), 0)
		if err == nil {
			p, err := newProcessor(cfg, processortest.NewNopSettings(metadata.Type), consumertest.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			p.install(cp, time.Now().UnixNano())
			return
		}
		if outcome != ckptDiscardedCorrupt && outcome != ckptDiscardedConfig {
			t.Fatalf("outcome %s for a damaged checkpoint", outcome)
		}
	}
	for i := body; i < len(valid); i++ {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			b := bytes.Clone(valid)
			b[i] ^= x
			ckpt.Reseal(b, checkpointMagic)
			check(b)
		}
		b := bytes.Clone(valid[:i])
		ckpt.Reseal(b, checkpointMagic)
		check(b)
	}
}

// FuzzCheckpointBody feeds arbitrary bodies (past the CRC) to the decoder.
func FuzzCheckpointBody(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	// A metric index beyond int64: negative once converted (found by fuzzing).
	f.Add([]byte("\x00\x01\xbe\xbe\xbe\xbe\xbe\xbe\xbe\xbe\xbe\x0100000000000000000000"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := decoder{ckpt.Decoder{B: b}}
		if cp, err := d.checkpoint(0); err == nil && cp == nil {
			t.Fatal("no checkpoint and no error")
		}
	})
}

func TestStorageErrorsLeaveTheProcessorWorking(t *testing.T) {
	t.Run("get", func(t *testing.T) {
		client := newMemClient()
		client.GetErr = errors.New("disk on fire")
		p := newStoreProcessor(t, storageConfig())
		p.startWith(t, memExt(client))
		defer p.stop(t)
		assertEmitted(t, process(t, p.cumulativeProcessor, batch(point{"kong", "/a", 10, 20, 1})), "kong /a 10 20 1")
		if n := p.checkpoints(t, "restore_failed"); n != 1 {
			t.Errorf("restore_failed = %d, want 1", n)
		}
	})
	t.Run("set", func(t *testing.T) {
		client := newMemClient()
		client.SetErr = storage.ErrStorageFull
		p := newStoreProcessor(t, storageConfig())
		p.startWith(t, memExt(client))
		assertEmitted(t, process(t, p.cumulativeProcessor, batch(point{"kong", "/a", 10, 20, 1})), "kong /a 10 20 1")
		p.save(context.Background())
		assertEmitted(t, process(t, p.cumulativeProcessor, batch(point{"kong", "/a", 20, 30, 1})), "kong /a 10 30 2")
		p.stop(t) // saves once more: fails, logged, Shutdown still succeeds
		if n := p.checkpoints(t, "save_failed"); n != 2 {
			t.Errorf("save_failed = %d, want 2", n)
		}
		if n := p.logs.FilterMessageSnippet("Writing the streams' checkpoint failed").Len(); n != 2 {
			t.Errorf("%d save failures logged, want 2", n)
		}
	})
	t.Run("no client", func(t *testing.T) {
		p := newStoreProcessor(t, storageConfig())
		p.startWith(t, &memExtension{Kind: component.KindProcessor, Err: errors.New("no directory")})
		defer p.stop(t)
		assertEmitted(t, process(t, p.cumulativeProcessor, batch(point{"kong", "/a", 10, 20, 1})), "kong /a 10 20 1")
		if n := p.checkpoints(t, "restore_failed"); n != 1 {
			t.Errorf("restore_failed = %d, want 1", n)
		}
	})
}

func TestStorageMisconfigurationFailsStart(t *testing.T) {
	for _, tc := range []struct {
		host extHost
		want string
	}{
		{extHost{}, `storage: extension "file_storage/test" not found`},
		{extHost{storageID: notStorage{}}, `storage: extension "file_storage/test" is not a storage extension`},
	} {
		p := newStoreProcessor(t, storageConfig())
		err := p.start(context.Background(), tc.host)
		if err == nil || err.Error() != tc.want {
			t.Errorf("start: %v, want %s", err, tc.want)
		}
	}
}

type notStorage struct{}

func (notStorage) Start(context.Context, component.Host) error { return nil }
func (notStorage) Shutdown(context.Context) error              { return nil }

// TestCheckpointThroughTheFactory: the processor as the collector builds it
// saves at Shutdown and restores at Start.
func TestCheckpointThroughTheFactory(t *testing.T) {
	client := newMemClient()
	host := extHost{storageID: memExt(client)}
	run := func(md pmetric.Metrics) []string {
		sink := new(consumertest.MetricsSink)
		proc, err := NewFactory().CreateMetrics(context.Background(), processortest.NewNopSettings(metadata.Type), storageConfig(), sink)
		if err != nil {
			t.Fatal(err)
		}
		if err := proc.Start(context.Background(), host); err != nil {
			t.Fatal(err)
		}
		if err := proc.ConsumeMetrics(context.Background(), md); err != nil {
			t.Fatal(err)
		}
		if err := proc.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, md := range sink.AllMetrics() {
			out = append(out, emitted(t, md)...)
		}
		return out
	}
	assertEmitted(t, run(batch(point{"kong", "/a", 10, 20, 3})), "kong /a 10 20 3")
	assertEmitted(t, run(batch(point{"kong", "/a", 20, 30, 4})), "kong /a 10 30 7")
	assertEmitted(t, run(batch(point{"kong", "/a", 30, 40, 5})), "kong /a 10 40 12")
}
