package mailmsg

import (
	"slices"
	"strconv"
	"strings"
)

// parseMediaType parses a Content-Type or Content-Disposition value
// leniently: "type/subtype; a=b; c="quoted"; d*=utf-8'en'%C3%A9; e*0=...".
// Unlike mime.ParseMediaType it does not give up on broken parameters
// (unquoted values with spaces, missing semicolons, stray quotes), and it
// decodes RFC 2231 values in any charset and RFC 2047 words in quoted values.
// The value is lower case; parameter names are lower case.
func parseMediaType(v string) (value string, params map[string]string) {
	v = strings.TrimSpace(v)
	semi := strings.IndexByte(v, ';')
	rest := ""
	if semi >= 0 {
		value, rest = v[:semi], v[semi+1:]
	} else {
		value = v
	}
	value = strings.ToLower(strings.TrimSpace(value))
	if i := strings.IndexAny(value, " \t\""); i >= 0 {
		value = value[:i]
	}
	raw := splitParams(rest)
	if len(raw) == 0 {
		return value, nil
	}
	return value, assembleParams(raw)
}

type rawParam struct{ name, value string }

// splitParams splits `a=b; c="d;e"` into name/value pairs. Quoted values keep
// backslash escapes decoded; an unterminated quote runs to the end.
func splitParams(s string) []rawParam {
	var out []rawParam
	i := 0
	for i < len(s) && len(out) < 64 {
		for i < len(s) && (s[i] == ';' || s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n') {
			i++
		}
		start := i
		for i < len(s) && s[i] != '=' && s[i] != ';' {
			i++
		}
		name := strings.ToLower(strings.TrimSpace(s[start:i]))
		if i >= len(s) || s[i] == ';' {
			continue // a bare word: not a parameter
		}
		i++ // '='
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n') {
			i++
		}
		var val string
		if i < len(s) && s[i] == '"' {
			i++
			var b strings.Builder
			for i < len(s) && s[i] != '"' {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				b.WriteByte(s[i])
				i++
			}
			i++ // closing quote
			val = b.String()
		} else {
			start := i
			for i < len(s) && s[i] != ';' {
				i++
			}
			val = strings.TrimSpace(s[start:i])
		}
		if name != "" && !strings.ContainsAny(name, " \t\"") {
			out = append(out, rawParam{name, val})
		}
	}
	return out
}

// assembleParams joins RFC 2231 sections (name*0, name*1*, ...) and decodes
// extended values (charset'lang'%XX). An extended value wins over a plain
// one; the first of duplicate plain values wins.
func assembleParams(raw []rawParam) map[string]string {
	params := make(map[string]string, len(raw))
	type section struct {
		n   int
		ext bool
		val string
	}
	sections := map[string][]section{}
	extended := map[string]string{}
	for _, p := range raw {
		name, ext := strings.CutSuffix(p.name, "*")
		if base, num, ok := strings.Cut(name, "*"); ok {
			n, err := strconv.Atoi(num)
			if err != nil || n < 0 || n > 999 {
				continue
			}
			sections[base] = append(sections[base], section{n, ext, p.value})
			continue
		}
		if ext {
			if _, seen := extended[name]; !seen {
				extended[name] = decode2231(p.value)
			}
			continue
		}
		if _, seen := params[name]; !seen {
			params[name] = p.value
		}
	}
	for name, secs := range sections {
		slices.SortStableFunc(secs, func(a, b section) int { return a.n - b.n })
		var buf []byte
		charset := ""
		for i, s := range secs {
			if s.n != i {
				break // a missing or repeated section ends the value
			}
			if !s.ext {
				buf = append(buf, s.val...)
				continue
			}
			v := s.val
			if i == 0 {
				if cs, rest, ok := cutCharsetLang(v); ok {
					charset, v = cs, rest
				}
			}
			buf = append(buf, percentDecode(v)...)
		}
		if len(secs) > 0 && secs[0].ext {
			txt, _, _ := decodeCharset(buf, charsetOrUTF8(charset))
			extended[name] = txt
		} else {
			extended[name] = string(buf)
		}
	}
	for name, v := range extended {
		params[name] = v
	}
	return params
}

// decode2231 decodes an RFC 2231 extended value "charset'lang'%XX...".
func decode2231(v string) string {
	charset := ""
	if cs, rest, ok := cutCharsetLang(v); ok {
		charset, v = cs, rest
	}
	txt, _, _ := decodeCharset(percentDecode(v), charsetOrUTF8(charset))
	return txt
}

func charsetOrUTF8(cs string) string {
	if cs == "" {
		return "utf-8"
	}
	return cs
}

func cutCharsetLang(v string) (charset, rest string, ok bool) {
	cs, after, ok1 := strings.Cut(v, "'")
	if !ok1 {
		return "", v, false
	}
	_, rest, ok2 := strings.Cut(after, "'")
	if !ok2 {
		return "", v, false
	}
	return cs, rest, true
}

func percentDecode(s string) []byte {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			h, ok1 := unhex(s[i+1])
			l, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				b = append(b, h<<4|l)
				i += 2
				continue
			}
		}
		b = append(b, s[i])
	}
	return b
}
