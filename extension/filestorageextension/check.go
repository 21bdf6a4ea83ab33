package filestorageextension

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
)

// The bbolt file format (go.etcd.io/bbolt v1.5.0, internal/common): pages
// of pageSize bytes, each starting with a 16-byte header (id u64, flags
// u16, count u16, overflow u32); pages 0 and 1 are meta pages whose meta
// (64 bytes after the header) names the page size, the root bucket's page,
// the freelist's page and the high-water mark pgid (the first page id never
// allocated). Everything is little-endian on the platforms the distribution
// is built for.
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	pageHeaderSize   = 16
	metaSize         = 64
	elemSize         = 16 // a branch or leaf page element
	inBucketSize     = 16 // a bucket value: root pgid u64, sequence u64
	noFreelist       = ^uint64(0)
	branchPageFlag   = 0x01
	leafPageFlag     = 0x02
	freelistPageFlag = 0x10
	bucketLeafFlag   = 0x01
	// maxDepth bounds the B+tree depth (buckets nested in buckets included)
	// the walk follows: bbolt's trees are a few levels deep.
	maxDepth = 64
)

// errDamaged wraps every reason checkFile gives.
var errDamaged = errors.New("unreadable bbolt file")

func damaged(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errDamaged}, args...)...)
}

type meta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
}

// parseMeta reads the meta of a meta page (b starts at the page) and
// checks it as bbolt's Meta.Validate does: magic, version, FNV-64a checksum.
func parseMeta(b []byte) (meta, bool) {
	if len(b) < pageHeaderSize+metaSize {
		return meta{}, false
	}
	m := b[pageHeaderSize : pageHeaderSize+metaSize]
	if binary.LittleEndian.Uint32(m[0:]) != boltMagic || binary.LittleEndian.Uint32(m[4:]) != boltVersion {
		return meta{}, false
	}
	h := fnv.New64a()
	_, _ = h.Write(m[:56])
	if h.Sum64() != binary.LittleEndian.Uint64(m[56:]) {
		return meta{}, false
	}
	return meta{
		pageSize: binary.LittleEndian.Uint32(m[8:]),
		root:     binary.LittleEndian.Uint64(m[16:]),
		freelist: binary.LittleEndian.Uint64(m[32:]),
		pgid:     binary.LittleEndian.Uint64(m[40:]),
		txid:     binary.LittleEndian.Uint64(m[48:]),
	}, true
}

// checkFile tells whether bbolt can open the file at path without reading
// past its end: nil for a file bbolt opens safely (or creates: missing or
// empty), an error wrapping errDamaged for one it cannot open or would
// fault on, any other error when the check itself could not run.
//
// bbolt maps the file and reads its pages in place, so a page past the end
// of the file is a SIGBUS that kills the process (a truncated file: the
// meta pages are intact and name pages the file no longer has). The check
// reads what bbolt's Open reads through the map, with pread and bounds:
// the meta pages as bbolt picks them (the valid one of the highest txid),
// their page size and high-water mark against the file's size, then every
// page reachable from the root bucket (bbolt's freelist rebuild walks them
// all at open, as file_storage keeps no freelist): each below the
// high-water mark and, its overflow pages included, inside the file; a
// branch or leaf page carrying its own id; its elements, keys and values
// inside the page; each reached once.
func checkFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	size := info.Size()
	if size == 0 {
		return nil // bbolt writes a new database into an empty file
	}
	return checkReader(f, size)
}

