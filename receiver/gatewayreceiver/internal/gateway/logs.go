package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"sync"
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

// MaxEntryErrors is how many entry errors a decoder lists: the first ones.
// The others are only counted (entries less the entries handed on): 20 MiB
// of empty entries were 7 million errors, which took 880 MB to list.
const MaxEntryErrors = 10

// listEntryError appends e to errs while it lists fewer than
// MaxEntryErrors.
func listEntryError(errs []EntryError, e EntryError) []EntryError {
	if len(errs) < MaxEntryErrors {
		return append(errs, e)
	}
	return errs
}

// ErrBody is returned when a body is not JSON at the batch level (not an
// object, an array of values or newline-delimited objects): nothing in it
// can be trusted, so it is rejected whole.
var ErrBody = errors.New("body is not a JSON object, array or newline-delimited objects")

// MaxLogDepth bounds the nesting of a log body (objects and arrays): Kong's
// and APISIX's entries nest a few levels; 100, the depth pdata allows OTLP
// values, leaves room for custom fields and stops a body built to make the
// decoder recurse.
const MaxLogDepth = 100

// forEachEntry splits a log body into its entries: one JSON object, a JSON
// array of entries, or (if ndjson) one object per line. fn is called with
// each entry's raw bytes and index; its error is recorded for that entry
// only. It returns how many entries there were: every entry is either
// handed to fn without error or listed in entryErrs.
func forEachEntry(body []byte, ndjson bool, fn func(i int, raw json.RawMessage) error) (n int, entryErrs []EntryError, err error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return 0, nil, errors.New("empty body")
	}
	// Nesting is checked per value: the whole body when it is one value
	// (or an array), each line of NDJSON, so that the unclosed brackets of
	// broken lines never add up into a refusal of the lines around them.
	deep := CheckJSONDepth(trimmed, MaxLogDepth)
	if deep != nil && (trimmed[0] == '[' || !ndjson) {
		return 0, nil, errors.Join(ErrBody, deep)
	}
	entry := func(i int, raw []byte) {
		if err := fn(i, raw); err != nil {
			entryErrs = listEntryError(entryErrs, EntryError{Index: i, Err: err})
		}
	}
	switch {
	case trimmed[0] == '[':
		var raws []json.RawMessage
		if err := json.Unmarshal(trimmed, &raws); err != nil {
			return 0, nil, errors.Join(ErrBody, err)
		}
		if len(raws) == 0 {
			return 0, nil, errors.Join(ErrBody, errors.New("an empty array holds no entry"))
		}
		for i, raw := range raws {
			entry(i, raw)
		}
		return len(raws), entryErrs, nil
	case json.Valid(trimmed):
		// One value (an object, possibly spread over several lines).
		if deep != nil {
			return 0, nil, errors.Join(ErrBody, deep)
		}
		entry(0, trimmed)
		return 1, entryErrs, nil
	case !ndjson:
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return 0, nil, errors.Join(ErrBody, err)
		}
		return 0, nil, errors.Join(ErrBody, errors.New("more than one JSON value; send an array"))
	}
	// NDJSON: one entry per non-empty line. A broken line is that entry's
	// error; the lines after it still count, since APISIX does not resend
	// a batch answered 200. Only a body of which no line parses is refused
	// whole.
	var firstErr error
	broken := 0
	for len(trimmed) > 0 {
		var line []byte
		if line, trimmed = cutLine(trimmed); len(line) == 0 {
			continue
		}
		if deep := CheckJSONDepth(line, MaxLogDepth); deep == nil && json.Valid(line) {
			entry(n, line)
		} else {
			err := deep
			if err == nil {
				err = lineError(line)
			}
			if firstErr == nil {
				firstErr = err
			}
			broken++
			entryErrs = listEntryError(entryErrs, EntryError{Index: n, Err: err})
		}
		n++
	}
	if broken == n {
		return 0, nil, errors.Join(ErrBody, firstErr)
	}
	return n, entryErrs, nil
}

// logState is the working memory of one Kong or APISIX decode, pooled so
// that a body allocates nothing: the Event handed to fn escapes (fn is not
// known), and the scanner keeps its arena chunk.
type logState struct {
	d      scanner
	e      Event
	kong   kongLog
	apisix apisixLog
}

// maxPooledArena bounds the arena chunk a pooled logState keeps.
const maxPooledArena = 64 << 10

// logStates hands out decode states: a sync.Pool, which a test that counts
// allocations swaps for one that never drops its state (the race detector
// makes a sync.Pool drop items at random).
var logStates interface {
	Get() any
	Put(any)
} = &sync.Pool{New: func() any { return new(logState) }}

func getLogState() *logState { return logStates.Get().(*logState) }

