package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// The OpenAPI 3.1 document is made from the same route table and tool
// schemas the handler serves with, so it cannot drift from what runs: GET
// arguments become query (and path) parameters, a POST's become its JSON
// request body, the 200 answer is the tool's output schema, and every
// failure is the one error schema with the status its kind maps to.

type (
	openAPI struct {
		OpenAPI    string                `json:"openapi"`
		Info       info                  `json:"info"`
		Paths      map[string]pathItem   `json:"paths"`
		Components components            `json:"components"`
		Security   []map[string][]string `json:"security"`
	}
	info struct {
		Title       string `json:"title"`
		Version     string `json:"version"`
		Description string `json:"description"`
	}
	pathItem  map[string]*operation
	operation struct {
		OperationID string                `json:"operationId"`
		Summary     string                `json:"summary,omitempty"`
		Description string                `json:"description,omitempty"`
		Parameters  []parameter           `json:"parameters,omitempty"`
		RequestBody *requestBody          `json:"requestBody,omitempty"`
		Responses   map[string]any        `json:"responses"`
		Security    []map[string][]string `json:"security,omitempty"`
		Tools       []string              `json:"x-mcp-tools,omitempty"`
	}
	parameter struct {
		Name        string `json:"name"`
		In          string `json:"in"`
		Required    bool   `json:"required,omitempty"`
		Description string `json:"description,omitempty"`
		Schema      any    `json:"schema"`
		Style       string `json:"style,omitempty"`
		Explode     *bool  `json:"explode,omitempty"`
	}
	requestBody struct {
		Required bool                 `json:"required,omitempty"`
		Content  map[string]mediaType `json:"content"`
	}
	mediaType struct {
		Schema any `json:"schema"`
	}
	components struct {
		Schemas         map[string]any `json:"schemas"`
		Responses       map[string]any `json:"responses"`
		SecuritySchemes map[string]any `json:"securitySchemes"`
	}
)

// errorStatuses are the failure statuses a tool call can answer with (see
// Status), with what each means.
var errorStatuses = []struct{ code, desc string }{
	{"400", "bad_input: an argument is wrong (the message names it and says what is allowed), or the request is malformed"},
	{"401", "no_credentials (none sent) or auth_failed (the mail server refused the login)"},
	{"403", "forbidden: the gateway's policy does not allow this call"},
	{"404", "not_found: no such folder or message, no such route, or the route's tool is not offered by this gateway"},
	{"413", "too_large: a size limit was hit"},
	{"422", "permanent: the mail server refused for good (e.g. SMTP 5xx)"},
	{"429", "rate_limited: the gateway's per-user rate limit; the message says when to retry"},
	{"500", "internal: a bug or an unexpected server answer; the gateway's log has the details"},
	{"502", "unavailable: the mail server cannot be reached"},
	{"503", "busy (all mail connections in use; Retry-After says when to retry) or temporary (the mail server said try again later)"},
	{"504", "timeout: the mail server did not answer in time, or the call ran past the gateway's limit"},
}

func statusDescription(code string) string {
	for _, s := range errorStatuses {
		if s.code == code {
			return s.desc
		}
	}
	return ""
}

var security = []map[string][]string{
	{"bearerToken": {}},
	{"mailboxToken": {}},
	{"imapUser": {}, "imapPass": {}},
}

