// Package series is the exporter's series table: Prometheus families in a
// stable order, each family's series in fixed-size pages, every series with
// its `name{labels}` prefix rendered once, at insert.
//
// Layout and ordering: families are written in the order they were first
// seen; a family's series in page order, and inside a page in insertion order
// (the text format does not require sorting, and sorting per scrape is what
// makes other exporters slow). Expiry removes series in place, so order
// survives it.
//
// Locking, from outside in:
//   - Table.mu (RWMutex) guards the family list; a scrape holds it only to
//     copy the list.
//   - Family.mu guards the page list, the index and inserts; writers hold it
//     for one lookup-and-set, a scrape only to copy the page list.
//   - page.mu guards one page's series slice; a scrape holds it while it
//     renders that page into its own buffer, never while it writes to the
//     connection. An insert waits for at most one page's render.
//
// Values are atomics, so updating an existing series never waits for a scrape.
package series // import "github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/series"

import (
	"errors"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/internal/exposition"
)

// PageSize is the number of series per page: small enough that a page
// renders in microseconds (the longest an insert can wait), large enough that
// locking costs nothing next to rendering.
const PageSize = 256

// flushAt is the buffer size at which a scrape writes to the connection.
const flushAt = 32 << 10

// ErrTypeConflict is returned when a family name is already used with another
// type: writing both would make an invalid exposition.
var ErrTypeConflict = errors.New("family name already in use with another type")

// Key identifies a series inside its family: the labels derived from the
// resource (job, instance) and the data point's attributes.
type Key struct {
	Job, Instance string
	Attrs         pcommon.Map
}

func (k *Key) equal(o *Key) bool {
	return k.Job == o.Job && k.Instance == o.Instance && k.Attrs.Equal(o.Attrs)
}

// Series is one exposed time series.
type Series struct {
	prefix  []byte // `name{labels}`, rendered at insert, never changed
	key     Key    // owned copy
	bits    atomic.Uint64
	updated atomic.Int64 // unix nanos of the last Set
}

// Table holds every family the exporter serves.
type Table struct {
	mu       sync.RWMutex
	families []*Family
	byName   map[string]*Family
	count    atomic.Int64
}

// New returns an empty table.
func New() *Table {
	return &Table{byName: make(map[string]*Family)}
}

// Len returns the number of series in the table.
func (t *Table) Len() int64 { return t.count.Load() }

// Family returns the family called name, creating it with help and typ if it
// does not exist. It returns ErrTypeConflict if name exists with another type.
func (t *Table) Family(name, help string, typ exposition.Type) (*Family, error) {
	t.mu.RLock()
	f := t.byName[name]
	t.mu.RUnlock()
	if f == nil {
		t.mu.Lock()
		// Re-check: another writer may have created it between the locks.
		if f = t.byName[name]; f == nil {
			f = &Family{
				table:  t,
				name:   name,
				typ:    typ,
				header: exposition.AppendHeader(nil, name, help, typ),
				index:  make(map[uint64][]*Series),
			}
			t.byName[name] = f
			t.families = append(t.families, f)
		}
		t.mu.Unlock()
	}
	if f.typ != typ {
		return nil, ErrTypeConflict
	}
	return f, nil
}

// Family is one metric family: a name, a type, and its series.
type Family struct {
	table  *Table
	name   string
	typ    exposition.Type
	header []byte

	mu    sync.Mutex
	pages []*page
	index map[uint64][]*Series
	live  int
}

type page struct {
	mu     sync.Mutex
	series []*Series
}

// Name returns the family's Prometheus name.
func (f *Family) Name() string { return f.name }

