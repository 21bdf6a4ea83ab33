package cumulativeprocessor

import (
	"testing"

	"github.com/otelgateway/otelgateway/internal/testutil"
)

// TestUnreadableStorageFile: the processor's bbolt file, truncated to 8 KiB
// while the collector was down, is moved aside by the distribution's
// file_storage; the processor starts empty, counts discarded_unreadable,
// logs it, and checkpoints into the new file.
func TestUnreadableStorageFile(t *testing.T) {
	dir := t.TempDir()
	ext := testutil.FileStorage(t, dir)
	p := newStoreProcessor(t, storageConfig())
	p.startWith(t, ext)
	assertEmitted(t, process(t, p.cumulativeProcessor, batch(point{"kong", "/a", 10, 20, 5})), "kong /a 10 20 5")
	p.stop(t) // saves the checkpoint
	files := testutil.TruncateStorageFiles(t, dir, 8192)

	p = newStoreProcessor(t, storageConfig())
	p.startWith(t, ext)
	if n := p.checkpoints(t, "discarded_unreadable"); n != 1 {
		t.Errorf("discarded_unreadable = %d, want 1", n)
	}
	if n := p.checkpoints(t, "restored"); n != 0 {
		t.Errorf("restored = %d, want 0", n)
	}
	if n := p.logs.FilterMessageSnippet("its storage file was unreadable and moved aside").Len(); n != 1 {
		t.Errorf("%d log lines of the moved-aside file, want 1", n)
	}
	if m := testutil.MovedAside(t, files[0]); len(m) != 1 {
		t.Errorf("moved aside: %v, want one file", m)
	}
	// A fresh start: the stream begins again, and is checkpointed again.
	assertEmitted(t, process(t, p.cumulativeProcessor, batch(point{"kong", "/a", 30, 40, 2})), "kong /a 30 40 2")
	p.stop(t)
	p = newStoreProcessor(t, storageConfig())
	p.startWith(t, ext)
	defer p.stop(t)
	if n := p.checkpoints(t, "restored"); n != 1 {
		t.Errorf("the new file: restored = %d, want 1", n)
	}
	assertEmitted(t, process(t, p.cumulativeProcessor, batch(point{"kong", "/a", 40, 50, 1})), "kong /a 30 50 3")
}