func document(eps []*endpoint, version string) ([]byte, error) {
	doc := openAPI{
		OpenAPI: "3.1.0",
		Info: info{
			Title:   "mailbox-mcp REST mirror",
			Version: version,
			Description: "The gateway's MCP tools as plain HTTP calls, for scripts and hooks: the same argument checks, credentials, limits and errors as over MCP. " +
				"A successful call answers 200 with the tool's structured result as JSON; ?format=text (or Accept: text/plain) gives the text form MCP clients see instead, " +
				"and ?format=both gives {\"result\": …, \"text\": …}. A failure answers {\"error\": {\"code\": kind, \"message\": sentence}} with the status of its kind. " +
				"Credentials: a credentials token as Authorization: Bearer or x-mailbox-token, or the mailbox login as x-imap-user and x-imap-pass (never in the URL).",
		},
		Paths:    map[string]pathItem{},
		Security: security,
		Components: components{
			Schemas: map[string]any{
				"Error": map[string]any{
					"type":     "object",
					"required": []string{"error"},
					"properties": map[string]any{
						"error": map[string]any{
							"type":     "object",
							"required": []string{"code", "message"},
							"properties": map[string]any{
								"code":    map[string]any{"type": "string", "description": "The kind of failure: bad_input, no_credentials, auth_failed, forbidden, not_found, too_large, rate_limited, busy, timeout, unavailable, temporary, permanent, internal; method_not_allowed for a wrong method."},
								"message": map[string]any{"type": "string", "description": "What went wrong, in a sentence meant for the user: the same sentence an MCP client gets."},
							},
						},
					},
				},
			},
			Responses: map[string]any{
				"Error": map[string]any{
					"description": "The call failed; code and message say why.",
					"content":     map[string]any{"application/json": mediaType{ref("schemas", "Error")}},
				},
				"Busy": map[string]any{
					"description": statusDescription("503"),
					"headers": map[string]any{"Retry-After": map[string]any{
						"description": "Seconds to wait before trying again (busy only).",
						"schema":      map[string]any{"type": "integer"},
					}},
					"content": map[string]any{"application/json": mediaType{ref("schemas", "Error")}},
				},
			},
			SecuritySchemes: map[string]any{
				"bearerToken":  map[string]any{"type": "http", "scheme": "bearer", "bearerFormat": "mbx1 credentials token", "description": "A credentials token (mbx1.…) made by the gateway's credentials tool or 'mailbox-mcp token'."},
				"mailboxToken": map[string]any{"type": "apiKey", "in": "header", "name": "X-Mailbox-Token", "description": "The same credentials token, in the header MCP clients use."},
				"imapUser":     map[string]any{"type": "apiKey", "in": "header", "name": "X-Imap-User", "description": "The mailbox user name; send with X-Imap-Pass."},
				"imapPass":     map[string]any{"type": "apiKey", "in": "header", "name": "X-Imap-Pass", "description": "The mailbox password; send with X-Imap-User."},
			},
		},
	}
	doc.Paths[DocumentPath] = pathItem{"get": &operation{
		OperationID: "openapi",
		Summary:     "This document",
		Responses: map[string]any{"200": map[string]any{
			"description": "The OpenAPI document of the routes this gateway serves.",
			"content":     map[string]any{"application/json": mediaType{map[string]any{"type": "object"}}},
		}},
		Security: []map[string][]string{{}},
	}}
	for _, ep := range eps {
		if len(ep.tools) == 0 {
			continue // not served here: not documented here
		}
		op, err := ep.operation()
		if err != nil {
			return nil, err
		}
		item := doc.Paths[ep.Path]
		if item == nil {
			item = pathItem{}
			doc.Paths[ep.Path] = item
		}
		item[strings.ToLower(ep.Method)] = op
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("rest: OpenAPI document: %v", err)
	}
	return b.Bytes(), nil
}

func ref(kind, name string) map[string]any {
	return map[string]any{"$ref": "#/components/" + kind + "/" + name}
}

