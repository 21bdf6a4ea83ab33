package gateway

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner walks a JSON log body once, reading the few fields an access-log
// entry maps to and skipping (while validating) everything else, without
// allocating per entry (issue 15). It reproduces what encoding/json does
// when it unmarshals an entry into the reference structs of
// logs_reference_test.go, which FuzzDecodeLogs checks:
//
//   - keys match field names case-insensitively, with encoding/json's
//     folding (ſ matches s, K matches k), after unescaping;
//   - a repeated key decodes again into the same field (objects merge,
//     the last scalar wins); null leaves strings and structs as they are,
//     resets pointers, slices and maps, and reads as Unknown for a Number;
//   - the first wrong-typed field is the entry's error unless a Number's
//     own error comes later, which stops decoding and wins (encoding/json
//     saves type errors but returns an Unmarshaler's error at once);
//   - a syntax error anywhere outranks both (checkValid runs first).
//
// The one deliberate difference: a repeated array key (tries,
// route.paths) replaces the earlier array, where encoding/json decodes
// into the earlier elements (and, within the slice's capacity, exposes
// stale ones), which depends on the runtime's growth policy.
//
// Lifetime: a string the scanner returns borrows the body, or an arena
// chunk that is only ever appended to (for strings with escapes); both stay
// valid as long as the body is. See unquote.
type scanner struct {
	b   []byte
	pos int
	// deepest is the deepest nesting skipValue met in the body (within the
	// value it skipped).
	deepest int
	// trusted is set while the input is known to be valid JSON.
	trusted bool
	// bad is set at the first syntax error; the caller learns the message
	// from encoding/json, which only refused input reaches.
	bad bool
	// typePath and typeKind are the first wrong-typed field (encoding/json's
	// UnmarshalTypeError Field and Value); typeSet says there is one.
	typePath, typeKind string
	typeSet            bool
	// abort is a Number's error: encoding/json stops decoding there.
	abort error
	// arena holds unescaped strings; see unquote.
	arena []byte
	// ai lists the offsets of an entry's `ai` objects since the last null
	// (a repeated key merges, as encoding/json does into a map).
	aiInline [2]int
	aiN      int
	aiMore   []int
}

// resetEntry clears the per-entry state.
func (d *scanner) resetEntry() {
	d.resetErrors()
	d.aiN, d.aiMore = 0, d.aiMore[:0]
}

// resetErrors clears the error state (before an entry, or an `ai` value).
func (d *scanner) resetErrors() {
	d.bad, d.typeSet, d.abort = false, false, nil
	d.typePath, d.typeKind = "", ""
}

// entryError is the error encoding/json would have returned for the entry,
// after jsonError (nil when there was none). Syntax is checked apart.
func (d *scanner) entryError() error {
	switch {
	case d.abort != nil:
		return d.abort
	case !d.typeSet:
		return nil
	case d.typePath == "":
		return errors.New("want a JSON object, got JSON " + d.typeKind)
	}
	return errors.New(d.typePath + ": wrong type, got JSON " + d.typeKind)
}

// typeError records a wrong-typed value at path (the first one, unless a
// Number already stopped decoding) and skips it.
func (d *scanner) typeError(path string) {
	if !d.typeSet && d.abort == nil {
		d.typeSet, d.typePath, d.typeKind = true, path, kindOf(d.peek())
	}
	d.skipValue()
}

func (d *scanner) abortWith(err error) {
	if d.abort == nil {
		d.abort = err
	}
}

