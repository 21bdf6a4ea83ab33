package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
)

// EntryError is one log entry of a batch that could not be mapped: Index is
// its 0-based position in the batch, Err says why. The other entries of the
// batch are unaffected.
type EntryError struct {
	Index int
	Err   error
}

func (e *EntryError) Error() string {
	return "entry " + strconv.Itoa(e.Index) + ": " + e.Err.Error()
}

// ErrBody is returned when a body is not JSON at the batch level (not an
// object, an array of values or newline-delimited objects): nothing in it
// can be trusted, so it is rejected whole.
var ErrBody = errors.New("body is not a JSON object, array or newline-delimited objects")

// forEachEntry splits a log body into its entries: one JSON object, a JSON
// array of entries, or (if ndjson) objects separated by whitespace/newlines.
// fn is called with each entry's raw bytes and index; its error is recorded
// for that entry only. It returns how many entries there were.
func forEachEntry(body []byte, ndjson bool, fn func(i int, raw json.RawMessage) error) (n int, entryErrs []EntryError, err error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return 0, nil, errors.New("empty body")
	}
	if trimmed[0] == '[' {
		var raws []json.RawMessage
		if err := json.Unmarshal(trimmed, &raws); err != nil {
			return 0, nil, errors.Join(ErrBody, err)
		}
		for i, raw := range raws {
			if err := fn(i, raw); err != nil {
				entryErrs = append(entryErrs, EntryError{Index: i, Err: err})
			}
		}
		return len(raws), entryErrs, nil
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	for i := 0; ; i++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return i, entryErrs, nil
			}
			if i == 0 {
				return 0, nil, errors.Join(ErrBody, err)
			}
			// A broken line after good ones: the lines before stand, the
			// rest of the body cannot be split reliably.
			entryErrs = append(entryErrs, EntryError{Index: i, Err: err})
			return i + 1, entryErrs, nil
		}
		if i == 1 && !ndjson {
			return 0, nil, errors.Join(ErrBody, errors.New("more than one JSON value; send an array"))
		}
		if err := fn(i, raw); err != nil {
			entryErrs = append(entryErrs, EntryError{Index: i, Err: err})
		}
	}
}

// Number is a JSON number that some gateways send as a string (nginx
// variables); absent or null reads as Unknown (-1).
type Number float64

// UnmarshalJSON accepts 12, 12.5, "12" and null.
func (n *Number) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = Unknown
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		s, err := strconv.Unquote(string(b))
		if err != nil {
			return err
		}
		if s == "" {
			*n = Unknown
			return nil
		}
		b = []byte(s)
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsInf(f, 0) {
		return errors.New("want a number, got " + strconv.Quote(string(b)))
	}
	*n = Number(f)
	return nil
}

func (n Number) size() int64 {
	f := float64(n)
	if !(f >= 0) || f != math.Trunc(f) || f > 1<<53 {
		return Unknown
	}
	return int64(f)
}

func (n Number) ms() float64 {
	if !(n >= 0) {
		return Unknown
	}
	return float64(n)
}

func unknownNumber() Number { return Unknown }

// logEntry is a decoded access-log entry of one gateway's format.
type logEntry interface {
	reset()
	event(*Event) error
}

// decodeLog runs fn for every valid entry of body, decoding each into one
// reused entry of type T (the shared loop of the Kong and APISIX decoders).
func decodeLog[T any, P interface {
	*T
	logEntry
}](body []byte, ndjson bool, fn func(*Event)) (entries int, entryErrs []EntryError, err error) {
	var entry T
	p := P(&entry)
	var e Event
	return forEachEntry(body, ndjson, func(_ int, raw json.RawMessage) error {
		p.reset()
		if err := json.Unmarshal(raw, p); err != nil {
			return jsonError(err)
		}
		if err := p.event(&e); err != nil {
			return err
		}
		fn(&e)
		return nil
	})
}

// startEntry begins an access-log entry's event: kind, the required
// response.status, and the request method.
func startEntry(e *Event, kind Kind, status *Number, method string) error {
	e.Reset()
	e.Kind = kind
	code, err := responseStatus(status)
	if err != nil {
		return err
	}
	e.StatusCode = code
	if method != "" {
		e.Method = NormalizeMethod(method)
	}
	return nil
}

// responseStatus checks a log entry's response.status.
func responseStatus(st *Number) (int64, error) {
	if st == nil {
		return 0, errors.New("response.status is missing")
	}
	f := float64(*st)
	code := validStatus(int64(f))
	if code == 0 || f != float64(code) {
		return 0, errors.New("response.status: want an HTTP status 100–599, got " + strconv.FormatFloat(f, 'g', -1, 64))
	}
	return code, nil
}
