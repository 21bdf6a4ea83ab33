// Package checkpoint holds what the components that checkpoint through the
// collector's storage extension share (the cumulative processor's streams,
// the gateway receiver's flushed windows): the storage client lookup, the
// outcome values of their telemetry, the framing of a checkpoint (magic,
// format version, CRC-32C of the body) and a decoder whose first error
// sticks and that never allocates from a corrupt length.
//
// Each component keeps its own body format and fingerprint; a checkpoint
// that does not open, or whose body does not decode, is discarded whole
// with the outcome saying why.
package checkpoint // import "github.com/otelgateway/otelgateway/internal/checkpoint"

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// Outcome is what became of a checkpoint written or read back: the outcome
// attribute of the components' checkpoint counters.
type Outcome string

const (
	Saved            Outcome = "saved"
	SaveFailed       Outcome = "save_failed"
	Restored         Outcome = "restored"
	DiscardedCorrupt Outcome = "discarded_corrupt"
	DiscardedVersion Outcome = "discarded_version"
	DiscardedConfig  Outcome = "discarded_config"
	RestoreFailed    Outcome = "restore_failed"
	// DiscardedUnreadable: the storage file itself could not be read (a
	// truncated bbolt file) and the distribution's file_storage moved it
	// aside before opening a new one (extension/filestorageextension).
	DiscardedUnreadable Outcome = "discarded_unreadable"
)

// ReplayScopeAttr marks the scope of a window the gateway receiver replays
// from its checkpoint after a restart (receiver/gatewayreceiver,
// checkpoint.go); the cumulative processor removes it and counts the points
// it already holds as replayed, not dropped (replay.go there).
const ReplayScopeAttr = "otelgateway.replay"

// ErrCorrupt wraps every error of a checkpoint that does not decode.
var ErrCorrupt = errors.New("corrupt checkpoint")

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Extension returns the storage extension id names on host. A missing
// extension, or one that is not a storage extension, is a configuration
// error (the component's Start fails, as for contrib's persistent queue).
func Extension(host component.Host, id component.ID) (storage.Extension, error) {
	ext, ok := host.GetExtensions()[id]
	if !ok {
		return nil, fmt.Errorf("storage: extension %q not found", id)
	}
	se, ok := ext.(storage.Extension)
	if !ok {
		return nil, fmt.Errorf("storage: extension %q is not a storage extension", id)
	}
	return se, nil
}

// MovedAside returns the storage files the extension found unreadable and
// moved aside before it opened client's (the distribution's file_storage,
// extension/filestorageextension, tells; other extensions' clients report
// none). Each is counted DiscardedUnreadable by the component.
func MovedAside(client storage.Client) []string {
	if m, ok := client.(interface{ MovedAside() []string }); ok {
		return m.MovedAside()
	}
	return nil
}

// AppendHeader starts a checkpoint: magic, format version and a CRC
// placeholder. Seal fills the CRC in once the body follows.
func AppendHeader(dst []byte, magic string, version uint64) (out []byte, crcAt int) {
	dst = append(dst, magic...)
	dst = binary.AppendUvarint(dst, version)
	crcAt = len(dst)
	return binary.LittleEndian.AppendUint32(dst, 0), crcAt
}

// Seal writes the CRC-32C of everything after the placeholder at crcAt.
func Seal(b []byte, crcAt int) {
	binary.LittleEndian.PutUint32(b[crcAt:], crc32.Checksum(b[crcAt+4:], crcTable))
}

// Reseal recomputes the CRC of a checkpoint with magic and a one-byte
// version: tests and fuzzers use it to reach the body decoder.
func Reseal(b []byte, magic string) {
	if at := len(magic) + 1; len(b) >= at+4 {
		Seal(b, at)
	}
}

// Open checks a checkpoint's magic, version and CRC and returns its body.
func Open(b []byte, magic string, version uint64) ([]byte, Outcome, error) {
	if !bytes.HasPrefix(b, []byte(magic)) {
		return nil, DiscardedCorrupt, fmt.Errorf("%w: no %q header", ErrCorrupt, magic)
	}
	d := Decoder{B: b[len(magic):]}
	if v := d.Uvarint(); d.Err != nil || v != version {
		if d.Err != nil {
			return nil, DiscardedCorrupt, d.Err
		}
		return nil, DiscardedVersion, fmt.Errorf("checkpoint format version %d, this collector reads %d", v, version)
	}
	if len(d.B) < 4 || binary.LittleEndian.Uint32(d.B) != crc32.Checksum(d.B[4:], crcTable) {
		return nil, DiscardedCorrupt, fmt.Errorf("%w: CRC mismatch", ErrCorrupt)
	}
	return d.B[4:], Restored, nil
}

// Decoder reads a checkpoint body: little-endian fixed-width numbers,
// uvarint and varint lengths and counts. The first error sticks (Err) and
// every later read returns a zero value.
type Decoder struct {
	B   []byte
	Err error
}

// Fail records a corruption (the first one is kept).
func (d *Decoder) Fail(format string, args ...any) {
	if d.Err == nil {
		d.Err = fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
	}
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.Fail("bad uvarint")
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Varint reads a signed varint.
func (d *Decoder) Varint() int64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Varint(d.B)
	if n <= 0 {
		d.Fail("bad varint")
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Count reads a number of elements each taking at least min bytes, so a
// corrupt count cannot make the decoder allocate beyond the input's size.
func (d *Decoder) Count(min int) int {
	n := d.Uvarint()
	if n > uint64(len(d.B)/min) {
		d.Fail("%d elements in %d bytes", n, len(d.B))
		return 0
	}
	return int(n)
}

// U64 reads a little-endian uint64.
func (d *Decoder) U64() uint64 {
	if d.Err != nil {
		return 0
	}
	if len(d.B) < 8 {
		d.Fail("truncated")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.B)
	d.B = d.B[8:]
	return v
}

// F64 reads a float64 as its bits.
func (d *Decoder) F64() float64 { return math.Float64frombits(d.U64()) }

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if d.Err != nil {
		return 0
	}
	if len(d.B) == 0 {
		d.Fail("truncated")
		return 0
	}
	v := d.B[0]
	d.B = d.B[1:]
	return v
}

// Bytes reads a length-prefixed byte string, borrowing the input.
func (d *Decoder) Bytes() []byte {
	n := d.Count(1)
	if d.Err != nil {
		return nil
	}
	b := d.B[:n]
	d.B = d.B[n:]
	return b
}

// Str reads a length-prefixed string (copied).
func (d *Decoder) Str() string { return string(d.Bytes()) }