// putLogState pools st again. The Event's strings borrow the body or the
// arena, which a later decode only appends to, so nothing an earlier fn was
// handed is overwritten; the fields are cleared so the pool pins no body.
func putLogState(st *logState) {
	arena, aiMore := st.d.arena, st.d.aiMore[:0]
	if cap(arena) > maxPooledArena {
		arena = nil // one huge escaped string; its chunk goes with it
	}
	*st = logState{}
	st.d.arena, st.d.aiMore = arena, aiMore
	logStates.Put(st)
}

// scanEntries is forEachEntry for the scanner, with the same splitting,
// limits and answers: decode reads the entry at d.pos (one whole body
// element or line) and emit maps it once it is known to be valid JSON
// without type errors. A body that is refused whole gets encoding/json's
// message, from forEachEntry (only refused bodies pay for it).
func scanEntries(d *scanner, body []byte, ndjson bool, decode func(), emit func() error) (n int, entryErrs []EntryError, err error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return 0, nil, errors.New("empty body")
	}
	d.deepest = 0
	if trimmed[0] == '[' {
		return scanArray(d, trimmed, ndjson, decode, emit)
	}
	// One value (an object, possibly spread over several lines). Its depth
	// is checked while it is decoded, before it is emitted.
	if err, ok := scanOne(d, trimmed, decode, emit, true); ok {
		if err == errTooDeep {
			return 0, nil, errors.Join(ErrBody, CheckJSONDepth(trimmed, MaxLogDepth))
		}
		if err != nil {
			entryErrs = listEntryError(entryErrs, EntryError{Index: 0, Err: err})
		}
		return 1, entryErrs, nil
	}
	if !ndjson {
		if err := CheckJSONDepth(trimmed, MaxLogDepth); err != nil {
			return 0, nil, errors.Join(ErrBody, err)
		}
		return 0, nil, bodyError(trimmed, ndjson)
	}
	// NDJSON: one entry per non-empty line. A broken line is that entry's
	// error; the lines after it still count, since APISIX does not resend
	// a batch answered 200. Only a body of which no line parses is refused
	// whole.
	var firstErr error
	broken := 0
	for len(trimmed) > 0 {
		var line []byte
		if line, trimmed = cutLine(trimmed); len(line) == 0 {
			continue
		}
		// Each line's nesting is its own (forEachEntry): a line too deep
		// is that entry's error.
		err, ok := scanOne(d, line, decode, emit, true)
		if err == errTooDeep || !ok {
			if err = CheckJSONDepth(line, MaxLogDepth); err == nil {
				err = lineError(line)
			}
			if firstErr == nil {
				firstErr = err
			}
			broken++
		}
		if err != nil {
			entryErrs = listEntryError(entryErrs, EntryError{Index: n, Err: err})
		}
		n++
	}
	if broken == n {
		return 0, nil, errors.Join(ErrBody, firstErr)
	}
	return n, entryErrs, nil
}

// errTooDeep is scanOne's answer for a valid value nested deeper than
// MaxLogDepth (only when asked to check).
var errTooDeep = errors.New("too deep")

// scanOne decodes b as one entry; ok is false when b is not one JSON value
// (nothing was emitted), else err is the entry's error. With checkDepth,
// a value that may nest deeper than MaxLogDepth is measured exactly before
// it is emitted (errTooDeep).
func scanOne(d *scanner, b []byte, decode func(), emit func() error, checkDepth bool) (err error, ok bool) {
	d.b, d.pos = b, 0
	d.resetEntry()
	decode()
	if !d.atEnd() {
		return nil, false
	}
	if checkDepth && d.mayBeTooDeep() && CheckJSONDepth(b, MaxLogDepth) != nil {
		return errTooDeep, true
	}
	if err := d.entryError(); err != nil {
		return err, true
	}
	return emit(), true
}

// mayBeTooDeep reports whether the values skipped so far, below the few
// levels the decoders themselves descend (at most entry, tries, a try),
// could reach MaxLogDepth. CheckJSONDepth, which counts brackets in the
// same way for valid JSON, then decides.
func (d *scanner) mayBeTooDeep() bool { return d.deepest+8 > MaxLogDepth }

// scanArray checks the whole array first, since a syntax error anywhere
// (or nesting beyond MaxLogDepth) refuses the body before any entry is
// emitted, then decodes its elements.
func scanArray(d *scanner, b []byte, ndjson bool, decode func(), emit func() error) (n int, entryErrs []EntryError, err error) {
	d.b, d.pos = b, 0
	d.resetEntry()
	d.skipValue()
	if valid := d.atEnd(); !valid || d.deepest > MaxLogDepth {
		// The same order as forEachEntry: depth first, then syntax.
		if err := CheckJSONDepth(b, MaxLogDepth); err != nil {
			return 0, nil, errors.Join(ErrBody, err)
		}
		if !valid {
			return 0, nil, bodyError(b, ndjson)
		}
	}
	d.pos, d.trusted = 1, true
	defer func() { d.trusted = false }()
	if d.ws(); d.peek() == ']' {
		return 0, nil, errors.Join(ErrBody, errors.New("an empty array holds no entry"))
	}
	for first := true; d.element(&first); n++ {
		d.resetEntry()
		decode()
		err := d.entryError()
		if err == nil {
			at := d.pos // emit may read the entry's ai objects again
			err = emit()
			d.pos = at
		}
		if err != nil {
			entryErrs = listEntryError(entryErrs, EntryError{Index: n, Err: err})
		}
	}
	return n, entryErrs, nil
}

