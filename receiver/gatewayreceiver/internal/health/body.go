package health

import (
	"errors"
	"io"
	"strconv"
)

// Memory follows the bound, not what the admin API sends (issue 24, item
// 7): an answer is read into a buffer that grows with the bytes received
// (never with what Content-Length announces) up to the poller's
// max_response_body_size, and refused the moment one byte more arrives; the
// rest is never read (closing the body drops the connection). The bytes
// counted are those after the transport's transparent gzip decoding, so a
// compressed answer is bounded by what it expands to.

// firstBodyBuffer is the first buffer of an answer; it doubles from there.
// Small, as io.ReadAll's: most answers (one Kong upstream's health) are
// well under a kilobyte, and a poll reads one per upstream.
const firstBodyBuffer = 512

// statusBodyPrefix is how much of a non-200 answer is read: its start is
// quoted in the error, the rest is not needed.
const statusBodyPrefix = 512

// errTooLarge marks an answer refused for its size.
var errTooLarge = errors.New("admin API answer too large")

// tooLargeError is an answer larger than max_response_body_size.
type tooLargeError struct {
	url    string
	poller string // "kong[0]"
	limit  int64
	// announced is the Content-Length that gave it away (-1: the bytes
	// read did).
	announced int64
}

func (e *tooLargeError) Error() string {
	what := "the answer exceeds "
	if e.announced >= 0 {
		what = "the answer announces Content-Length " + strconv.FormatInt(e.announced, 10) + ", more than "
	}
	return "GET " + e.url + ": " + what + "health." + e.poller + ".max_response_body_size (" + strconv.FormatInt(e.limit, 10) +
		" bytes); refused unread, the last state is kept: raise max_response_body_size if the admin API's answers are really this large"
}

func (e *tooLargeError) Unwrap() error { return errTooLarge }

// readBody reads r to its end into a buffer of at most limit bytes. An
// answer longer than limit returns errTooLarge after reading limit+1 bytes
// of it.
func readBody(r io.Reader, limit int64) ([]byte, error) {
	buf := make([]byte, 0, min(int64(firstBodyBuffer), limit+1))
	for {
		if len(buf) == cap(buf) {
			// Grow by doubling, but never past limit+1: one byte more than
			// the bound is all it takes to refuse.
			next := make([]byte, len(buf), min(2*int64(cap(buf)), limit+1))
			copy(next, buf)
			buf = next
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, errTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
