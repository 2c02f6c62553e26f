package tools

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// Arguments are decoded here rather than by mcp-go's schema validation,
// whose errors are Go internals ("/limit: &{Got:100000/1 Want:100/1}").
// Every refusal is one plain sentence that names the argument, what is
// allowed and what was given, and an unknown argument is refused with the
// nearest valid name: a misspelt argument must never be silently ignored
// (`{"mailbox":"Sent"}` would otherwise list INBOX).

// decodeArgs decodes raw (the call's arguments, as mcp-go parsed them)
// into a new A, checking every field against its tags.
func decodeArgs[A any](raw any) (A, error) {
	var a A
	v := reflect.ValueOf(&a).Elem()
	obj, err := argsObject(raw)
	if err != nil {
		return a, err
	}
	if err := decodeStruct(v, obj, ""); err != nil {
		return a, err
	}
	if c, ok := any(&a).(interface{ check() error }); ok {
		if err := c.check(); err != nil {
			return a, err
		}
	}
	return a, nil
}

func argsObject(raw any) (map[string]any, error) {
	switch r := raw.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return r, nil
	case json.RawMessage:
		return argsObject(decodeRaw(r))
	case []byte:
		return argsObject(decodeRaw(r))
	}
	return nil, badArg("the arguments must be a JSON object (got %s)", describeValue(raw))
}

func decodeRaw(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return string(b)
	}
	return v
}

func badArg(format string, args ...any) error {
	return mailerr.Newf(mailerr.BadInput, format, args...)
}

