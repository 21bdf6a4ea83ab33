package filestorageextension

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelgateway/otelgateway/internal/metadatacheck"
)

var procID = component.MustNewID("cumulative")

// newExt starts a file_storage extension on dir: ours, or contrib's as it is.
func newExt(t testing.TB, dir string, ours bool, logger *zap.Logger) storage.Extension {
	t.Helper()
	f := contrib
	if ours {
		f = NewFactory()
	}
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory = dir
	set := extensiontest.NewNopSettings(f.Type())
	if logger != nil {
		set.Logger = logger
	}
	e, err := f.Create(context.Background(), set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	return e.(storage.Extension)
}

// writeDB writes a bbolt file through contrib's extension, as the
// cumulative processor's checkpoint would be, and returns its path and
// bytes: keys of small values and one value over many overflow pages, so
// the file spans about a MiB.
func writeDB(t testing.TB) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	e := newExt(t, dir, false, nil)
	c, err := e.GetClient(context.Background(), component.KindProcessor, procID, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 300 {
		if err := c.Set(ctx, "k"+strconv.Itoa(i), bytes.Repeat([]byte{byte(i)}, 500)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Set(ctx, "streams", bytes.Repeat([]byte("checkpoint"), 20000)); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "processor_cumulative_")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("contrib's file is not where fileName says: %v", err)
	}
	return path, b
}

type damage struct {
	name    string
	mangle  func(good []byte) []byte
	damaged bool // the check must refuse it (else bbolt opens it, data kept)
}

func damages() []damage {
	flipMeta := func(good []byte, pages ...int) []byte {
		b := slices.Clone(good)
		for _, p := range pages {
			b[p*4096+pageHeaderSize+20] ^= 0x40 // root pgid: the checksum no longer matches
		}
		return b
	}
	return []damage{
		{"healthy", func(g []byte) []byte { return g }, false},
		{"truncated to half", func(g []byte) []byte { return g[:len(g)/2] }, true},
		{"first 8 KiB only", func(g []byte) []byte { return g[:8192] }, true},
		{"zero-length", func([]byte) []byte { return nil }, false}, // bbolt creates a database in it
		{"zeroed", func(g []byte) []byte { return make([]byte, len(g)) }, true},
		{"random", func(g []byte) []byte { b := make([]byte, len(g)); _, _ = rand.Read(b); return b }, true},
		{"bad checksum, both meta pages", func(g []byte) []byte { return flipMeta(g, 0, 1) }, true},
		// bbolt falls back to the other meta page: readable, not moved.
		{"bad checksum, one meta page", func(g []byte) []byte { return flipMeta(g, 0) }, false},
		{"3 KiB only", func(g []byte) []byte { return g[:3072] }, true},
	}
}

func TestCheckFile(t *testing.T) {
	_, good := writeDB(t)
	if len(good) < 64<<10 {
		t.Fatalf("contrib's file is %d bytes, want several pages", len(good))
	}
	for _, d := range damages() {
		t.Run(d.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(path, d.mangle(good), 0o600); err != nil {
				t.Fatal(err)
			}
			err := checkFile(path)
			if d.damaged != errors.Is(err, errDamaged) || (!d.damaged && err != nil) {
				t.Fatalf("checkFile = %v, want damaged %v", err, d.damaged)
			}
		})
	}
	if err := checkFile(filepath.Join(t.TempDir(), "missing")); err != nil {
		t.Errorf("a missing file: %v, want nil (bbolt creates it)", err)
	}
}

