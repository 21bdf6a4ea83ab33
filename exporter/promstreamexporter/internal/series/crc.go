package series

// CRC-32 (IEEE, as gzip's trailer holds it) of a concatenation from the
// CRCs of its parts: a gzip scrape splices compressed pages it kept from an
// earlier scrape (gzip.go) and must still end with the CRC of the whole
// body, without reading the spliced pages' bytes again. hash/crc32 has no
// combine; this is zlib's crc32_combine (multmodp, x2nmodp: arithmetic on
// polynomials over GF(2), modulo the CRC's, in its reflected bit order).

// crcPoly is the IEEE polynomial, reflected.
const crcPoly = 0xedb88320

// crcX2n[k] is x^(2^k) modulo the polynomial.
var crcX2n = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	t[0] = p
	for k := 1; k < 32; k++ {
		p = crcMulMod(p, p)
		t[k] = p
	}
	return t
}()

// crcMulMod returns a·b modulo the polynomial.
func crcMulMod(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				break
			}
		}
		if b&1 != 0 {
			b = b>>1 ^ crcPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// crcShift returns the operator crcCombine applies for a second part of n
// bytes: x^(8n) modulo the polynomial. A kept page stores it, so splicing
// the page costs one crcMulMod, not the 64 or so of computing it.
func crcShift(n uint64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = crcMulMod(crcX2n[k&31], p)
		}
	}
	return p
}

// crcCombine returns the CRC of a‖b from a's CRC, b's CRC and b's shift
// (crcShift of b's length).
func crcCombine(crcA, crcB, shiftB uint32) uint32 {
	return crcMulMod(shiftB, crcA) ^ crcB
}
