package exposition

// FormatText100 is the text format 1.0.0: the 0.0.4 grammar plus quoted
// UTF-8 names (only with escaping=allow-utf-8). expfmt has no name for it.
var FormatText100 = Register(Spec{
	Name:       "text_1.0.0",
	MediaType:  "text/plain; version=1.0.0; charset=utf-8",
	Preference: 40,
	UTF8:       true,
	Body:       Body{Header: AppendHeader},
})
