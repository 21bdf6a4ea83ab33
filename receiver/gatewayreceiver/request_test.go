package gatewayreceiver

import (
	"bytes"
	"io"
	"strconv"
	"testing"
)

// chunkReader returns at most chunk bytes a Read, as a connection does.
type chunkReader struct {
	b     []byte
	chunk int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.chunk)], r.b)
	r.b = r.b[n:]
	return n, nil
}

// readAll reads a body whole, into a buffer of exactly its declared size
// (and the byte that reads its end) when it declares one, and of at most
// twice what arrived when it declares more than it sends.
func TestReadAllGrowsWithTheBody(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 1_000_000)
	for _, tc := range []struct {
		name     string
		sent     int
		declared int64
		maxCap   int
	}{
		{"declared", len(body), int64(len(body)), len(body) + 1},
		{"unknown", len(body), -1, 2 * len(body)},
		{"announced more than sent", 100_000, int64(len(body)), 2 * 100_000},
	} {
		got, err := readAll(nil, &chunkReader{b: body[:tc.sent], chunk: 32 << 10}, tc.declared)
		if err != nil || !bytes.Equal(got, body[:tc.sent]) {
			t.Fatalf("%s: read %d bytes, err %v, want the %d sent", tc.name, len(got), err, tc.sent)
		}
		if cap(got) > tc.maxCap {
			t.Errorf("%s: buffer of %d bytes for %d, want at most %d", tc.name, cap(got), tc.sent, tc.maxCap)
		}
	}
}

// readAllAppend is readAll as it was, growing by append (1.25× past 256
// bytes), kept for BenchmarkReadAll's comparison.
func readAllAppend(dst []byte, rd io.Reader) ([]byte, error) {
	if cap(dst) < minBuffer {
		dst = make([]byte, 0, minBuffer)
	}
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := rd.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// BenchmarkReadAll reads a body as the HTTP paths do, 32 KiB a Read: B/op is
// what reading it allocates (the final buffer and the ones it outgrew).
// go test -run '^$' -bench ReadAll -benchmem -count 6 ./receiver/gatewayreceiver | benchstat -
func BenchmarkReadAll(b *testing.B) {
	for _, size := range []int{256 << 10, 19 << 20} {
		body := bytes.Repeat([]byte{'x'}, size)
		b.Run("size="+strconv.Itoa(size>>10)+"KiB/append", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := readAllAppend(nil, &chunkReader{b: body, chunk: 32 << 10}); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, declared := range []bool{false, true} {
			name := "unknown"
			size64 := int64(-1)
			if declared {
				name, size64 = "declared", int64(size)
			}
			b.Run("size="+strconv.Itoa(size>>10)+"KiB/"+name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(size))
				for b.Loop() {
					if _, err := readAll(nil, &chunkReader{b: body, chunk: 32 << 10}, size64); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
