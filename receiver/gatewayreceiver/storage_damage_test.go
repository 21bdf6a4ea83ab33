package gatewayreceiver

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelgateway/otelgateway/internal/testutil"
)

// TestUnreadableStorageFile: the receiver's bbolt file, truncated to 8 KiB
// while the collector was down, is moved aside by the distribution's
// file_storage; the receiver starts a new window, replays nothing, counts
// discarded_unreadable, and checkpoints into the new file.
func TestUnreadableStorageFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	host := testutil.ExtHost{recvStorageID: testutil.FileStorage(t, dir)}
	// startOn names each receiver anew (a new file); a restart keeps its id.
	h := startOn(t, host, consumertest.NewNop(), withStorage)
	id := h.r.settings.ID
	sendKong(t, h, "/x", 3)
	h.r.flusher.flush(ctx)
	if err := h.r.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	files := testutil.TruncateStorageFiles(t, dir, 8192)

	sink := new(consumertest.MetricsSink)
	before := time.Now()
	h = startOn(t, renamed{host, id}, sink, withStorage)
	count := func(outcome string) int64 {
		return testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_checkpoints", attribute.String("outcome", outcome))
	}
	if n := count("discarded_unreadable"); n != 1 {
		t.Errorf("discarded_unreadable = %d, want 1", n)
	}
	if n := count("restored"); n != 0 {
		t.Errorf("restored = %d, want 0", n)
	}
	if m := testutil.MovedAside(t, files[0]); len(m) != 1 {
		t.Errorf("moved aside: %v, want one file", m)
	}
	if len(sink.AllMetrics()) != 0 || h.r.flusher.windowStart.AsTime().Before(before) {
		t.Errorf("replayed %d batches, window start %v: want a new window and no replay", len(sink.AllMetrics()), h.r.flusher.windowStart)
	}
	sendKong(t, h, "/x", 2)
	h.r.flusher.flush(ctx)
	if got, _ := lastRequests(t, sink, "/x"); got != 2 {
		t.Errorf("after the restart: %d requests, want 2", got)
	}
	if n := count("saved"); n != 1 {
		t.Errorf("saved into the new file = %d, want 1", n)
	}
}

// renamed is a host whose storage files are named for id: the storage
// extension is asked for the client of the receiver that wrote them.
type renamed struct {
	testutil.ExtHost
	id component.ID
}

func (h renamed) GetExtensions() map[component.ID]component.Component {
	out := map[component.ID]component.Component{}
	for k, e := range h.ExtHost.GetExtensions() {
		out[k] = renamedExt{e.(storage.Extension), h.id}
	}
	return out
}

type renamedExt struct {
	storage.Extension
	id component.ID
}

func (e renamedExt) GetClient(ctx context.Context, kind component.Kind, _ component.ID, name string) (storage.Client, error) {
	return e.Extension.GetClient(ctx, kind, e.id, name)
}
