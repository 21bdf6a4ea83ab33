package gatewayreceiver

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"

	ckpt "github.com/otelgateway/otelgateway/internal/checkpoint"
	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/processor/cumulativeprocessor"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/traffic"
)

var (
	recvStorageID = component.MustNewIDWithName("file_storage", "receiver")
	procStorageID = component.MustNewIDWithName("file_storage", "processor")
)

// switchable forwards to whichever consumer was set last: the receiver
// under test keeps one next consumer while the processor behind it is
// replaced (restarted from a checkpoint).
type switchable struct {
	to atomic.Pointer[consumer.Metrics]
}

func (s *switchable) set(c consumer.Metrics) { s.to.Store(&c) }
func (s *switchable) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	return (*s.to.Load()).ConsumeMetrics(ctx, md)
}
func (*switchable) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: true}
}

// cumulative starts a cumulative processor (per_batch) whose checkpoint
// lives in store, emitting into sink.
func cumulative(t *testing.T, store *testutil.MemClient, sink consumer.Metrics) processor.Metrics {
	t.Helper()
	f := cumulativeprocessor.NewFactory()
	cfg := f.CreateDefaultConfig().(*cumulativeprocessor.Config)
	id := procStorageID
	cfg.Storage, cfg.CheckpointInterval = &id, time.Hour // saved at shutdown only
	p, err := f.CreateMetrics(context.Background(), processortest.NewNopSettings(f.Type()), cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background(), testutil.ExtHost{procStorageID: &testutil.MemExtension{Client: store, Kind: component.KindProcessor}}); err != nil {
		t.Fatal(err)
	}
	return p
}

func withStorage(c *Config) {
	id := recvStorageID
	c.Storage, c.CheckpointReplay = &id, time.Hour
}

// sendKong posts n Kong requests for route to h.
func sendKong(t *testing.T, h *harness, route string, n int) {
	t.Helper()
	td := kongExport("GET", route, 200)
	for range n {
		if code, msg := post(t, h.httpAddr, pbContentType, protoBody(t, td)); code != http.StatusOK {
			t.Fatalf("%d %s", code, msg)
		}
	}
}

// lastRequests is the last cumulative gateway.requests point of route in
// sink: its value and start.
func lastRequests(t *testing.T, sink *consumertest.MetricsSink, route string) (int64, pcommon.Timestamp) {
	t.Helper()
	var v int64 = -1
	var start pcommon.Timestamp
	for _, md := range sink.AllMetrics() {
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			ms := rms.At(i).ScopeMetrics().At(0).Metrics()
			for j := 0; j < ms.Len(); j++ {
				m := ms.At(j)
				if m.Name() != "gateway.requests" {
					continue
				}
				dps := m.Sum().DataPoints()
				for k := 0; k < dps.Len(); k++ {
					if r, _ := dps.At(k).Attributes().Get("http.route"); r.Str() == route {
						v, start = dps.At(k).IntValue(), dps.At(k).StartTimestamp()
					}
				}
			}
		}
	}
	return v, start
}

// A crash of the whole collector (receiver and processor, no Shutdown)
// after the processor's last checkpoint: the processor restarts from a
// checkpoint that lacks the last two flushed windows; the receiver replays
// them from its own checkpoint. The counter continues from the same start
// with every flushed request counted once; only the open window (requests
// after the last flush) is lost.
func TestCrashLosesOnlyTheOpenWindow(t *testing.T) {
	ctx := context.Background()
	recvStore, procStore := testutil.NewMemClient(), testutil.NewMemClient()
	host := testutil.ExtHost{recvStorageID: &testutil.MemExtension{Client: recvStore, Kind: component.KindReceiver}}
	sink := new(consumertest.MetricsSink)
	next := new(switchable)

	p1 := cumulative(t, procStore, sink)
	next.set(p1)
	r1 := startOn(t, host, next, withStorage)
	sendKong(t, r1, "/crash", 7)
	r1.r.flusher.flush(ctx) // window 1, in the processor's checkpoint below
	if err := p1.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	checkpointed := procStore.Bytes("streams")
	want, start := lastRequests(t, sink, "/crash")
	if want != 7 {
		t.Fatalf("before the crash: %d requests, want 7", want)
	}

	// The processor goes on from that checkpoint and counts windows 2 and
	// 3, then everything crashes: nothing more is saved.
	p1b := cumulative(t, procStore, sink)
	next.set(p1b)
	sendKong(t, r1, "/crash", 5)
	r1.r.flusher.flush(ctx)
	sendKong(t, r1, "/crash", 3)
	r1.r.flusher.flush(ctx)
	sendKong(t, r1, "/crash", 100) // the open window: lost in the crash
	lastEnd := r1.r.flusher.windowStart
	if got, _ := lastRequests(t, sink, "/crash"); got != 15 {
		t.Fatalf("before the crash: %d requests, want 15", got)
	}

	// Restart both from what was saved.
	restarted := testutil.NewMemClient()
	restarted.Put("streams", checkpointed)
	sink2 := new(consumertest.MetricsSink)
	p2 := cumulative(t, restarted, sink2)
	t.Cleanup(func() { _ = p2.Shutdown(ctx) })
	r2 := startOn(t, host, p2, withStorage)
	if r2.r.flusher.windowStart != lastEnd {
		t.Errorf("window starts at %v after the restart, want the last flushed window's end %v", r2.r.flusher.windowStart, lastEnd)
	}
	sendKong(t, r2, "/crash", 2)
	r2.r.flusher.flush(ctx)
	got, gotStart := lastRequests(t, sink2, "/crash")
	if got != 7+5+3+2 || gotStart != start {
		t.Errorf("after the restart: %d requests from %v, want %d from %v (the counter continues, the replay counted once)", got, gotStart, 7+5+3+2, start)
	}
	if n := testutil.Int64Sum(t, r2.tel, "otelcol_receiver_gateway_checkpoints", attribute.String("outcome", "restored")); n != 1 {
		t.Errorf("checkpoints restored = %d, want 1", n)
	}
	_ = p1b.Shutdown(ctx)
}