// kindOf names a JSON value by its first byte as UnmarshalTypeError.Value
// does.
func kindOf(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

func (d *scanner) ws() {
	for d.pos < len(d.b) {
		switch d.b[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// peek returns the byte at pos, 0 at the end.
func (d *scanner) peek() byte {
	if d.pos < len(d.b) {
		return d.b[d.pos]
	}
	return 0
}

func (d *scanner) fail() {
	d.bad = true
	d.pos = len(d.b)
}

// atEnd reports whether only whitespace follows and no syntax error
// occurred.
func (d *scanner) atEnd() bool {
	d.ws()
	return !d.bad && d.pos == len(d.b)
}

// --- values -------------------------------------------------------------

// object starts a struct-typed field: true, past '{', for an object; null
// is consumed (a struct keeps its fields); any other value is a type error
// at path.
func (d *scanner) object(path string) bool {
	switch d.peek() {
	case '{':
		d.pos++
		return true
	case 'n':
		d.literal("null")
	default:
		d.typeError(path)
	}
	return false
}

// member advances to the next member of an object; first is the caller's
// loop state. It leaves the key in key and pos at the value.
func (d *scanner) member(first *bool, key *jsonString) bool {
	if !d.next(first, '}') {
		return false
	}
	if d.peek() != '"' {
		d.fail()
		return false
	}
	*key = d.str()
	d.ws()
	if d.peek() != ':' {
		d.fail()
		return false
	}
	d.pos++
	d.ws()
	return !d.bad
}

// next consumes what comes before a container's next member or element:
// nothing before the first, a comma before the others. false at the
// container's end (consumed) or on a syntax error.
func (d *scanner) next(first *bool, end byte) bool {
	d.ws()
	switch c := d.peek(); {
	case c == end:
		d.pos++
		return false
	case !*first && c == ',':
		d.pos++
		d.ws()
	case !*first:
		d.fail()
		return false
	}
	*first = false
	return true
}

// element advances to the next element of an array, as member does.
func (d *scanner) element(first *bool) bool {
	if !d.next(first, ']') {
		return false
	}
	if d.pos >= len(d.b) {
		d.fail()
	}
	return !d.bad
}

// literal consumes true, false or null.
func (d *scanner) literal(word string) {
	if len(d.b)-d.pos < len(word) || string(d.b[d.pos:d.pos+len(word)]) != word {
		d.fail()
		return
	}
	d.pos += len(word)
}

// jsonString is a string token: raw is what is between the quotes; esc says
// it holds a backslash, high a byte ≥ 0x80.
type jsonString struct {
	raw       []byte
	esc, high bool
}

// str consumes a string token, checking its escapes and control bytes.
func (d *scanner) str() jsonString {
	b, i := d.b, d.pos+1 // past the opening quote
	start := i
	var s jsonString
	for {
		// Eight bytes at a time while none needs a look (most strings:
		// routes, names, ids, timestamps), then byte by byte.
		for i+8 <= len(b) && !special8(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && plainByte[b[i]] {
			i++
		}
		if i >= len(b) {
			d.fail()
			return jsonString{}
		}
		switch c := b[i]; {
		case c == '"':
			s.raw = b[start:i]
			d.pos = i + 1
			return s
		case c == '\\':
			s.esc = true
			d.pos = i
			if !d.escape() {
				d.fail()
				return jsonString{}
			}
			i = d.pos
		case c < 0x20:
			d.fail()
			return jsonString{}
		default: // ≥ 0x80
			s.high = true
			i++
		}
	}
}

// special8 reports whether any of the 8 bytes of w is not a plainByte: a
// quote, a backslash, a control byte (< 0x20) or a byte ≥ 0x80. The
// classic bit tricks (hasless, haszero on w XOR the repeated byte) can
// flag a byte after a true hit by borrow, never one before it, so "any" is
// exact; the byte loop then finds which.
func special8(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	less := (w - ones*0x20) &^ w // high bit of a byte < 0x20
	quote := w ^ (ones * '"')
	quote = (quote - ones) &^ quote
	bslash := w ^ (ones * '\\')
	bslash = (bslash - ones) &^ bslash
	return (less|quote|bslash|w)&highs != 0
}

// plainByte marks the bytes a string holds as they are: not the quote, the
// backslash, a control byte or a byte of a multi-byte rune.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// skipTrusted skips the value at pos of input already found valid
// (scanArray's second pass): strings are jumped over, brackets counted.
func (d *scanner) skipTrusted() {
	b, i := d.b, d.pos
	switch b[i] {
	case '"':
		d.pos = stringEnd(b, i+1) + 1
		return
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i+1)
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					d.pos = i + 1
					return
				}
			}
		}
		d.pos = i
		return
	}
	// A number or literal runs to the next delimiter.
	for i < len(b) && !delimiter[b[i]] {
		i++
	}
	d.pos = i
}

// delimiter marks the bytes that end a number or literal.
var delimiter = [256]bool{',': true, ':': true, '}': true, ']': true, ' ': true, '\t': true, '\n': true, '\r': true}

// stringEnd returns the index of the quote closing the string whose
// contents start at b[i] (len(b) if none): the first quote not preceded
// by an odd run of backslashes.
func stringEnd(b []byte, i int) int {
	for {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return len(b)
		}
		q += i
		n := 0
		for q-1-n >= i && b[q-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return q
		}
		i = q + 1
	}
}

// escape consumes one escape sequence at pos.
func (d *scanner) escape() bool {
	if d.pos+1 >= len(d.b) {
		return false
	}
	switch d.b[d.pos+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		d.pos += 2
		return true
	case 'u':
		if d.pos+6 > len(d.b) || hex4(d.b[d.pos+2:d.pos+6]) < 0 {
			return false
		}
		d.pos += 6
		return true
	}
	return false
}