// TestGetClient opens each damaged copy of a real file through the
// extension: it always gives a working client, keeps a healthy file's
// data, moves a damaged file aside byte for byte (logged, reported to the
// component) and opens a new one.
func TestGetClient(t *testing.T) {
	_, good := writeDB(t)
	ctx := context.Background()
	for _, d := range damages() {
		t.Run(d.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "processor_cumulative_")
			bad := d.mangle(good)
			if err := os.WriteFile(path, bad, 0o600); err != nil {
				t.Fatal(err)
			}
			core, logs := observer.New(zap.InfoLevel)
			e := newExt(t, dir, true, zap.New(core))
			c, err := e.GetClient(ctx, component.KindProcessor, procID, "")
			if err != nil {
				t.Fatalf("GetClient: %v", err)
			}
			defer func() { _ = c.Close(ctx) }()
			v, err := c.Get(ctx, "k7")
			if err != nil {
				t.Fatal(err)
			}
			moved := MovedAsideOf(c)
			if !d.damaged {
				if len(moved) != 0 {
					t.Fatalf("moved aside %v, want none", moved)
				}
				if len(bad) > 0 && !bytes.Equal(v, bytes.Repeat([]byte{7}, 500)) {
					t.Fatalf("a readable file's data was not kept: k7 = %d bytes", len(v))
				}
				return
			}
			if v != nil {
				t.Fatalf("k7 = %d bytes from a fresh file, want none", len(v))
			}
			if len(moved) != 1 || !strings.HasPrefix(moved[0], path+".corrupt-") {
				t.Fatalf("moved aside %v, want one %s.corrupt-<time>", moved, path)
			}
			kept, err := os.ReadFile(moved[0])
			if err != nil || !bytes.Equal(kept, bad) {
				t.Fatalf("the moved-aside file does not hold the damaged bytes (%v)", err)
			}
			if n := logs.FilterMessageSnippet("moved aside").FilterField(zap.String("moved_to", moved[0])).Len(); n != 1 {
				t.Fatalf("%d log lines name the moved-aside file, want 1: %v", n, logs.All())
			}
			// The new file works and survives a reopen.
			if err := c.Set(ctx, "after", []byte("x")); err != nil {
				t.Fatal(err)
			}
			if err := c.Close(ctx); err != nil {
				t.Fatal(err)
			}
			c2, err := e.GetClient(ctx, component.KindProcessor, procID, "")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c2.Close(ctx) }()
			if v, err := c2.Get(ctx, "after"); err != nil || string(v) != "x" || len(MovedAsideOf(c2)) != 0 {
				t.Fatalf("reopened: %q, %v, moved %v", v, err, MovedAsideOf(c2))
			}
		})
	}
}

// MovedAsideOf reads the files a client reports moved aside, as
// internal/checkpoint.MovedAside does.
func MovedAsideOf(c storage.Client) []string {
	if m, ok := c.(interface{ MovedAside() []string }); ok {
		return m.MovedAside()
	}
	return nil
}

// TestFileName holds fileName to the files contrib's extension creates.
func TestFileName(t *testing.T) {
	dir := t.TempDir()
	e := newExt(t, dir, false, nil)
	long := strings.Repeat("n", 300)
	for _, c := range []struct {
		kind component.Kind
		id   component.ID
		name string
	}{
		{component.KindProcessor, procID, ""},
		{component.KindReceiver, component.MustNewIDWithName("gateway", "edge/1 ü~"), ""},
		{component.KindExporter, component.MustNewID("otlp"), "traces"},
		{component.KindExtension, component.MustNewIDWithName("x", "a"), "b.c-d_e"},
		{component.KindConnector, component.MustNewID("count"), ""},
		{component.KindProcessor, procID, long},
	} {
		cl, err := e.GetClient(context.Background(), c.kind, c.id, c.name)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := fileName(dir, c.kind, c.id, c.name)
		if _, err := os.Stat(want); err != nil {
			entries, _ := os.ReadDir(dir)
			var names []string
			for _, en := range entries {
				names = append(names, en.Name())
			}
			t.Errorf("%v %v %q: fileName %s, contrib wrote %v", c.kind, c.id, c.name, filepath.Base(want), names)
		}
	}
}

// TestFactory: the type and configuration are contrib's; type, class and
// stability agree with metadata.yaml.
func TestFactory(t *testing.T) {
	f := NewFactory()
	if f.Type() != contrib.Type() || f.Type().String() != "file_storage" {
		t.Fatalf("type %v", f.Type())
	}
	if _, ok := f.CreateDefaultConfig().(*filestorage.Config); !ok {
		t.Fatalf("config %T, want contrib's", f.CreateDefaultConfig())
	}
	var _ extension.Factory = f
	md := metadatacheck.Read(t, "metadata.yaml")
	metadatacheck.Status(t, md, f.Type(), "extension", map[string]component.StabilityLevel{"extension": f.Stability()})
}

// The crash tests run in a child process (a SIGBUS kills the test binary):
// the child opens a damaged file through contrib's extension or ours and
// reports; the parent reads its exit.
const childEnv = "FILESTORAGE_CRASH_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode, os.Getenv(childEnv+"_DIR")))
	}
	os.Exit(m.Run())
}

