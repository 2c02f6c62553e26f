package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestDuplicateKey(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       string // the duplicated key; "" for none
	}{
		{"tool name twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"imap_list_folders","name":"smtp_send_email","arguments":{}}}`, "name"},
		{"top level", `{"method":"tools/list","method":"tools/call"}`, "method"},
		{"deep in the arguments", `{"params":{"arguments":{"to":[{"a":{"b":1,"c":2,"b":3}}]}}}`, "b"},
		{"other letter case", `{"params":{"name":"imap_list_folders","NAME":"smtp_send_email"}}`, "NAME"},
		{"escaped", `{"params":{"name":"a","na\u006de":"b"}}`, "name"},
		{"escaped and cased", `{"params":{"name":"a","\u004eAME":"b"}}`, "NAME"},
		{"long s folds to s", `{"params":{"arguments":1,"argument\u017f":2}}`, "argumentſ"},
		{"raw long s", `{"params":{"arguments":1,"argumentſ":2}}`, "argumentſ"},
		{"kelvin sign", `{"k":1,"\u212a":2}`, "\u212a"},
		{"invalid UTF-8 both become U+FFFD", "{\"a\xff\":1,\"a\xfe\":2}", "a\ufffd"},
		{"in a batch", `[{"id":1},{"id":2,"id":3}]`, "id"},
		{"many keys", manyKeysBody(100, true), "K7"},
		{"whitespace everywhere", " {\n\t\"a\" : 1 ,\r\n \"a\" : 2 } ", "a"},
		{"empty key", `{"":1,"":2}`, ""},

		{"none", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"imap_list_folders","arguments":{"folder":"INBOX"}}}`, ""},
		{"same key in sibling objects", `{"a":{"x":1},"b":{"x":2},"c":[{"x":1},{"x":2}]}`, ""},
		{"same key at two depths", `{"x":{"x":{"x":1}}}`, ""},
		{"key text as a value", `{"name":"name","v":["name","name"]}`, ""},
		{"quotes and braces in strings", `{"a":"}\"{,\"a\":","b":"\\","c":"\\\"a\\\":"}`, ""},
		{"many keys, distinct", manyKeysBody(100, false), ""},
		{"numbers and literals", `{"a":-1.5e+3,"b":true,"c":null,"d":false,"e":[1,2,3]}`, ""},
		{"not JSON", `{"a":1,"b"`, ""},
		{"empty", ``, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, dup := duplicateKey([]byte(tc.body))
			wantDup := tc.want != "" || tc.name == "empty key"
			if dup != wantDup || key != tc.want {
				t.Fatalf("duplicateKey = %q, %v; want %q, %v", key, dup, tc.want, wantDup)
			}
		})
	}
}

func manyKeysBody(n int, dup bool) string {
	var b strings.Builder
	b.WriteString(`{"params":{`)
	for i := range n {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	if dup {
		b.WriteString(`"K7":0,`)
	}
	b.WriteString(`"end":0}}`)
	return b.String()
}

// Nesting past encoding/json's limit is left to the decoder, which refuses
// it: the scan must not go on growing its stack.
func TestDuplicateKeyDepth(t *testing.T) {
	deep := strings.Repeat("[", maxDepth+1) + `{"a":1,"a":2}` + strings.Repeat("]", maxDepth+1)
	if json.Valid([]byte(deep)) {
		t.Fatal("encoding/json accepts the deep body: the limit moved")
	}
	if _, dup := duplicateKey([]byte(deep)); dup {
		t.Fatal("scanned past the depth limit")
	}
	ok := strings.Repeat("[", 100) + `{"a":1,"a":2}` + strings.Repeat("]", 100)
	if _, dup := duplicateKey([]byte(ok)); !dup {
		t.Fatal("missed a duplicate at depth 100")
	}
}

// referenceDuplicate is the slow, obviously right answer: encoding/json's
// own tokenizer, each key compared with every earlier key of its object as
// encoding/json compares names (strings.EqualFold).
func referenceDuplicate(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		object bool
		keys   []string
		isKey  bool // the next token in this object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return "", false
		}
		if err != nil {
			return "", false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if top != nil && top.object {
					top.isKey = true
				}
				stack = append(stack, &frame{object: v == '{', isKey: v == '{'})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		case string:
			if top != nil && top.object && top.isKey {
				for _, k := range top.keys {
					if strings.EqualFold(k, v) {
						return v, true
					}
				}
				top.keys = append(top.keys, v)
				top.isKey = false
				continue
			}
		}
		if top != nil && top.object {
			top.isKey = true
		}
	}
}

// FuzzDuplicateKey checks the scan against the reference on every valid
// JSON text: a body it misreads would let a duplicate through.
func FuzzDuplicateKey(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"A":2}`, `{"a":{"b":[1,{"c":2,"c":3}]},"b":4}`, `{"\u212a":1,"k":2}`,
		`{"x":"\"\\","y":"\\\"","x\\":1}`, `[{"a":1},{"a":1}]`, `{"é":1,"É":2}`, "{\"\xff\":1,\"\xfe\":2}",
		`{"a":1e5,"b":[true,false,null],"c":{}}`, manyKeysBody(20, true), `{"ǅ":1,"ǆ":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		key, dup := duplicateKey(data)
		if !json.Valid(data) {
			return
		}
		wantKey, wantDup := referenceDuplicate(data)
		if dup != wantDup || (dup && !strings.EqualFold(key, wantKey)) {
			t.Fatalf("%q: scan says %q %v, reference %q %v", data, key, dup, wantKey, wantDup)
		}
	})
}

// A typical tools/call body of about 1 KB.
var typicalCall = []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"smtp_send_email","arguments":{"to":["bob@example.test","carol@example.test"],"cc":["dave@example.test"],"subject":"Quarterly report: figures for the third quarter and the plan for the next one","text":"Hello Bob,\n\nplease find below the figures we discussed on Tuesday. Revenue grew by 4.2% over the quarter, costs stayed flat, and the new office opens in March. Let me know if anything is unclear or if you want the spreadsheet as well; I can send it tomorrow morning.\n\nThe plan for the next quarter: hire two engineers, finish the migration, and close the books a week earlier than last time. We will go through it in detail at the meeting on the 14th.\n\nBest regards,\nAlice","in_reply_to":"<20240101.1234@example.test>","attachments":[{"filename":"notes.txt","content_type":"text/plain","content_base64":"SGVsbG8gd29ybGQsIHRoaXMgaXMgYSBzaG9ydCBhdHRhY2htZW50Lg=="}]},"_meta":{"progressToken":"p-42"}}}`)

func BenchmarkDuplicateKey(b *testing.B) {
	if _, dup := duplicateKey(typicalCall); dup {
		b.Fatal("duplicate in the benchmark body")
	}
	b.SetBytes(int64(len(typicalCall)))
	b.ReportAllocs()
	for b.Loop() {
		duplicateKey(typicalCall)
	}
}

// For scale: what one encoding/json decode of the same body costs (mcp-go
// does several).
func BenchmarkUnmarshalForScale(b *testing.B) {
	b.SetBytes(int64(len(typicalCall)))
	b.ReportAllocs()
	for b.Loop() {
		var v map[string]any
		json.Unmarshal(typicalCall, &v)
	}
}

// The largest body allowed by default: one 1 MiB string (an attachment).
func BenchmarkDuplicateKeyLarge(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"smtp_send_email","arguments":{"attachments":[{"filename":"a.bin","content_base64":"` +
		strings.Repeat("QUJD", 1<<18) + `"}]}}}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		duplicateKey(body)
	}
}