func checkReader(r io.ReaderAt, size int64) error {
	first := make([]byte, min(size, 4096))
	if _, err := r.ReadAt(first, 0); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	// The page size as bbolt's getPageSize finds it: from meta page 0, or
	// from a meta page 1 at 1 KiB << i.
	m0, ok0 := parseMeta(first)
	pageSize := int64(m0.pageSize)
	if !ok0 {
		buf := make([]byte, pageHeaderSize+metaSize)
		for i := 0; i <= 14; i++ {
			pos := int64(1024) << i
			if pos >= size-1024 {
				break
			}
			if n, _ := r.ReadAt(buf, pos); n == len(buf) {
				if m, ok := parseMeta(buf); ok {
					pageSize = int64(m.pageSize)
					break
				}
			}
		}
		if pageSize == 0 {
			return damaged("no valid meta page (%d bytes)", size)
		}
	}
	if pageSize < 1024 || pageSize > 1<<24 || pageSize&(pageSize-1) != 0 {
		return damaged("page size %d", pageSize)
	}
	if size < 2*pageSize {
		return damaged("%d bytes, less than the two meta pages of %d", size, pageSize)
	}
	page1 := make([]byte, pageHeaderSize+metaSize)
	if _, err := r.ReadAt(page1, pageSize); err != nil {
		return err
	}
	m1, ok1 := parseMeta(page1)
	var m meta
	switch {
	case !ok0 && !ok1:
		return damaged("both meta pages invalid")
	case ok0 && ok1:
		if m = m0; m1.txid > m0.txid {
			m = m1
		}
	case ok0:
		m = m0
	default:
		m = m1
	}
	if m.pageSize != uint32(pageSize) {
		return damaged("meta page size %d, file read with %d", m.pageSize, pageSize)
	}
	// Every page below the high-water mark must be in the file, reachable
	// or free: bbolt maps the file as it is, and a free page it reuses from
	// past the end is written with pwrite but read back through the map,
	// past its end (a fault or a page check failing, soon after the start).
	pages := uint64(size / pageSize)
	if m.pgid < 3 || m.pgid > pages {
		return damaged("high-water mark page %d, the file holds %d pages of %d bytes (%d bytes): truncated", m.pgid, pages, pageSize, size)
	}
	if m.root < 2 || m.root >= m.pgid {
		return damaged("root page %d outside 2..%d", m.root, m.pgid-1)
	}
	w := walker{r: r, pageSize: pageSize, hwm: m.pgid, pages: pages, seen: make([]uint64, (min(m.pgid, pages)+63)/64)}
	if m.freelist != noFreelist {
		if err := w.freelist(m.freelist); err != nil {
			return err
		}
	}
	return w.tree(m.root, 0)
}

// walker reads the pages of a bbolt file with bounds.
type walker struct {
	r        io.ReaderAt
	pageSize int64
	hwm      uint64   // the meta's high-water mark
	pages    uint64   // whole pages in the file
	seen     []uint64 // a bit per page id below min(hwm, pages)
	buf      []byte
}

// read returns page id and its overflow pages, after checking them.
func (w *walker) read(id uint64) ([]byte, error) {
	if id < 2 || id >= w.hwm {
		return nil, damaged("page %d outside 2..%d", id, w.hwm-1)
	}
	if id >= w.pages {
		return nil, damaged("page %d past the end of the file (%d pages of %d bytes): truncated", id, w.pages, w.pageSize)
	}
	if w.seen[id/64]&(1<<(id%64)) != 0 {
		return nil, damaged("page %d referenced twice", id)
	}
	w.seen[id/64] |= 1 << (id % 64)
	var hdr [pageHeaderSize]byte
	if _, err := w.r.ReadAt(hdr[:], int64(id)*w.pageSize); err != nil {
		return nil, err
	}
	if got := binary.LittleEndian.Uint64(hdr[0:]); got != id {
		return nil, damaged("page %d carries id %d", id, got)
	}
	overflow := uint64(binary.LittleEndian.Uint32(hdr[12:]))
	if overflow >= w.hwm-id {
		return nil, damaged("page %d with %d overflow pages past the high-water mark %d", id, overflow, w.hwm)
	}
	if overflow >= w.pages-id {
		return nil, damaged("page %d with %d overflow pages past the end of the file (%d pages): truncated", id, overflow, w.pages)
	}
	n := int64(overflow+1) * w.pageSize
	if int64(cap(w.buf)) < n {
		w.buf = make([]byte, n)
	}
	b := w.buf[:n]
	if _, err := w.r.ReadAt(b, int64(id)*w.pageSize); err != nil {
		return nil, err
	}
	return b, nil
}

