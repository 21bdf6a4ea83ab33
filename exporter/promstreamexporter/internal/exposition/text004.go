package exposition

import "github.com/prometheus/common/expfmt"

// FormatText004 is the Prometheus text format 0.0.4, the default: legacy
// names only, so UTF-8 names are always escaped.
var FormatText004 = Register(Spec{
	Name:       "text_0.0.4",
	MediaType:  expfmt.FmtText,
	Preference: 50,
	Default:    true,
	Body:       Body{Header: AppendHeader},
})