// decodeStruct fills the struct v from obj; prefix names the enclosing
// argument in messages ("attachments[0].").
func decodeStruct(v reflect.Value, obj map[string]any, prefix string) error {
	fields := fieldsOf(v.Type())
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	// Unknown names first, in a stable order: they are the likeliest
	// mistake and explain the others.
	var unknown []string
	for k := range obj {
		if !slices.Contains(names, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return unknownArg(prefix, unknown[0], names)
	}
	for _, f := range fields {
		val, ok := obj[f.name]
		if !ok || val == nil {
			if f.required {
				return badArg("%s%s is required", prefix, f.name)
			}
			continue
		}
		if err := decodeValue(v.FieldByIndex(f.index), val, prefix+f.name, f); err != nil {
			return err
		}
	}
	return nil
}

// decodeValue sets dst from val, checking f's constraints. name is the
// argument's full name for messages.
func decodeValue(dst reflect.Value, val any, name string, f field) error {
	if dst.Kind() == reflect.Pointer {
		p := reflect.New(dst.Type().Elem())
		if err := decodeValue(p.Elem(), val, name, f); err != nil {
			return err
		}
		dst.Set(p)
		return nil
	}
	switch dst.Kind() {
	case reflect.String:
		s, ok := val.(string)
		if !ok {
			return badArg("%s must be a string (got %s)", name, describeValue(val))
		}
		n := utf8.RuneCountInString(s)
		if f.max != nil && n > int(*f.max) {
			return badArg("%s must be at most %d characters long (got %d)", name, int(*f.max), n)
		}
		if f.min != nil && n < int(*f.min) {
			return badArg("%s must be at least %d characters long (got %d)", name, int(*f.min), n)
		}
		if len(f.enum) > 0 && !slices.Contains(f.enum, s) {
			// The value is not echoed: errors are logged, and a caller
			// may have put anything in the wrong field.
			return badArg("%s must be one of %s", name, strings.Join(f.enum, ", "))
		}
		dst.SetString(s)
	case reflect.Bool:
		b, ok := val.(bool)
		if !ok {
			return badArg("%s must be true or false (got %s)", name, describeValue(val))
		}
		dst.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := number(val)
		if !ok {
			return badArg("%s must be a whole number (got %s)", name, describeValue(val))
		}
		if n != math.Trunc(n) || math.IsInf(n, 0) {
			return badArg("%s must be a whole number (got %s)", name, describeValue(val))
		}
		lo, hi := intRange(dst.Type())
		if f.min != nil {
			lo = max(lo, *f.min)
		}
		if f.max != nil {
			hi = min(hi, *f.max)
		}
		if n < lo || n > hi {
			return rangeError(name, lo, hi, dst.Type(), val)
		}
		if dst.CanInt() {
			dst.SetInt(int64(n))
		} else {
			dst.SetUint(uint64(n))
		}
	case reflect.Float32, reflect.Float64:
		n, ok := number(val)
		if !ok || math.IsInf(n, 0) || math.IsNaN(n) {
			return badArg("%s must be a number (got %s)", name, describeValue(val))
		}
		if f.min != nil && n < *f.min || f.max != nil && n > *f.max {
			return rangeError(name, deref(f.min, math.Inf(-1)), deref(f.max, math.Inf(1)), dst.Type(), val)
		}
		dst.SetFloat(n)
	case reflect.Slice:
		list, ok := val.([]any)
		if !ok {
			return badArg("%s must be a list (got %s)", name, describeValue(val))
		}
		if f.max != nil && len(list) > int(*f.max) {
			return badArg("%s may have at most %s (got %d)", name, plural(int(*f.max), "entry"), len(list))
		}
		if f.min != nil && len(list) < int(*f.min) {
			return badArg("%s must have at least %s (got %d)", name, plural(int(*f.min), "entry"), len(list))
		}
		out := reflect.MakeSlice(dst.Type(), len(list), len(list))
		for i, item := range list {
			if item == nil {
				return badArg("%s[%d] must not be null", name, i)
			}
			// Element constraints: only the type's own (the tags speak of
			// the list).
			if err := decodeValue(out.Index(i), item, fmt.Sprintf("%s[%d]", name, i), field{}); err != nil {
				return err
			}
		}
		dst.Set(out)
	case reflect.Struct:
		obj, ok := val.(map[string]any)
		if !ok {
			return badArg("%s must be an object (got %s)", name, describeValue(val))
		}
		return decodeStruct(dst, obj, name+".")
	case reflect.Interface:
		// An `any` argument takes any JSON value but null, as decoded; its
		// tool checks the rest.
		if val == nil {
			return badArg("%s must be a JSON value (a string, number, true or false, object or array), not null", name)
		}
		dst.Set(reflect.ValueOf(val))
	default:
		panic(fmt.Sprintf("tools: cannot decode argument %s into %s", name, dst.Type()))
	}
	return nil
}

func deref(p *float64, def float64) float64 {
	if p == nil {
		return def
	}
	return *p
}

// number accepts what encoding/json makes of a JSON number.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	// Go callers (tests, the REST mirror) may pass any integer type.
	switch r := reflect.ValueOf(v); {
	case r.CanInt():
		return float64(r.Int()), true
	case r.CanUint():
		return float64(r.Uint()), true
	case r.CanFloat():
		return r.Float(), true
	}
	return 0, false
}

func intRange(t reflect.Type) (float64, float64) {
	switch t.Kind() {
	case reflect.Uint8:
		return 0, math.MaxUint8
	case reflect.Uint16:
		return 0, math.MaxUint16
	case reflect.Uint32:
		return 0, math.MaxUint32
	case reflect.Uint, reflect.Uint64:
		return 0, 1 << 53
	case reflect.Int8:
		return math.MinInt8, math.MaxInt8
	case reflect.Int16:
		return math.MinInt16, math.MaxInt16
	case reflect.Int32:
		return math.MinInt32, math.MaxInt32
	}
	return -(1 << 53), 1 << 53
}