// A checkpoint that is corrupt, from another version or from another
// configuration is discarded whole: logged, counted, and the receiver
// starts a new window as without storage.
func TestReceiverCheckpointDiscarded(t *testing.T) {
	good := func() []byte {
		store := testutil.NewMemClient()
		h := startOn(t, testutil.ExtHost{recvStorageID: &testutil.MemExtension{Client: store, Kind: component.KindReceiver}}, consumertest.NewNop(), withStorage)
		sendKong(t, h, "/x", 1)
		h.r.flusher.flush(context.Background())
		return store.Bytes(checkpointKey)
	}()
	if len(good) == 0 {
		t.Fatal("no checkpoint written")
	}
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)-3] ^= 0xff
	version := append([]byte(checkpointMagic), 9)
	version = append(version, good[len(checkpointMagic)+1:]...)
	for _, c := range []struct {
		name    string
		b       []byte
		mutate  func(*Config)
		outcome string
	}{
		{"corrupt", flipped, withStorage, "discarded_corrupt"},
		{"truncated", good[:len(good)/2], withStorage, "discarded_corrupt"},
		{"garbage", []byte("not a checkpoint"), withStorage, "discarded_corrupt"},
		{"version", version, withStorage, "discarded_version"},
		{"config", good, func(c *Config) { withStorage(c); c.Profile = traffic.ProfileKong }, "discarded_config"},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := testutil.NewMemClient()
			store.Put(checkpointKey, c.b)
			sink := new(consumertest.MetricsSink)
			before := time.Now()
			h := startOn(t, testutil.ExtHost{recvStorageID: &testutil.MemExtension{Client: store, Kind: component.KindReceiver}}, sink, c.mutate)
			if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_checkpoints", attribute.String("outcome", c.outcome)); n != 1 {
				t.Errorf("%s = %d, want 1", c.outcome, n)
			}
			if len(sink.AllMetrics()) != 0 || h.r.flusher.windowStart.AsTime().Before(before) {
				t.Errorf("replayed %d batches, window start %v: want a new window and no replay", len(sink.AllMetrics()), h.r.flusher.windowStart)
			}
		})
	}
}

// The checkpoint decoder never panics and never allocates from a corrupt
// count, whatever the bytes.
func FuzzDecodeReceiverCheckpoint(f *testing.F) {
	set := traffic.Settings{Profile: traffic.ProfileOTel, ExpoSize: 20, Exemplars: true}
	agg := traffic.New(set)
	c := &checkpointer{fingerprint: agg.Fingerprint()}
	a := traffic.New(set)
	var e gateway.Event
	e.Reset()
	e.Kind, e.Gateway, e.Route, e.Method, e.StatusCode, e.TotalMS = gateway.KindSemconv, "kong", "/f", "GET", 200, 3
	a.Add([]gateway.Event{e})
	w := a.Take()
	c.windows = []flushedWindow{{start: 1, end: 2, points: w.AppendPoints(nil, w.Len())}}
	f.Add(c.encode(nil, 2))
	f.Add([]byte(checkpointMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		// Past the CRC (TestReceiverCheckpointDiscarded covers a mismatch):
		// the fuzzer explores the decoder, not the checksum.
		ckpt.Reseal(b, checkpointMagic)
		cp, _, err := decodeCheckpoint(b, c.fingerprint, agg)
		if err == nil && cp == nil || err != nil && !strings.Contains(err.Error(), "checkpoint") {
			t.Fatalf("decode = %v, %v", cp, err)
		}
		if err == nil {
			for _, w := range cp.windows {
				w.points.Metrics(0, w.points.Len(), w.start, w.end) // must not panic
			}
		}
	})
}