// Set stores v as the value of the series with this hash and key, creating it
// when it does not exist; render appends the series' prefix (`name{labels}`)
// and is called only then. key is borrowed: Set copies what it keeps. It
// reports whether the series was created.
//
// The lookup confirms a hash hit by comparing the keys, so colliding label
// sets stay distinct series. Lookup, insert and value store happen under
// f.mu, so a concurrent Expire can never drop a value that was just set.
func (f *Family) Set(hash uint64, key *Key, v float64, now int64, render func(dst []byte) []byte) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.index[hash] {
		if s.key.equal(key) {
			s.bits.Store(math.Float64bits(v))
			s.updated.Store(now)
			return false
		}
	}
	s := &Series{prefix: render(nil), key: Key{Job: key.Job, Instance: key.Instance, Attrs: pcommon.NewMap()}}
	key.Attrs.CopyTo(s.key.Attrs)
	s.bits.Store(math.Float64bits(v))
	s.updated.Store(now)
	f.index[hash] = append(f.index[hash], s)
	f.insertLocked(s)
	f.live++
	f.table.count.Add(1)
	return true
}

// insertLocked appends s to the last page, or to a new one when it is full.
func (f *Family) insertLocked(s *Series) {
	var p *page
	if n := len(f.pages); n > 0 {
		p = f.pages[n-1]
	}
	if p == nil {
		p = &page{series: make([]*Series, 0, PageSize)}
		f.pages = append(f.pages, p)
	}
	p.mu.Lock()
	if len(p.series) == PageSize {
		p.mu.Unlock()
		p = &page{series: make([]*Series, 0, PageSize)}
		f.pages = append(f.pages, p)
		p.mu.Lock()
	}
	p.series = append(p.series, s)
	p.mu.Unlock()
}

// Expire removes every series not updated since cutoff (unix nanos) and
// returns how many it removed. Pages left empty are released.
func (t *Table) Expire(cutoff int64) int {
	t.mu.RLock()
	families := slices.Clone(t.families)
	t.mu.RUnlock()
	removed := 0
	for _, f := range families {
		removed += f.expire(cutoff)
	}
	t.count.Add(-int64(removed))
	return removed
}

func (f *Family) expire(cutoff int64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	removed := 0
	for _, p := range f.pages {
		p.mu.Lock()
		before := len(p.series)
		p.series = slices.DeleteFunc(p.series, func(s *Series) bool { return s.updated.Load() < cutoff })
		removed += before - len(p.series)
		p.mu.Unlock()
	}
	if removed == 0 {
		return 0
	}
	f.pages = slices.DeleteFunc(f.pages, func(p *page) bool { return len(p.series) == 0 })
	for h, list := range f.index {
		list = slices.DeleteFunc(list, func(s *Series) bool { return s.updated.Load() < cutoff })
		if len(list) == 0 {
			delete(f.index, h)
		} else {
			f.index[h] = list
		}
	}
	f.live -= removed
	return removed
}

// Writer renders the table. It keeps its buffers between scrapes; one Writer
// serves one scrape at a time.
type Writer struct {
	buf      []byte
	families []*Family
	pages    []*page
}

// WriteTo streams every non-empty family to w, page by page, and returns the
// number of bytes written. It writes to w whenever its buffer passes 32 KiB,
// and never while it holds a lock. When write fails, it stops at once and
// returns the error, having written a prefix of the exposition: the caller
// must then abort the response rather than end it cleanly.
func (wr *Writer) WriteTo(t *Table, w io.Writer) (int64, error) {
	t.mu.RLock()
	wr.families = append(wr.families[:0], t.families...)
	t.mu.RUnlock()
	var written int64
	wr.buf = wr.buf[:0]
	for _, f := range wr.families {
		f.mu.Lock()
		wr.pages = append(wr.pages[:0], f.pages...)
		live := f.live
		f.mu.Unlock()
		if live == 0 {
			continue
		}
		wr.buf = append(wr.buf, f.header...)
		for _, p := range wr.pages {
			p.mu.Lock()
			for _, s := range p.series {
				wr.buf = append(wr.buf, s.prefix...)
				wr.buf = exposition.AppendSample(wr.buf, math.Float64frombits(s.bits.Load()))
			}
			p.mu.Unlock()
			if len(wr.buf) >= flushAt {
				n, err := w.Write(wr.buf)
				written += int64(n)
				if err != nil {
					return written, err
				}
				wr.buf = wr.buf[:0]
			}
		}
	}
	clear(wr.families) // drop references so removed families can be collected
	clear(wr.pages)
	n, err := w.Write(wr.buf)
	return written + int64(n), err
}
