package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// encoding/json (v1), which mcp-go and the tool layer decode with, keeps
// the last of two equal keys, and matches a struct field by a key in any
// letter case ("name", "NAME" and "nam\u0065" all set Name). A body such
// as {"name":"list_something","name":"send_something"} could then look
// like one call to a reader of the first key and be another to the server.
// duplicateKey refuses such bodies before anything decodes them.

// maxDepth is encoding/json's own nesting limit: a deeper body is refused
// by the decoder anyway, so the scan stops there.
const maxDepth = 10000

// manyKeys is the object size from which keys are looked up in a map
// rather than compared one by one.
const manyKeys = 16

// duplicateKey reports the first object key in data that repeats a key of
// the same object, comparing keys as encoding/json matches struct fields:
// unescaped and case-folded. It reads data once, as a stream of tokens,
// without building values. Text that is not JSON may be reported as having
// none: the decoder after this refuses it.
func duplicateKey(data []byte) (string, bool) {
	type frame struct {
		object bool
		first  int                 // index in ends of this object's first key
		set    map[string]struct{} // this object's keys, once it has many
	}
	stack := make([]frame, 0, 16)
	// folded keys of the open objects, end to end; ends[i] is where key i
	// ends in arena, and it starts where key i-1 ends
	arena := make([]byte, 0, 512)
	ends := make([]int, 0, 64)
	wantKey := false
	for i := 0; i < len(data); {
		switch c := data[i]; c {
		case ' ', '\t', '\n', '\r', ':':
			i++
		case ',':
			wantKey = len(stack) > 0 && stack[len(stack)-1].object
			i++
		case '{', '[':
			if len(stack) == maxDepth {
				return "", false
			}
			stack = append(stack, frame{object: c == '{', first: len(ends)})
			wantKey = c == '{'
			i++
		case '}', ']':
			if len(stack) == 0 {
				return "", false
			}
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if f.object {
				if f.first > 0 {
					arena = arena[:ends[f.first-1]]
				} else {
					arena = arena[:0]
				}
				ends = ends[:f.first]
			}
			wantKey = false
			i++
		case '"':
			end, escaped, ok := stringEnd(data, i, wantKey)
			if !ok {
				return "", false
			}
			if wantKey {
				wantKey = false
				f := &stack[len(stack)-1]
				start := len(arena)
				var key string
				if escaped {
					k, ok := unquote(data[i:end])
					if !ok {
						return "", false
					}
					key = k
					arena = appendFolded(arena, key)
				} else {
					arena = appendFoldedASCII(arena, data[i+1:end-1])
				}
				folded := arena[start:]
				dup := false
				switch n := len(ends) - f.first; {
				case f.set != nil:
					_, dup = f.set[string(folded)]
					f.set[string(folded)] = struct{}{}
				case n < manyKeys:
					from := 0
					if f.first > 0 {
						from = ends[f.first-1]
					}
					for _, e := range ends[f.first:] {
						if bytes.Equal(arena[from:e], folded) {
							dup = true
							break
						}
						from = e
					}
				default:
					f.set = make(map[string]struct{}, 2*manyKeys)
					from := 0
					if f.first > 0 {
						from = ends[f.first-1]
					}
					for _, e := range ends[f.first:] {
						f.set[string(arena[from:e])] = struct{}{}
						from = e
					}
					_, dup = f.set[string(folded)]
					f.set[string(folded)] = struct{}{}
				}
				if dup {
					if !escaped {
						key = string(data[i+1 : end-1])
					}
					return key, true
				}
				ends = append(ends, len(arena))
			}
			i = end
		default:
			// a number, true, false or null: up to the next delimiter
			for i < len(data) && !isDelimiter(data[i]) {
				i++
			}
		}
	}
	return "", false
}

// stringEnd returns the index just past the string starting at data[i]
// (a '"'), and, if asked (for keys), whether it holds an escape or a byte
// that is not printable ASCII (then only a real decoder knows its value).
func stringEnd(data []byte, i int, check bool) (end int, escaped, ok bool) {
	j := i + 1
	for {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return 0, false, false
		}
		q := j + k
		// the quote ends the string unless an odd number of backslashes
		// precedes it
		n := 0
		for p := q - 1; p > i && data[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			if !check {
				return q + 1, false, true
			}
			for _, b := range data[i+1 : q] {
				if b == '\\' || b < 0x20 || b >= utf8.RuneSelf {
					escaped = true
					break
				}
			}
			return q + 1, escaped, true
		}
		j = q + 1
	}
}

// unquote decodes a JSON string as encoding/json does (invalid UTF-8
// becomes U+FFFD).
func unquote(quoted []byte) (string, bool) {
	var s string
	if err := json.Unmarshal(quoted, &s); err != nil {
		return "", false
	}
	return s, true
}

func isDelimiter(b byte) bool {
	switch b {
	case ' ', '\t', '\n', '\r', ',', ':', '[', ']', '{', '}', '"':
		return true
	}
	return false
}

// appendFoldedASCII appends s upper-cased (s is printable ASCII).
func appendFoldedASCII(out, s []byte) []byte {
	for _, b := range s {
		if 'a' <= b && b <= 'z' {
			b -= 'a' - 'A'
		}
		out = append(out, b)
	}
	return out
}

// appendFolded appends s folded as encoding/json folds names to match
// struct fields: ASCII upper-cased, other runes to the smallest rune of
// their Unicode fold set (so "ſ" and "s" match, as do "K" and the Kelvin
// sign).
func appendFolded(out []byte, s string) []byte {
	for _, r := range s {
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
			out = append(out, byte(r))
			continue
		}
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				r = r2
				break
			}
			r = r2
		}
		out = utf8.AppendRune(out, r)
	}
	return out
}

// quoteKey quotes a client's key for an error message, shortened.
func quoteKey(k string) string {
	if len(k) > 64 {
		k = k[:64] + "…"
	}
	return strconv.Quote(k)
}

// jsonRPCParseError answers as a JSON-RPC server answers a request it
// cannot parse (code -32700, id null), with mcp-go's status for it.
func jsonRPCParseError(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0",
		"id":      nil,
		"error":   map[string]any{"code": -32700, "message": msg},
	})
}