// hex4 reads four hex digits; -1 if they are not.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// number consumes a number token (RFC 8259 grammar) and returns it.
func (d *scanner) number() []byte {
	start := d.pos
	b := d.b
	i := d.pos
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		d.fail()
		return nil
	}
	if i < len(b) && b[i] == '.' {
		if j := digits(b, i+1); j > i+1 {
			i = j
		} else {
			d.fail()
			return nil
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			d.fail()
			return nil
		}
		i = j
	}
	d.pos = i
	return b[start:i]
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// scalar consumes a string, literal or number.
func (d *scanner) scalar() {
	switch d.peek() {
	case '"':
		d.str()
	case 't':
		d.literal("true")
	case 'f':
		d.literal("false")
	case 'n':
		d.literal("null")
	default:
		d.number()
	}
}

// skipValue consumes any value without materializing it. It keeps its own
// stack rather than recursing: CheckJSONDepth bounds a whole body, but an
// NDJSON line after lines of stray closing brackets can nest deeper.
func (d *scanner) skipValue() {
	if d.trusted {
		d.skipTrusted()
		return
	}
	var st bitstack
	for !d.bad {
		d.ws()
		switch d.peek() {
		case '{', '[':
			d.deepest = max(d.deepest, st.n+1) // an empty one counts too
		}
		switch d.peek() {
		case '{':
			d.pos++
			d.ws()
			if d.peek() == '}' {
				d.pos++
				break
			}
			st.push(true)
			if !d.key() {
				return
			}
			continue
		case '[':
			d.pos++
			d.ws()
			if d.peek() == ']' {
				d.pos++
				break
			}
			st.push(false)
			continue
		default:
			d.scalar()
		}
		// After a value: close containers, or go on to the next member.
		for !d.bad && st.n > 0 {
			d.ws()
			obj := st.top()
			switch c := d.peek(); {
			case c == ',':
				d.pos++
				if obj && !d.key() {
					return
				}
			case obj && c == '}', !obj && c == ']':
				d.pos++
				st.pop()
				continue
			default:
				d.fail()
			}
			break
		}
		if st.n == 0 {
			return
		}
	}
}

// key consumes `"key" :` inside an object being skipped.
func (d *scanner) key() bool {
	d.ws()
	if d.peek() != '"' {
		d.fail()
		return false
	}
	d.str()
	d.ws()
	if d.peek() != ':' {
		d.fail()
		return false
	}
	d.pos++
	return !d.bad
}

// bitstack is skipValue's stack of open containers (true: object), inline
// up to 512 levels.
type bitstack struct {
	inline [8]uint64
	more   []uint64
	n      int
}

func (s *bitstack) word(i int) *uint64 {
	if i < len(s.inline) {
		return &s.inline[i]
	}
	for len(s.more) <= i-len(s.inline) {
		s.more = append(s.more, 0)
	}
	return &s.more[i-len(s.inline)]
}

func (s *bitstack) push(obj bool) {
	w, bit := s.word(s.n/64), uint64(1)<<(s.n%64)
	if obj {
		*w |= bit
	} else {
		*w &^= bit
	}
	s.n++
}

func (s *bitstack) pop() { s.n-- }

func (s *bitstack) top() bool {
	return *s.word((s.n - 1) / 64)&(uint64(1)<<((s.n-1)%64)) != 0
}

// --- fields -------------------------------------------------------------

// text reads a string-typed field: a string sets *dst, null leaves it,
// anything else is a type error at path.
func (d *scanner) text(dst *string, path string) {
	switch d.peek() {
	case '"':
		*dst = d.unquote(d.str())
	case 'n':
		d.literal("null")
	default:
		d.typeError(path)
	}
}

// looseText reads a looseString: a string's text, "" for anything else.
func (d *scanner) looseText(dst *string) {
	if d.peek() == '"' {
		*dst = d.unquote(d.str())
		return
	}
	*dst = ""
	d.skipValue()
}

// looseBool reads a looseBool: true only for the tokens true and "true".
func (d *scanner) looseBool(dst *bool) {
	start := d.pos
	d.skipValue()
	tok := string(d.b[start:d.pos])
	*dst = tok == "true" || tok == `"true"`
}

// num reads a Number as Number.UnmarshalJSON does; its errors stop
// decoding (abort).
func (d *scanner) num(dst *Number) {
	start := d.pos
	switch d.peek() {
	case 'n':
		d.literal("null")
		*dst = Unknown
		return
	case '"':
		d.numString(dst, d.str(), start)
		return
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		d.parseNum(dst, d.number())
		return
	}
	d.skipValue()
	if !d.bad {
		d.abortWith(notNumber(d.b[start:d.pos]))
	}
}

// numPtr reads a *Number: null resets it (set = false).
func (d *scanner) numPtr(dst *Number, set *bool) {
	if d.peek() == 'n' {
		d.literal("null")
		*set = false
		return
	}
	*set = true
	d.num(dst)
}