// operation documents one route from its tools' definitions.
func (ep *endpoint) operation() (*operation, error) {
	var names []string
	var inputs, outputs []map[string]any
	for _, t := range ep.tools {
		names = append(names, t.Def.Name)
		var in, out map[string]any
		if err := json.Unmarshal(t.Def.RawInputSchema, &in); err != nil {
			return nil, fmt.Errorf("rest: tool %s: input schema: %v", t.Def.Name, err)
		}
		if err := json.Unmarshal(t.Def.RawOutputSchema, &out); err != nil {
			return nil, fmt.Errorf("rest: tool %s: output schema: %v", t.Def.Name, err)
		}
		inputs, outputs = append(inputs, in), append(outputs, out)
	}
	op := &operation{
		OperationID: strings.Join(names, "_or_"),
		Summary:     ep.Summary,
		Tools:       names,
		Responses:   map[string]any{},
	}
	if op.Summary == "" {
		op.Summary = ep.tools[0].Def.Title
	}
	if len(ep.tools) == 1 {
		op.Description = ep.tools[0].Def.Description
	} else {
		var b strings.Builder
		fmt.Fprintf(&b, "Calls the first of %s that takes every parameter given, else the last.", strings.Join(names, ", "))
		for _, t := range ep.tools {
			fmt.Fprintf(&b, "\n\n%s: %s", t.Def.Name, t.Def.Description)
		}
		op.Description = b.String()
	}

	// Arguments: the union over the route's tools, each required only if
	// every tool that takes it requires it.
	props := map[string]any{}
	required := map[string]bool{}
	for _, in := range inputs {
		p, _ := in["properties"].(map[string]any)
		req := stringSet(in["required"])
		for name, s := range p {
			if _, seen := props[name]; !seen {
				props[name] = s
				required[name] = req[name]
			} else {
				required[name] = required[name] && req[name]
			}
		}
	}
	pathParams := ep.pathParams()
	for _, name := range pathParams {
		op.Parameters = append(op.Parameters, param(name, "path", true, props[name]))
	}
	if ep.Method == http.MethodGet {
		for _, name := range slices.Sorted(maps.Keys(props)) {
			if slices.Contains(pathParams, name) || name == "credentials" {
				continue // credentials never go in a URL
			}
			op.Parameters = append(op.Parameters, param(name, "query", required[name], props[name]))
		}
	} else {
		body := map[string]any{}
		for k, v := range inputs[0] {
			body[k] = v
		}
		bodyProps := map[string]any{}
		var bodyReq []string
		for name, s := range props {
			if slices.Contains(pathParams, name) {
				continue
			}
			bodyProps[name] = s
			if required[name] {
				bodyReq = append(bodyReq, name)
			}
		}
		body["properties"] = bodyProps
		delete(body, "required")
		if len(bodyReq) > 0 {
			slices.Sort(bodyReq)
			body["required"] = bodyReq
		}
		op.RequestBody = &requestBody{Required: len(bodyReq) > 0,
			Content: map[string]mediaType{"application/json": {body}}}
	}
	op.Parameters = append(op.Parameters, parameter{
		Name: formatParam, In: "query",
		Description: "json (default): the structured result; text: the text form MCP clients see; both: {\"result\": …, \"text\": …}. Without it, Accept: text/plain asks for text.",
		Schema:      map[string]any{"type": "string", "enum": []string{"json", "text", "both"}, "default": "json"},
	})

	result := outputs[0]
	if !allEqual(outputs) {
		var alts []any
		for _, o := range outputs {
			alts = append(alts, o)
		}
		result = map[string]any{"oneOf": alts}
	}
	op.Responses["200"] = map[string]any{
		"description": "The tool's result (with format=both, {\"result\": this, \"text\": the text form}).",
		"content": map[string]any{
			"application/json": mediaType{result},
			"text/plain":       mediaType{map[string]any{"type": "string"}},
		},
	}
	for _, o := range outputs {
		if p, _ := o["properties"].(map[string]any); p["approval"] != nil {
			op.Responses["202"] = map[string]any{
				"description": "Waiting for a person's approval (APPROVAL, or the token's): nothing has happened yet; the result holds only approval, with the link of the approval page to show them.",
				"content":     map[string]any{"application/json": mediaType{result}, "text/plain": mediaType{map[string]any{"type": "string"}}},
			}
			break
		}
	}
	for _, s := range errorStatuses {
		if s.code == "503" {
			op.Responses[s.code] = ref("responses", "Busy")
		} else {
			op.Responses[s.code] = ref("responses", "Error")
		}
	}
	op.Responses["405"] = ref("responses", "Error")
	if ep.Method == http.MethodPost {
		op.Responses["415"] = ref("responses", "Error")
	}
	return op, nil
}

// param makes a parameter from an argument's schema; its description
// moves from the schema to the parameter.
func param(name, in string, required bool, s any) parameter {
	schema := map[string]any{}
	if m, ok := s.(map[string]any); ok {
		maps.Copy(schema, m)
	}
	desc, _ := schema["description"].(string)
	delete(schema, "description")
	p := parameter{Name: name, In: in, Required: required, Description: desc, Schema: schema}
	if schema["type"] == "array" {
		yes := true
		p.Style, p.Explode = "form", &yes
		p.Description = strings.TrimSpace(p.Description + " Repeat the parameter for each entry, or give one comma-separated value.")
	}
	return p
}

func stringSet(v any) map[string]bool {
	out := map[string]bool{}
	list, _ := v.([]any)
	for _, x := range list {
		if s, ok := x.(string); ok {
			out[s] = true
		}
	}
	return out
}

func allEqual(schemas []map[string]any) bool {
	first, _ := json.Marshal(schemas[0])
	for _, s := range schemas[1:] {
		b, _ := json.Marshal(s)
		if !bytes.Equal(first, b) {
			return false
		}
	}
	return true
}