// bodyError is encoding/json's reason to refuse a body the scanner found
// not to be JSON.
// cutLine splits an NDJSON body at its first newline: the line, trimmed
// (empty for a blank one), and what follows it.
func cutLine(b []byte) (line, rest []byte) {
	line, rest, _ = bytes.Cut(b, []byte{'\n'})
	return bytes.TrimSpace(line), rest
}

func bodyError(body []byte, ndjson bool) error {
	_, _, err := forEachEntry(body, ndjson, func(int, json.RawMessage) error { return nil })
	if err == nil {
		// The scanner and encoding/json disagree (FuzzDecodeLogs looks for
		// this); refuse anyway.
		err = ErrBody
	}
	return err
}

// lineError says why an NDJSON line is not one JSON value.
func lineError(line []byte) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return err
	}
	return errors.New("more than one JSON value on one line")
}

// CheckJSONDepth reports an error when b nests objects and arrays deeper than
// max. It scans the bytes once, without allocating, before any decoder
// allocates per level; it does not check that b is valid JSON.
func CheckJSONDepth(b []byte, max int) error {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = stringEnd(b, i+1)
		case '{', '[':
			if depth++; depth > max {
				return errors.New("JSON nested deeper than " + strconv.Itoa(max) + " levels at byte " + strconv.Itoa(i))
			}
		case '}', ']':
			depth--
		}
	}
	return nil
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

// Plausibility bounds of logged values. A value beyond them refuses its
// entry (counted as rejected, with the field named) instead of entering a
// sum or histogram: one latency of 1e300 ms would otherwise set a series'
// _sum to 1e297 s, after which normal entries add nothing it can show.
const (
	maxLatencyMS = 24 * 60 * 60 * 1000 // a day
	maxBytes     = 1 << 40             // 1 TiB in one request or response
	maxTokens    = 1 << 32             // tokens of one LLM request
	maxCost      = 1e6                 // cost of one LLM request, in the gateway's unit
)

// plausible reads an entry's numbers, keeping the first implausible one as
// the entry's error. Absent, null and -1 (Kong's "no upstream") read as
// Unknown.
type plausible struct{ err error }

func (p *plausible) fail(field string, f float64, want string) {
	if p.err == nil {
		p.err = errors.New(field + ": " + strconv.FormatFloat(f, 'g', -1, 64) + " is not " + want)
	}
}

// ms reads a latency in milliseconds: 0 to a day.
func (p *plausible) ms(field string, n Number) float64 {
	f := float64(n)
	switch {
	case f == Unknown:
		return Unknown
	case !(f >= 0 && f <= maxLatencyMS): // NaN fails both
		p.fail(field, f, "a latency in ms from 0 to 86400000")
		return Unknown
	}
	return f
}

// count reads a whole number from 0 to max (bytes, tokens).
func (p *plausible) count(field string, n Number, max float64) int64 {
	f := float64(n)
	switch {
	case f == Unknown:
		return Unknown
	case !(f >= 0 && f <= max) || f != math.Trunc(f):
		p.fail(field, f, "a whole number from 0 to "+strconv.FormatFloat(max, 'f', -1, 64))
		return Unknown
	}
	return int64(f)
}

// amount reads a non-negative amount up to max (a cost).
func (p *plausible) amount(field string, n Number, max float64) float64 {
	f := float64(n)
	switch {
	case f == Unknown:
		return Unknown
	case !(f >= 0 && f <= max):
		p.fail(field, f, "an amount from 0 to "+strconv.FormatFloat(max, 'f', -1, 64))
		return Unknown
	}
	return f
}

// size reads a port or similar small whole number; Unknown when it is not
// one (no error: callers range-check it themselves).
func (n Number) size() int64 {
	f := float64(n)
	if !(f >= 0) || f != math.Trunc(f) || f > 1<<53 {
		return Unknown
	}
	return int64(f)
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

// jsonError shortens encoding/json's type errors to the field and what was
// wrong, which is what a gateway operator needs to fix a log format.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return errors.New("want a JSON object, got JSON " + te.Value)
		}
		return errors.New(te.Field + ": wrong type, got JSON " + te.Value)
	}
	return err
}