// child: "open-contrib"/"open-ours" opens the component's file in dir and
// reads a key; "run-contrib"/"run-ours" opens it healthy, truncates it to
// 8 KiB under the open client, and reads again.
func child(mode, dir string) int {
	ours := strings.HasSuffix(mode, "-ours")
	e := newExt(childTB{}, dir, ours, zap.NewNop())
	ctx := context.Background()
	c, err := e.GetClient(ctx, component.KindProcessor, procID, "")
	if err != nil {
		println("GetClient:", err.Error())
		return 3
	}
	if strings.HasPrefix(mode, "use-") {
		// Checkpoints written and read back, as a component does.
		for i := range 50 {
			k := "w" + strconv.Itoa(i)
			if err := c.Set(ctx, k, make([]byte, 20<<10)); err != nil {
				println("child survived; Set:", err.Error())
				return 0
			}
			if _, err := c.Get(ctx, k); err != nil {
				println("child survived; Get:", err.Error())
				return 0
			}
		}
	}
	if strings.HasPrefix(mode, "run-") {
		if err := os.Truncate(filepath.Join(dir, "processor_cumulative_"), 8192); err != nil {
			println(err.Error())
			return 4
		}
	}
	_, err = c.Get(ctx, "k250")
	println("child survived; Get:", errString(err))
	return 0
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// childTB lets newExt run outside a test.
type childTB struct{ testing.TB }

func (childTB) Helper()           {}
func (childTB) Cleanup(func())    {}
func (childTB) Fatal(args ...any) { panic(args) }

func runChild(t *testing.T, mode, dir string) (string, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, childEnv+"_DIR="+dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() { <-ctx.Done(); _ = cmd.Process.Kill() }()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestTruncatedFileCrashesContrib: contrib's open of a file truncated to
// half or to 8 KiB dies of a fault in bbolt; ours moves it aside and
// starts. And a file truncated under an open client: contrib's read dies,
// ours returns an error.
func TestTruncatedFileCrashesContrib(t *testing.T) {
	_, good := writeDB(t)
	for _, c := range []struct {
		name string
		keep int
		mode string
	}{
		{"truncated to half", len(good) / 2, "open"},
		{"first 8 KiB only", 8192, "open"},
		{"truncated while open", len(good), "run"},
		{"cut through free pages only", 0, "use"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, impl := range []string{"contrib", "ours"} {
				dir := t.TempDir()
				b := good[:c.keep]
				if c.mode == "use" {
					b, _ = freePagesCut(t, t.TempDir())
				}
				if err := os.WriteFile(filepath.Join(dir, "processor_cumulative_"), b, 0o600); err != nil {
					t.Fatal(err)
				}
				out, err := runChild(t, c.mode+"-"+impl, dir)
				first, _, _ := strings.Cut(out, "\n")
				t.Logf("%s: exit %v: %s", impl, err, first)
				survived := err == nil && strings.Contains(out, "child survived")
				if impl == "ours" && !survived {
					t.Errorf("ours died: %v\n%s", err, out)
				}
				// A page past the end is a SIGBUS ("unexpected fault address"),
				// a page inside it that the truncation left stale fails bbolt's
				// page check in the goroutine of its freelist rebuild: either
				// kills the process.
				if impl == "contrib" && (survived || !(strings.Contains(out, "unexpected fault address") || strings.Contains(out, "panic: "))) {
					t.Errorf("contrib's raw open was expected to die: %v\n%.2000s", err, out)
				}
				if impl == "ours" && c.mode == "run" && !strings.Contains(out, "Get: storage file unreadable") {
					t.Errorf("ours read a file truncated under it without an error:\n%s", out)
				}
			}
		})
	}
}

// freePagesCut writes a bbolt file through contrib's extension whose tree
// ends well before its high-water mark (a large value written, then
// deleted), and cuts it after the last page the tree reaches: every page
// it loses is free. It returns the bytes kept and the high-water mark.
func freePagesCut(t *testing.T, dir string) ([]byte, uint64) {
	t.Helper()
	ctx := context.Background()
	e := newExt(t, dir, false, nil)
	c, err := e.GetClient(ctx, component.KindProcessor, procID, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []func() error{
		func() error { return c.Set(ctx, "streams", []byte("checkpoint")) },
		func() error { return c.Set(ctx, "big", make([]byte, 400<<10)) },
		func() error { return c.Delete(ctx, "big") },
		func() error { return c.Close(ctx) },
	} {
		if err := op(); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "processor_cumulative_"))
	if err != nil {
		t.Fatal(err)
	}
	m0, _ := parseMeta(b)
	m1, _ := parseMeta(b[4096:])
	m := m0
	if m1.txid > m0.txid {
		m = m1
	}
	pages := uint64(len(b) / 4096)
	w := walker{r: bytes.NewReader(b), pageSize: 4096, hwm: m.pgid, pages: pages, seen: make([]uint64, (pages+63)/64)}
	if err := w.tree(m.root, 0); err != nil {
		t.Fatal(err)
	}
	last := uint64(0)
	for i := range pages {
		if w.seen[i/64]&(1<<(i%64)) != 0 {
			last = i
		}
	}
	if last+1 >= m.pgid {
		t.Fatalf("the setup left no free page past the tree: last reachable %d, high-water mark %d", last, m.pgid)
	}
	return b[:(last+1)*4096], m.pgid
}

// TestTruncatedPastFreePagesOnly: a file cut after its last reachable page
// but below the high-water mark is damaged too (bbolt opens it, then reads
// a reused free page through a map that ends with the file: the subprocess
// test shows contrib's dying of it), so it is moved aside.
func TestTruncatedPastFreePagesOnly(t *testing.T) {
	dir := t.TempDir()
	cut, hwm := freePagesCut(t, dir)
	path := filepath.Join(dir, "processor_cumulative_")
	if err := os.WriteFile(path, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkFile(path); !errors.Is(err, errDamaged) {
		t.Fatalf("checkFile = %v on a file of %d pages below its high-water mark %d, want damaged", err, len(cut)/4096, hwm)
	}
}

// BenchmarkCheckFile: the check of the file writeDB writes (1 MiB).
func BenchmarkCheckFile(b *testing.B) {
	path, good := writeDB(b)
	b.SetBytes(int64(len(good)))
	for b.Loop() {
		if err := checkFile(path); err != nil {
			b.Fatal(err)
		}
	}
}

// TestUnmovableDamagedFile: a damaged file that cannot be renamed is never
// handed to bbolt: GetClient fails (the component runs without storage and
// counts restore_failed), the file is untouched, the log says why.
func TestUnmovableDamagedFile(t *testing.T) {
	_, good := writeDB(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "processor_cumulative_")
	if err := os.WriteFile(path, good[:8192], 0o600); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	e := newExt(t, dir, true, zap.New(core)).(*fileStorage)
	e.now = func() time.Time { return time.Unix(0, 0) }
	// The rename target exists as a non-empty directory: rename(2) fails
	// whoever runs the test.
	blocker := path + ".corrupt-19700101T000000.000000000Z"
	if err := os.MkdirAll(filepath.Join(blocker, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	c, err := e.GetClient(context.Background(), component.KindProcessor, procID, "")
	if err == nil {
		_ = c.Close(context.Background())
		t.Fatal("GetClient gave a client on a damaged file it could not move aside")
	}
	if !strings.Contains(err.Error(), "could not be moved aside") {
		t.Errorf("error %q", err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, good[:8192]) {
		t.Error("the damaged file was changed")
	}
	if logs.FilterMessageSnippet("could not be moved aside").Len() != 1 {
		t.Errorf("not logged: %v", logs.All())
	}
}

// TestContribRefusesZeroed: what contrib does with a zeroed file (before
// this extension): no client at all, so the component ran without storage
// until the file was removed by hand.
func TestContribRefusesZeroed(t *testing.T) {
	_, good := writeDB(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "processor_cumulative_"), make([]byte, len(good)), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := newExt(t, dir, false, nil).GetClient(context.Background(), component.KindProcessor, procID, ""); err == nil {
		_ = c.Close(context.Background())
		t.Fatal("contrib opened a zeroed file")
	} else {
		t.Logf("contrib: %v", err)
	}
}

// faultOnce is a storage extension whose first GetClient panics, as
// contrib's open does on a fault the check did not foresee.
type faultOnce struct {
	storage.Extension
	calls int
}

func (f *faultOnce) GetClient(ctx context.Context, kind component.Kind, id component.ID, name string) (storage.Client, error) {
	if f.calls++; f.calls == 1 {
		panic("unexpected fault address 0xdead")
	}
	return f.Extension.GetClient(ctx, kind, id, name)
}

// TestFaultInContribsOpen: a panic of contrib's open moves the file aside
// and opens once more.
func TestFaultInContribsOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "processor_cumulative_")
	if err := os.WriteFile(path, nil, 0o600); err != nil { // passes the check
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	inner := &faultOnce{Extension: newExt(t, dir, false, nil)}
	fs := &fileStorage{Extension: inner, dir: dir, logger: zap.New(core), now: time.Now}
	c, err := fs.GetClient(context.Background(), component.KindProcessor, procID, "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(context.Background()) }()
	if inner.calls != 2 || len(MovedAsideOf(c)) != 1 {
		t.Fatalf("%d opens, moved %v: want the file moved aside and a second open", inner.calls, MovedAsideOf(c))
	}
	if logs.FilterMessageSnippet("moved aside").Len() != 1 {
		t.Errorf("not logged: %v", logs.All())
	}
	if err := c.Set(context.Background(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
}