func rangeError(name string, lo, hi float64, t reflect.Type, val any) error {
	got := describeValue(val)
	switch {
	case !math.IsInf(lo, 0) && !math.IsInf(hi, 0) && hi < 1<<53:
		return badArg("%s must be between %s and %s (got %s)", name, fmtNum(lo), fmtNum(hi), got)
	case !math.IsInf(lo, 0) && lo > -(1<<53):
		return badArg("%s must be at least %s (got %s)", name, fmtNum(lo), got)
	default:
		return badArg("%s must be at most %s (got %s)", name, fmtNum(hi), got)
	}
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// describeValue shows a given value in a message: short, and never more
// than a few dozen characters of it.
func describeValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		if utf8.RuneCountInString(x) > 40 {
			x = string([]rune(x)[:40]) + "…"
		}
		return strconv.Quote(x)
	case bool:
		return strconv.FormatBool(x)
	case float64, json.Number, int, int64, uint32:
		n, _ := number(x)
		if math.Abs(n) < 1e21 {
			return fmtNum(n)
		}
		return strconv.FormatFloat(n, 'g', -1, 64)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}

// argAliases are names people (and models) use for an argument that has
// another name here: the suggestion does not depend on spelling distance.
var argAliases = map[string][]string{
	"mailbox": {"folder"}, "box": {"folder"}, "dir": {"folder"}, "directory": {"folder"}, "path": {"folder"},
	"id": {"uid"}, "message_id": {"uid"}, "msg_id": {"uid"}, "message_uid": {"uid"}, "uids": {"uid"},
	"count": {"limit"}, "max": {"limit"}, "max_results": {"limit"}, "page_size": {"limit"}, "n": {"limit"},
	"page": {"cursor"}, "next": {"cursor"}, "next_cursor": {"cursor"}, "page_token": {"cursor"},
	"content": {"text", "content_base64"}, "message": {"text"}, "body": {"text"}, "html_body": {"html"}, "query": {"text"}, "q": {"text"},
	"recipient": {"to"}, "recipients": {"to"}, "sender": {"from"}, "token": {"credentials"},
	"username": {"user"}, "login": {"user"}, "email": {"user"}, "pass": {"password"}, "passwd": {"password"},
	"all": {"reply_all"}, "replyall": {"reply_all"}, "title": {"subject"}, "files": {"attachments"},
	"after": {"since"}, "until": {"before"}, "unread": {"seen"}, "starred": {"flagged"},
	"data": {"content_base64"}, "name": {"filename"}, "mime_type": {"content_type"},
	"rsvp": {"response"}, "answer": {"response"}, "partstat": {"response"}, "status": {"response"}, "note": {"comment"},
}

// unknownArg refuses name, suggesting the nearest valid argument.
func unknownArg(prefix, name string, valid []string) error {
	if s := suggest(name, valid); s != "" {
		return badArg("unknown argument %q; did you mean %q?", prefix+name, prefix+s)
	}
	if len(valid) == 0 {
		return badArg("unknown argument %q: this tool takes no arguments", prefix+name)
	}
	sorted := slices.Sorted(slices.Values(valid))
	for i := range sorted {
		sorted[i] = prefix + sorted[i]
	}
	return badArg("unknown argument %q; the arguments are: %s", prefix+name, strings.Join(sorted, ", "))
}

// suggest returns the valid name closest to name: an alias, a name
// differing in case or separators, or one within a small edit distance.
func suggest(name string, valid []string) string {
	norm := func(s string) string {
		return strings.NewReplacer("-", "", "_", "", " ", "").Replace(strings.ToLower(s))
	}
	for _, v := range valid {
		if norm(v) == norm(name) {
			return v
		}
	}
	for _, alias := range argAliases[strings.ToLower(name)] {
		if slices.Contains(valid, alias) {
			return alias
		}
	}
	best, bestD := "", 0
	for _, v := range valid {
		d := editDistance(strings.ToLower(name), v)
		if best == "" || d < bestD {
			best, bestD = v, d
		}
	}
	if best != "" && bestD <= max(1, min(3, len(name)/3)) {
		return best
	}
	// A valid name that contains the given one or the other way round
	// ("max_chars" for "chars").
	for _, v := range valid {
		if len(name) >= 3 && (strings.Contains(v, strings.ToLower(name)) || strings.Contains(strings.ToLower(name), v)) {
			return v
		}
	}
	return ""
}

// editDistance is the optimal-string-alignment distance of two short
// strings: insertions, deletions, substitutions and swaps of neighbours
// ("form" for "from") cost one each.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		return 1 << 20
	}
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
