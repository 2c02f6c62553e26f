package mailmsg

import "fmt"

// DecodeRaw undoes a part's transfer encoding and converts its charset
// to UTF-8, and does nothing else: no line-end, white-space or character
// clean-up, for formats whose bytes matter (iCalendar). Like DecodeText it
// never fails; problems come back as warnings.
func DecodeRaw(raw []byte, encoding, charset string) (string, []string) {
	var w warnList
	data, problem := transferDecode(raw, encoding)
	switch problem {
	case transferBadBase64:
		w.add("The part has invalid base64 data; it was decoded as far as possible.")
	case transferUnknown:
		w.add(fmt.Sprintf("The transfer encoding %s is unknown; the part was read as it is.", quoteValue(encoding)))
	}
	s, guess, ok := decodeCharset(data, charset)
	if !ok {
		w.add(fmt.Sprintf("The charset %s is unknown; the part was decoded as %s.", quoteValue(charset), guess))
	}
	return s, w.result()
}