// numString reads a Number sent as a string: strconv.Unquote's text (Go
// syntax, not JSON's: "\/" is an error), "" as Unknown.
func (d *scanner) numString(dst *Number, s jsonString, start int) {
	if d.bad {
		return
	}
	if s.esc || s.high {
		// Rare: unquote as Number.UnmarshalJSON does, allocating.
		u, err := strconv.Unquote(string(d.b[start:d.pos]))
		if err != nil {
			d.abortWith(err)
			return
		}
		if u == "" {
			*dst = Unknown
			return
		}
		d.parseNum(dst, []byte(u))
		return
	}
	if len(s.raw) == 0 {
		*dst = Unknown
		return
	}
	d.parseNum(dst, s.raw)
}

func (d *scanner) parseNum(dst *Number, b []byte) {
	if d.bad {
		return
	}
	f, err := strconv.ParseFloat(borrow(b), 64)
	if err != nil || math.IsInf(f, 0) {
		d.abortWith(notNumber(b))
		return
	}
	*dst = Number(f)
}

// notNumber is Number.UnmarshalJSON's error.
func notNumber(b []byte) error {
	return errors.New("want a number, got " + strconv.Quote(string(b)))
}

// --- strings ------------------------------------------------------------

// arenaChunk is the size of a fresh arena chunk.
const arenaChunk = 4 << 10

// unquote returns a string token's text as encoding/json does (escapes
// resolved, invalid UTF-8 and lone surrogates as U+FFFD). Without escapes
// or invalid UTF-8 it borrows the body; otherwise it is written to the
// arena: a chunk that is only ever appended to, never overwritten, so a
// string handed out from it stays valid after the scanner moves on, and
// whoever reuses the (pooled) scanner next. A full chunk is dropped for a
// new one; the GC frees it with the last string into it.
func (d *scanner) unquote(s jsonString) string {
	if d.bad || len(s.raw) == 0 {
		return ""
	}
	if !s.esc && (!s.high || utf8.Valid(s.raw)) {
		return borrow(s.raw)
	}
	// The text is at most 3 bytes per raw byte (an invalid byte becomes
	// U+FFFD); escapes only shrink.
	need := 3 * len(s.raw)
	a := d.arena
	if cap(a)-len(a) < need {
		a = make([]byte, 0, max(arenaChunk, need))
	}
	start := len(a)
	for i := 0; i < len(s.raw); {
		var r rune
		r, i = nextRune(s.raw, i)
		a = utf8.AppendRune(a, r)
	}
	d.arena = a
	return borrow(a[start:])
}

// nextRune decodes the rune at s[i] of a validated string token as
// encoding/json's unquote does.
func nextRune(s []byte, i int) (rune, int) {
	c := s[i]
	if c < utf8.RuneSelf && c != '\\' {
		return rune(c), i + 1
	}
	if c >= utf8.RuneSelf {
		r, n := utf8.DecodeRune(s[i:])
		return r, i + n
	}
	switch s[i+1] {
	case 'b':
		return '\b', i + 2
	case 'f':
		return '\f', i + 2
	case 'n':
		return '\n', i + 2
	case 'r':
		return '\r', i + 2
	case 't':
		return '\t', i + 2
	case 'u':
	default: // " \ /
		return rune(s[i+1]), i + 2
	}
	r := hex4(s[i+2:])
	i += 6
	if !utf16.IsSurrogate(r) {
		return r, i
	}
	r1 := rune(-1)
	if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
		r1 = hex4(s[i+2:])
	}
	if dec := utf16.DecodeRune(r, r1); dec != unicode.ReplacementChar {
		return dec, i + 6
	}
	return unicode.ReplacementChar, i
}

// is reports whether key names field name as encoding/json matches them:
// exactly or after folding (name is lower-case ASCII).
func (s *jsonString) is(name string) bool {
	if !s.esc && !s.high {
		if len(s.raw) != len(name) {
			return false
		}
		for i, c := range s.raw {
			if upperASCII(c) != upperASCII(name[i]) {
				return false
			}
		}
		return true
	}
	j := 0
	for i := 0; i < len(s.raw); j++ {
		var r rune
		r, i = nextRune(s.raw, i)
		if j >= len(name) {
			return false
		}
		if r < utf8.RuneSelf {
			r = rune(upperASCII(byte(r)))
		} else {
			r = unicode.ToUpper(unicode.ToLower(r)) // foldName's rule
		}
		if r != rune(upperASCII(name[j])) {
			return false
		}
	}
	return j == len(name)
}

// equals reports whether the key's text is exactly name (a map key).
func (s *jsonString) equals(name string) bool {
	if !s.esc && !s.high {
		return string(s.raw) == name
	}
	j := 0
	for i := 0; i < len(s.raw); j++ {
		var r rune
		r, i = nextRune(s.raw, i)
		if j >= len(name) || r != rune(name[j]) {
			return false
		}
	}
	return j == len(name)
}

func upperASCII(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}
