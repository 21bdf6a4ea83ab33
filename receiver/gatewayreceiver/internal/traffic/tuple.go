package traffic

import (
	"encoding/binary"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// tuple is every label of one event under a profile (its key function's
// answer): the key of the event's handle. Each family keeps some of its
// fields (its view). The strings may borrow the event's input until the
// tuple is encoded: what is held is the encoding, a copy.
type tuple struct {
	namespace, gateway  string // resource (otel profile only)
	route, method       string
	status              int64
	service, upstream   string
	target              string
	targetPort          int64
	consumer, workspace string
	host, uri           string // APISIX matched_host, matched_uri
	source              gateway.Source
	provider, model     string                            // GenAI
	clientModel         string                            // APISIX request_llm_model
	node                string                            // the reporting gateway node (node_label)
	dims                [gateway.MaxSpanDimensions]string // span dimensions (otel)
	stream              bool                              // APISIX request_type ai_stream
	overflow            bool                              // the otel.metric.overflow tuple
}

// tupleStrings is the number of string fields of a tuple (strings).
const tupleStrings = 15 + gateway.MaxSpanDimensions

// strings lists the tuple's string fields, the ones encodeTuple writes and
// capStrings cuts: one list, so a new field cannot be missed by either.
func (k *tuple) strings() [tupleStrings]*string {
	return [...]*string{&k.namespace, &k.gateway, &k.route, &k.method, &k.service, &k.upstream,
		&k.target, &k.consumer, &k.workspace, &k.host, &k.uri, &k.provider, &k.model, &k.clientModel, &k.node,
		&k.dims[0], &k.dims[1], &k.dims[2], &k.dims[3]}
}

// encodeTuple appends k's encoding: its strings, each length-prefixed
// (uvarint), then status and target port (varints), then one byte of flags
// (bit 0 overflow, bit 1 stream, the source above them). Two tuples encode
// alike only when they are equal, so the encoding is a tuple's identity: a
// handle's key, a row's key within its view, a point's labels.
func encodeTuple(dst []byte, k *tuple) []byte {
	for _, f := range k.strings() {
		dst = binary.AppendUvarint(dst, uint64(len(*f)))
		dst = append(dst, *f...)
	}
	dst = binary.AppendVarint(dst, k.status)
	dst = binary.AppendVarint(dst, k.targetPort)
	flags := byte(k.source) << 2
	if k.overflow {
		flags |= 1
	}
	if k.stream {
		flags |= 2
	}
	return append(dst, flags)
}

// decodeTuple reads what encodeTuple wrote into k, its strings substrings
// of enc; false when enc is not such a tuple.
func decodeTuple(enc string, k *tuple) bool {
	for _, p := range k.strings() {
		n, w := uvarintString(enc)
		if w <= 0 || n > uint64(len(enc)-w) {
			return false
		}
		*p, enc = enc[w:w+int(n)], enc[w+int(n):]
	}
	var w1, w2 int
	k.status, w1 = varintString(enc)
	if w1 > 0 {
		k.targetPort, w2 = varintString(enc[w1:])
	}
	if w1 <= 0 || w2 <= 0 || len(enc) != w1+w2+1 {
		return false
	}
	flags := enc[w1+w2]
	k.overflow, k.stream = flags&1 != 0, flags&2 != 0
	k.source = gateway.Source(flags >> 2)
	return true
}

// tuple is the point's label set; its strings are substrings of enc.
func (p *point) tuple() tuple {
	var k tuple
	decodeTuple(p.enc, &k) // encodeTuple wrote it (or a checkpoint decoder checked it)
	return k
}

// uvarintString is binary.Uvarint of a string (no copy to a []byte).
func uvarintString(s string) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		c := s[i]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				return 0, -(i + 1) // overflow
			}
			return x | uint64(c)<<shift, i + 1
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	return 0, 0
}

// varintString is binary.Varint of a string.
func varintString(s string) (int64, int) {
	ux, n := uvarintString(s)
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x, n
}

// capStrings cuts each string of k longer than max bytes to at most max, at
// a whole UTF-8 character, and returns how many it cut. The cut strings
// are substrings of the event's: the tuple's encoding copies them.
func capStrings(k *tuple, max int) int {
	n := 0
	for _, f := range k.strings() {
		if len(*f) > max {
			*f = gateway.CutLabel(*f, max)
			n++
		}
	}
	return n
}
