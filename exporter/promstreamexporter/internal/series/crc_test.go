package series

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCRCCombine: the CRC combined from two parts' CRCs is the CRC of
// their concatenation, for empty parts, single bytes and lengths on either
// side of the powers of two crcShift walks.
func TestCRCCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	lengths := []int{0, 1, 2, 3, 7, 8, 9, 255, 256, 1000, 4095, 4096, 65537, 1 << 20}
	for _, na := range lengths {
		for _, nb := range lengths {
			buf := make([]byte, na+nb)
			for i := range buf {
				buf[i] = byte(rng.Uint32())
			}
			a, b := buf[:na], buf[na:]
			got := crcCombine(crc32.ChecksumIEEE(a), crc32.ChecksumIEEE(b), crcShift(uint64(nb)))
			if want := crc32.ChecksumIEEE(buf); got != want {
				t.Fatalf("combine(%d bytes, %d bytes) = %08x, want %08x", na, nb, got, want)
			}
		}
	}
}

// TestCRCShiftPast4GiB: the shift of a part longer than 4 GiB (a gzip
// body's CRC covers all of it, its size field only the low 32 bits) is the
// shift of its two halves applied in turn.
func TestCRCShiftPast4GiB(t *testing.T) {
	const half = 3 << 30
	if got, want := crcShift(2*half), crcMulMod(crcShift(half), crcShift(half)); got != want {
		t.Fatalf("crcShift(6 GiB) = %08x, want %08x", got, want)
	}
}