func (w *walker) freelist(id uint64) error {
	b, err := w.read(id)
	if err != nil {
		return err
	}
	if flags := binary.LittleEndian.Uint16(b[8:]); flags != freelistPageFlag {
		return damaged("freelist page %d has flags %#x", id, flags)
	}
	return nil
}

// tree checks the B+tree whose root is page id: a bucket's pages.
func (w *walker) tree(id uint64, depth int) error {
	if depth > maxDepth {
		return damaged("tree deeper than %d at page %d", maxDepth, id)
	}
	b, err := w.read(id)
	if err != nil {
		return err
	}
	// Copy the page: the walk below reuses the buffer.
	p := append([]byte(nil), b...)
	flags := binary.LittleEndian.Uint16(p[8:])
	count := int(binary.LittleEndian.Uint16(p[10:]))
	switch flags {
	case branchPageFlag:
		if pageHeaderSize+count*elemSize > len(p) {
			return damaged("branch page %d: %d elements overflow the page", id, count)
		}
		for i := 0; i < count; i++ {
			e := p[pageHeaderSize+i*elemSize:]
			pos, ksize := uint64(binary.LittleEndian.Uint32(e[0:])), uint64(binary.LittleEndian.Uint32(e[4:]))
			if end := uint64(pageHeaderSize+i*elemSize) + pos + ksize; end > uint64(len(p)) {
				return damaged("branch page %d: key %d past the page", id, i)
			}
			if err := w.tree(binary.LittleEndian.Uint64(e[8:]), depth+1); err != nil {
				return err
			}
		}
		return nil
	case leafPageFlag:
		return w.leaf(id, p, count, depth)
	default:
		return damaged("page %d has flags %#x, not a branch or leaf page", id, flags)
	}
}

// leaf checks a leaf page's elements (p is the page, an inline bucket's
// page included) and follows the buckets it holds.
func (w *walker) leaf(id uint64, p []byte, count, depth int) error {
	if pageHeaderSize+count*elemSize > len(p) {
		return damaged("leaf page %d: %d elements overflow the page", id, count)
	}
	for i := 0; i < count; i++ {
		off := uint64(pageHeaderSize + i*elemSize)
		e := p[off:]
		flags := binary.LittleEndian.Uint32(e[0:])
		pos := uint64(binary.LittleEndian.Uint32(e[4:]))
		ksize := uint64(binary.LittleEndian.Uint32(e[8:]))
		vsize := uint64(binary.LittleEndian.Uint32(e[12:]))
		vstart := off + pos + ksize
		if vstart+vsize > uint64(len(p)) {
			return damaged("leaf page %d: element %d past the page", id, i)
		}
		if flags&bucketLeafFlag == 0 {
			continue
		}
		v := p[vstart : vstart+vsize]
		if len(v) < inBucketSize {
			return damaged("leaf page %d: bucket %d value of %d bytes", id, i, len(v))
		}
		if root := binary.LittleEndian.Uint64(v); root != 0 {
			if err := w.tree(root, depth+1); err != nil {
				return err
			}
			continue
		}
		// An inline bucket: its page follows the bucket header in the value.
		ip := v[inBucketSize:]
		if len(ip) < pageHeaderSize {
			return damaged("leaf page %d: inline bucket %d of %d bytes", id, i, len(ip))
		}
		if f := binary.LittleEndian.Uint16(ip[8:]); f != leafPageFlag {
			return damaged("leaf page %d: inline bucket %d has flags %#x", id, i, f)
		}
		if depth+1 > maxDepth {
			return damaged("tree deeper than %d at page %d", maxDepth, id)
		}
		if err := w.leaf(id, ip, int(binary.LittleEndian.Uint16(ip[10:])), depth+1); err != nil {
			return err
		}
	}
	return nil
}
