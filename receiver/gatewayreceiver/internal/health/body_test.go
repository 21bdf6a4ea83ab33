package health

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readBody reads up to its limit exactly: limit bytes pass, limit+1 do
// not, whatever the reads' sizes, and a read error is returned as is.
func TestReadBody(t *testing.T) {
	for _, limit := range []int64{1, 511, 512, 513, 4096, 100_000} {
		for _, size := range []int64{0, limit - 1, limit, limit + 1, 3 * limit} {
			if size < 0 {
				continue
			}
			body := bytes.Repeat([]byte("x"), int(size))
			for name, r := range map[string]io.Reader{"whole": bytes.NewReader(body), "one byte a read": iotest.OneByteReader(bytes.NewReader(body))} {
				got, err := readBody(r, limit)
				switch {
				case size > limit && !errors.Is(err, errTooLarge):
					t.Errorf("limit %d, %d bytes (%s): %d bytes, %v; want errTooLarge", limit, size, name, len(got), err)
				case size <= limit && (err != nil || !bytes.Equal(got, body)):
					t.Errorf("limit %d, %d bytes (%s): %d bytes, %v; want them all", limit, size, name, len(got), err)
				}
			}
		}
	}
	boom := errors.New("connection reset")
	if _, err := readBody(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)), 100); !errors.Is(err, boom) {
		t.Errorf("a failing read: %v, want %v", err, boom)
	}
}
