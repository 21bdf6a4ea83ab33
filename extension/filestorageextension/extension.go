// Package filestorageextension is the distribution's `file_storage`
// extension: contrib's file_storage (extension/storage/filestorage), its
// configuration and every key unchanged, with an open path that a damaged
// file never stops.
//
// contrib's GetClient opens the component's bbolt file, and bbolt maps the
// file and reads it in place: a file truncated after its meta pages were
// written (a full disk, a copy cut short, a crash of the file system) names
// pages the file no longer has, and the first read of one is a SIGBUS that
// kills the collector at every start until someone deletes the file. This
// package's GetClient computes the file contrib is about to open (its
// naming rule, fileName), checks it (checkFile: the meta pages, the
// high-water mark against the file's size, every reachable page in bounds)
// and moves a file that fails aside, as <file>.corrupt-<UTC timestamp>,
// never deleting it; then contrib opens (or creates) the file. A fault or
// panic in contrib's open that the check did not foresee is recovered the
// same way once (debug.SetPanicOnFault). The clients it returns recover a
// fault of a later read or write into an error, and report the files moved
// aside for them (MovedAside) so the component counts it in its checkpoint
// telemetry (outcome discarded_unreadable).
package filestorageextension // import "github.com/otelgateway/otelgateway/extension/filestorageextension"

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"
)

// Type is contrib's: configurations name `file_storage` as they always did.
var Type = component.MustNewType("file_storage")

var contrib = filestorage.NewFactory()

// NewFactory returns the factory of the distribution's file_storage
// extension: contrib's configuration and defaults, contrib's extension
// behind a checked open.
func NewFactory() extension.Factory {
	return extension.NewFactory(Type, contrib.CreateDefaultConfig, create, contrib.Stability())
}

func create(ctx context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	inner, err := contrib.Create(ctx, set, cfg)
	if err != nil {
		return nil, err
	}
	se, ok := inner.(storage.Extension)
	if !ok {
		return nil, fmt.Errorf("contrib's file_storage is not a storage extension (%T)", inner)
	}
	return &fileStorage{Extension: se, dir: cfg.(*filestorage.Config).Directory, logger: set.Logger, now: time.Now}, nil
}

type fileStorage struct {
	storage.Extension // Start, Shutdown: contrib's
	dir               string
	logger            *zap.Logger
	now               func() time.Time
}

// GetClient checks the component's file, moves it aside if bbolt cannot
// read it, and returns contrib's client for it.
func (fs *fileStorage) GetClient(ctx context.Context, kind component.Kind, id component.ID, name string) (storage.Client, error) {
	path := fileName(fs.dir, kind, id, name)
	var moved []string
	if err := checkFile(path); err != nil {
		if !errors.Is(err, errDamaged) {
			// The check could not run (permissions, I/O): contrib's open
			// says what it makes of the file.
			fs.logger.Warn("Could not check the storage file before opening it", zap.String("file", path), zap.Error(err))
		} else {
			to, merr := fs.moveAside(path, err)
			if merr != nil {
				// Never hand bbolt a file it would fault on: no client (the
				// component runs in memory and counts restore_failed).
				return nil, fmt.Errorf("storage file %s is unreadable (%w) and could not be moved aside: %w", path, err, merr)
			}
			moved = append(moved, to)
		}
	}
	c, err := openGuarded(ctx, fs.Extension, kind, id, name)
	var f *openFault
	if errors.As(err, &f) {
		// Unforeseen by the check: move the file aside and open a new one,
		// once.
		to, merr := fs.moveAside(path, err)
		if merr != nil {
			return nil, fmt.Errorf("%w; the file could not be moved aside: %w", err, merr)
		}
		moved = append(moved, to)
		c, err = openGuarded(ctx, fs.Extension, kind, id, name)
	}
	if err != nil {
		return nil, err
	}
	cl := &client{Client: c, moved: moved, path: path, logger: fs.logger}
	cl.last, _ = os.Stat(path)
	return cl, nil
}

// moveAside renames a file bbolt cannot read to <path>.corrupt-<UTC time>.
func (fs *fileStorage) moveAside(path string, why error) (string, error) {
	to := path + ".corrupt-" + fs.now().UTC().Format("20060102T150405.000000000Z")
	if err := os.Rename(path, to); err != nil {
		fs.logger.Error("Storage file is unreadable and could not be moved aside; the component gets no storage until it is moved or removed by hand",
			zap.String("file", path), zap.NamedError("damage", why), zap.Error(err))
		return "", err
	}
	fs.logger.Warn("Storage file is unreadable: moved aside, the component starts with a new one (its checkpoint is lost)",
		zap.String("file", path), zap.String("moved_to", to), zap.NamedError("damage", why))
	return to, nil
}

// openFault is a fault or panic recovered from contrib's open.
type openFault struct{ v any }

func (f *openFault) Error() string { return fmt.Sprintf("opening the storage file faulted: %v", f.v) }

