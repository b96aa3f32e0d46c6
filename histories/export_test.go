package histories

// The internals the external tests (package histories_test) look at.
var (
	UnmarshalEDN        = unmarshalEDN
	EDNText             = ednText
	LooksLikeJepsenJSON = looksLikeJepsenJSON
	ParseJepsenJSON     = parseJepsenJSON
)
