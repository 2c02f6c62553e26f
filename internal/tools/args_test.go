package tools

import (
	"encoding/json"
	"strings"
	"testing"
)

type testArgs struct {
	Folder string   `json:"folder" max:"5" desc:"f"`
	Limit  int      `json:"limit" min:"1" max:"100" desc:"l"`
	UID    uint32   `json:"uid" required:"true" min:"1" desc:"u"`
	Seen   *bool    `json:"seen" desc:"s"`
	Kind   string   `json:"kind" enum:"a,b" desc:"k"`
	Tags   []string `json:"tags" max:"2" desc:"t"`
	Files  []struct {
		Name string `json:"name" required:"true" desc:"n"`
	} `json:"files" desc:"x"`
}

// Every refusal is one sentence naming the argument, what is allowed and
// what was given; a misspelt name gets the nearest valid one.
func TestDecodeArgsSentences(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"uid":1,"limit":100000}`, "limit must be between 1 and 100 (got 100000)"},
		{`{"uid":1.5}`, "uid must be a whole number (got 1.5)"},
		{`{}`, "uid is required"},
		{`{"uid":null}`, "uid is required"},
		{`{"uid":"7"}`, `uid must be a whole number (got "7")`},
		{`{"uid":1,"mailbox":"Sent"}`, `unknown argument "mailbox"; did you mean "folder"?`},
		{`{"uid":1,"limt":3}`, `unknown argument "limt"; did you mean "limit"?`},
		{`{"uid":1,"Folder":"x"}`, `unknown argument "Folder"; did you mean "folder"?`},
		{`{"uid":1,"zzzzzz":1}`, `unknown argument "zzzzzz"; the arguments are: files, folder, kind, limit, seen, tags, uid`},
		{`{"uid":1,"folder":"abcdef"}`, "folder must be at most 5 characters long (got 6)"},
		{`{"uid":1,"folder":"äöüßé"}`, ""},
		{`{"uid":1,"seen":"yes"}`, `seen must be true or false (got "yes")`},
		{`{"uid":1,"kind":"c"}`, `kind must be one of a, b`},
		{`{"uid":1,"tags":"x"}`, `tags must be a list (got "x")`},
		{`{"uid":1,"tags":["a","b","c"]}`, "tags may have at most 2 entries (got 3)"},
		{`{"uid":1,"tags":[1]}`, "tags[0] must be a string (got 1)"},
		{`{"uid":1,"files":[{}]}`, "files[0].name is required"},
		{`{"uid":1,"files":[{"name":"a","size":3}]}`, `unknown argument "files[0].size"; the arguments are: files[0].name`},
		{`{"uid":1e300}`, "uid must be between 1 and 4294967295 (got 1e+300)"},
		{`{"uid":-3}`, "uid must be between 1 and 4294967295 (got -3)"},
		{`[1]`, "the arguments must be a JSON object (got a list)"},
		{`"x"`, `the arguments must be a JSON object (got "x")`},
		{`{"uid":7,"limit":20,"seen":false,"kind":"a","tags":["x"],"files":[{"name":"n"}]}`, ""},
	} {
		var raw any
		if err := json.Unmarshal([]byte(tc.in), &raw); err != nil {
			t.Fatal(err)
		}
		_, err := decodeArgs[testArgs](raw)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// The schemas of every tool are strict-clean: one type per property, no
// null, every argument described, unknown arguments refused.
func TestSchemasStrictClean(t *testing.T) {
	for _, tl := range DocTools() {
		if err := checkContract(tl.Def); err != nil {
			t.Error(err)
		}
		for _, raw := range [][]byte{tl.Def.RawInputSchema, tl.Def.RawOutputSchema} {
			if strings.Contains(string(raw), `"type":[`) || strings.Contains(string(raw), `"null"`) {
				t.Errorf("%s: a type array or null in %s", tl.Def.Name, raw)
			}
		}
		if !strings.Contains(string(tl.Def.RawInputSchema), `"additionalProperties":false`) {
			t.Errorf("%s: the input schema does not refuse unknown arguments", tl.Def.Name)
		}
	}
}