// openGuarded runs contrib's GetClient with memory faults turned into
// panics on this goroutine, and recovers them. (bbolt's freelist rebuild
// walks the tree on a goroutine of its own, where a fault still kills the
// process: checkFile walks the same pages first.)
func openGuarded(ctx context.Context, se storage.Extension, kind component.Kind, id component.ID, name string) (c storage.Client, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, &openFault{v: r}
		}
	}()
	return se.GetClient(ctx, kind, id, name)
}

// fileName is the file contrib's GetClient opens for a component
// (filestorage v0.165.1, extension.go): kind_type_name[_name], sanitized,
// in the directory; its SHA-256 in hex when that name is too long for the
// file system.
func fileName(dir string, kind component.Kind, id component.ID, name string) string {
	raw := kindString(kind) + "_" + id.Type().String() + "_" + id.Name()
	if name != "" {
		raw += "_" + name
	}
	raw = sanitize(raw)
	path := filepath.Join(dir, raw)
	if _, err := os.Lstat(path); errors.Is(err, syscall.ENAMETOOLONG) {
		sum := sha256.Sum256([]byte(raw))
		path = filepath.Join(dir, hex.EncodeToString(sum[:]))
	}
	return path
}

func kindString(k component.Kind) string {
	switch k {
	case component.KindReceiver:
		return "receiver"
	case component.KindProcessor:
		return "processor"
	case component.KindExporter:
		return "exporter"
	case component.KindExtension:
		return "extension"
	case component.KindConnector:
		return "connector"
	default:
		return "other"
	}
}

// sanitize replaces every rune but A-Z a-z 0-9 . - _ by ~ and its Unicode
// code point in four or more hex digits, as contrib does.
func sanitize(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			b.WriteRune(r)
		default:
			fmt.Fprintf(&b, "~%04X", r)
		}
	}
	return b.String()
}

// client is contrib's client with two guards for a file damaged under
// it (truncated while the collector runs): before each operation the file
// must not have shrunk since the last one (bbolt only grows its file; a
// compaction that replaces it is a new file), else the operation fails
// without touching bbolt, whose next page read would be a SIGBUS; and a
// fault or panic of the operation itself is recovered into an error.
// MovedAside reports the files moved aside before it was opened.
type client struct {
	storage.Client
	moved  []string
	path   string
	logger *zap.Logger
	mu     sync.Mutex
	last   os.FileInfo // the file at the last operation
	shrunk error       // sticky once the file has shrunk
}

// MovedAside returns the files moved aside before this client's was
// opened (internal/checkpoint.MovedAside reads it).
func (c *client) MovedAside() []string { return c.moved }

// errUnreadable wraps the errors of a file damaged under an open client.
var errUnreadable = errors.New("storage file unreadable")

// check fails once the file has shrunk under the client.
func (c *client) check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shrunk != nil {
		return c.shrunk
	}
	now, err := os.Stat(c.path)
	if err != nil || c.last == nil || !os.SameFile(now, c.last) {
		c.last = now // missing (bbolt keeps its open file), or replaced
		return nil
	}
	if now.Size() < c.last.Size() {
		c.shrunk = fmt.Errorf("%w: %s shrank from %d to %d bytes under the open database (restart to move it aside)",
			errUnreadable, c.path, c.last.Size(), now.Size())
		c.logger.Error("Storage file was truncated under the running collector; its operations fail until a restart moves it aside",
			zap.String("file", c.path), zap.Int64("bytes_before", c.last.Size()), zap.Int64("bytes", now.Size()))
		return c.shrunk
	}
	c.last = now
	return nil
}

// done records the file's size after an operation (bbolt may have grown
// it).
func (c *client) done() {
	if now, err := os.Stat(c.path); err == nil {
		c.mu.Lock()
		if c.shrunk == nil {
			c.last = now
		}
		c.mu.Unlock()
	}
}

// guard runs op with faults turned into panics and recovered.
func (c *client) guard(op func() error) (err error) {
	if err := c.check(); err != nil {
		return err
	}
	defer c.done()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errUnreadable, r)
		}
	}()
	return op()
}

func (c *client) Get(ctx context.Context, key string) (v []byte, err error) {
	err = c.guard(func() (err error) { v, err = c.Client.Get(ctx, key); return err })
	return v, err
}

func (c *client) Set(ctx context.Context, key string, value []byte) error {
	return c.guard(func() error { return c.Client.Set(ctx, key, value) })
}

func (c *client) Delete(ctx context.Context, key string) error {
	return c.guard(func() error { return c.Client.Delete(ctx, key) })
}

func (c *client) Batch(ctx context.Context, ops ...*storage.Operation) error {
	return c.guard(func() error { return c.Client.Batch(ctx, ops...) })
}

// Close closes bbolt's file (it reads no page).
func (c *client) Close(ctx context.Context) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errUnreadable, r)
		}
	}()
	return c.Client.Close(ctx)
}

// Walk is contrib's storage.Walker, when its client has it.
func (c *client) Walk(ctx context.Context, fn storage.WalkFunc) error {
	w, ok := c.Client.(storage.Walker)
	if !ok {
		return errors.New("storage client does not support Walk")
	}
	return c.guard(func() error { return w.Walk(ctx, fn) })
}
