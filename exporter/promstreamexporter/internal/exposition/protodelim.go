package exposition

import "github.com/prometheus/common/expfmt"

// FormatProtoDelim is the Prometheus protobuf format, length-delimited
// MetricFamily messages; the one format that carries native histograms.
var FormatProtoDelim = Register(Spec{
	Name:       "protobuf",
	MediaType:  expfmt.FmtProtoDelim,
	Preference: 10,
	UTF8:       true,
	Body:       Body{Proto: true},
})
