// Package rest is the REST mirror of the MCP tools under /v1/, for scripts,
// hooks and the CLI client. It is generated from the tool definitions, not
// written twice: a route table maps a method and path to a tool, query
// parameters are converted by the tool's input schema, and every call goes
// through the tool layer's one adapter (argument checks in plain
// sentences, credentials from the request context, rate limits, deadline),
// so REST and MCP answer alike. A failure is
// {"error":{"code":"<kind>","message":"<the adapter's sentence>"}} with an
// HTTP status chosen by its mailerr.Kind. It also serves the OpenAPI 3.1
// document of the routes it has at /v1/openapi.json.
//
// The route table itself (which path calls which tool) is the caller's:
// this package names no tool and holds no mail logic. What runs before it
// (host and origin checks, body limits, client address, credential
// headers) is httpapi's.
package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/tools"
)

// Prefix is where the mirror is mounted.
const Prefix = "/v1/"

// DocumentPath serves the OpenAPI document.
const DocumentPath = "/v1/openapi.json"

// Route maps one method and path to a tool.
type Route struct {
	// Method is GET (arguments in the query) or POST (arguments in a JSON
	// body; query parameters are accepted too).
	Method string
	// Path starts with /v1/; a segment {name} is the tool argument name,
	// taken from the path.
	Path string
	// Tools is the tool the route calls. With more than one, a call goes
	// to the first that takes every argument given, else to the last: a
	// list route becomes a search when search criteria are given.
	Tools []string
	// Summary is the one line the OpenAPI document shows.
	Summary string
}

// Handler serves the routes whose tools are enabled, a 404 naming the tool
// for those whose tool is not, and the OpenAPI document.
type Handler struct {
	endpoints []*endpoint
	doc       []byte
}

// endpoint is a route bound to the tools the gateway has.
type endpoint struct {
	Route
	segs    []string
	tools   []tools.Tool // the route's enabled tools, in route order
	inputs  []*node      // their input schemas
	missing []string     // the route's tools this gateway does not offer
}

// node is the part of a JSON schema the conversion of query parameters
// reads.
type node struct {
	Type       string           `json:"type"`
	Items      *node            `json:"items"`
	Properties map[string]*node `json:"properties"`
	Required   []string         `json:"required"`
}

// New binds routes to toolset. It refuses a route table that cannot work
// (a bad method or path, a path argument its tool does not take, a route
// twice); a route whose tool is not in toolset is kept and answers 404.
func New(routes []Route, toolset []tools.Tool, version string) (*Handler, error) {
	byName := map[string]tools.Tool{}
	for _, t := range toolset {
		byName[t.Def.Name] = t
	}
	h := &Handler{}
	seen := map[string]bool{}
	for _, r := range routes {
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			return nil, fmt.Errorf("rest: route %s %s: the method must be GET or POST", r.Method, r.Path)
		}
		if !strings.HasPrefix(r.Path, Prefix) || r.Path == DocumentPath || strings.HasSuffix(r.Path, "/") {
			return nil, fmt.Errorf("rest: route %s %s: the path must start with %s, not end with / and not be the document's", r.Method, r.Path, Prefix)
		}
		if len(r.Tools) == 0 {
			return nil, fmt.Errorf("rest: route %s %s: no tool", r.Method, r.Path)
		}
		key := r.Method + " " + pattern(r.Path)
		if seen[key] {
			return nil, fmt.Errorf("rest: route %s %s: listed twice", r.Method, r.Path)
		}
		seen[key] = true
		ep := &endpoint{Route: r, segs: strings.Split(strings.TrimPrefix(r.Path, "/"), "/")}
		for _, name := range r.Tools {
			t, ok := byName[name]
			if !ok {
				ep.missing = append(ep.missing, name)
				continue
			}
			var in node
			if err := json.Unmarshal(t.Def.RawInputSchema, &in); err != nil {
				return nil, fmt.Errorf("rest: tool %s: input schema: %v", name, err)
			}
			for _, p := range ep.pathParams() {
				if in.Properties[p] == nil {
					return nil, fmt.Errorf("rest: route %s %s: tool %s takes no argument %q", r.Method, r.Path, name, p)
				}
			}
			ep.tools = append(ep.tools, t)
			ep.inputs = append(ep.inputs, &in)
		}
		h.endpoints = append(h.endpoints, ep)
	}
	doc, err := document(h.endpoints, version)
	if err != nil {
		return nil, err
	}
	h.doc = doc
	return h, nil
}

// pattern is a path with its parameter names blanked, to find two routes
// that would match the same requests.
func pattern(path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if isParam(s) {
			segs[i] = "{}"
		}
	}
	return strings.Join(segs, "/")
}

func isParam(seg string) bool {
	return len(seg) > 2 && seg[0] == '{' && seg[len(seg)-1] == '}'
}

func (ep *endpoint) pathParams() []string {
	var out []string
	for _, s := range ep.segs {
		if isParam(s) {
			out = append(out, s[1:len(s)-1])
		}
	}
	return out
}

// match returns the path arguments when path matches the endpoint.
func (ep *endpoint) match(path string) (map[string]string, bool) {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(segs) != len(ep.segs) {
		return nil, false
	}
	var params map[string]string
	for i, s := range ep.segs {
		switch {
		case isParam(s) && segs[i] != "":
			if params == nil {
				params = map[string]string{}
			}
			params[s[1:len(s)-1]] = segs[i]
		case s != segs[i]:
			return nil, false
		}
	}
	return params, true
}

// Document is the OpenAPI document the handler serves.
func (h *Handler) Document() []byte { return bytes.Clone(h.doc) }

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == DocumentPath {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "use GET for "+DocumentPath)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Write(h.doc)
		return
	}
	var allowed []string
	for _, ep := range h.endpoints {
		params, ok := ep.match(r.URL.Path)
		if !ok {
			continue
		}
		if ep.Method != r.Method {
			allowed = append(allowed, ep.Method)
			continue
		}
		ep.serve(w, r, params)
		return
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed",
			fmt.Sprintf("%s is served with %s, not %s", r.URL.Path, strings.Join(allowed, " or "), r.Method))
		return
	}
	writeError(w, http.StatusNotFound, mailerr.NotFound.String(),
		fmt.Sprintf("no such route: %s %s; the routes are listed in %s", r.Method, r.URL.Path, DocumentPath))
}

// format is the form of a successful answer.
type format int

const (
	formatJSON format = iota // the structured result
	formatText               // the text form, as MCP clients that read only text get it
	formatBoth               // {"result": structured, "text": text}
)

// reserved query parameters are the mirror's own, never tool arguments.
const formatParam = "format"

func (ep *endpoint) serve(w http.ResponseWriter, r *http.Request, params map[string]string) {
	if len(ep.tools) == 0 {
		writeError(w, http.StatusNotFound, mailerr.NotFound.String(),
			fmt.Sprintf("%s %s is not available on this gateway: it does not offer %s (which tools a gateway offers depends on SMTP_HOST and MAILBOX_ACCESS)", ep.Method, ep.Path, strings.Join(ep.missing, " or ")))
		return
	}
	form, err := negotiate(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, mailerr.BadInput.String(), err.Error())
		return
	}
	ctx, err := bearer(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, mailerr.BadInput.String(), err.Error())
		return
	}
	i, args, status, err := ep.arguments(r, params)
	if err != nil {
		writeError(w, status, mailerr.BadInput.String(), err.Error())
		return
	}
	out := ep.tools[i].Invoke(ctx, args, nil)
	if out.Failed {
		status := Status(out.Kind)
		switch status {
		case http.StatusServiceUnavailable:
			if out.Kind == mailerr.Busy {
				w.Header().Set("Retry-After", retryAfter)
			}
		case http.StatusUnauthorized:
			// RFC 9110 asks a 401 to name a scheme; the x-imap-* and
			// x-mailbox-token headers work as well.
			w.Header().Set("WWW-Authenticate", `Bearer realm="mailbox-mcp"`)
		}
		writeError(w, status, out.Kind.String(), out.Text)
		return
	}
	status = http.StatusOK
	if out.Waiting {
		// Accepted, not done: a person approves it on the page first.
		status = http.StatusAccepted
	}
	switch form {
	case formatText:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(status)
		io.WriteString(w, out.Text)
	case formatBoth:
		writeJSON(w, status, struct {
			Result any    `json:"result"`
			Text   string `json:"text"`
		}{out.Structured, out.Text})
	default:
		writeJSON(w, status, out.Structured)
	}
}

// retryAfter is the wait, in seconds, a busy answer suggests: the pool
// frees connections as calls end, within seconds.
const retryAfter = "2"

// Status is the HTTP status of a failure of kind k.
func Status(k mailerr.Kind) int {
	switch k {
	case mailerr.BadInput:
		return http.StatusBadRequest
	case mailerr.NoCredentials, mailerr.Auth:
		return http.StatusUnauthorized
	case mailerr.Forbidden:
		return http.StatusForbidden
	case mailerr.NotFound:
		return http.StatusNotFound
	case mailerr.TooLarge:
		return http.StatusRequestEntityTooLarge
	case mailerr.RateLimited:
		return http.StatusTooManyRequests
	case mailerr.Busy, mailerr.Temporary:
		return http.StatusServiceUnavailable
	case mailerr.Timeout:
		return http.StatusGatewayTimeout
	case mailerr.Unavailable:
		return http.StatusBadGateway
	case mailerr.Permanent:
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}

// negotiate picks the answer's form: ?format= wins, else the Accept
// header's preference between application/json and text/plain (JSON when
// it has none).
func negotiate(r *http.Request) (format, error) {
	q := r.URL.Query()
	if vs, ok := q[formatParam]; ok {
		if len(vs) != 1 {
			return 0, errors.New("format is given more than once")
		}
		switch vs[0] {
		case "json":
			return formatJSON, nil
		case "text":
			return formatText, nil
		case "both":
			return formatBoth, nil
		}
		return 0, fmt.Errorf("format must be one of json, text, both (got %q)", vs[0])
	}
	best, bestQ := formatJSON, 0.0
	for _, part := range strings.Split(strings.Join(r.Header.Values("Accept"), ","), ",") {
		mt, p, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		weight := 1.0
		if v, ok := p["q"]; ok {
			if weight, err = strconv.ParseFloat(v, 64); err != nil {
				continue
			}
		}
		var f format
		switch mt {
		case "application/json":
			f = formatJSON
		case "text/plain":
			f = formatText
		default:
			continue
		}
		if weight > bestQ {
			best, bestQ = f, weight
		}
	}
	return best, nil
}

// bearer puts a token sent as "Authorization: Bearer <token>" into the
// request context, as httpapi does with x-mailbox-token; the tool layer
// opens it. Credentials in two places at once are refused: each is always
// a client mistake.
func bearer(r *http.Request) (context.Context, error) {
	ctx := r.Context()
	auth := strings.TrimSpace(r.Header.Get("Authorization"))
	if auth == "" {
		return ctx, nil
	}
	scheme, token, _ := strings.Cut(auth, " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return ctx, errors.New(`the Authorization header must be "Bearer <token>", with a credentials token (made by the gateway's credentials tool or 'mailbox-mcp token')`)
	}
	if strings.ContainsRune(token, 0) {
		return ctx, errors.New("a NUL byte is not allowed in the Authorization header")
	}
	_, hasToken := credentials.TokenFromContext(ctx)
	_, hasCreds := credentials.FromContext(ctx)
	if hasToken || hasCreds {
		return ctx, errors.New("send the credentials once: either Authorization: Bearer, or x-mailbox-token, or x-imap-user and x-imap-pass")
	}
	return credentials.NewTokenContext(ctx, token), nil
}

// arguments builds the tool arguments of a call from the path, the query
// and (for POST) the JSON body, and picks the route's tool. Values are
// converted by the tool's input schema; an argument the tool does not
// know is passed on as given, so that the adapter refuses it with its own
// sentence (naming the nearest valid argument).
func (ep *endpoint) arguments(r *http.Request, params map[string]string) (int, map[string]any, int, error) {
	query := r.URL.Query()
	delete(query, formatParam)
	if _, ok := query["credentials"]; ok {
		return 0, nil, http.StatusBadRequest, errors.New("credentials must not be sent in the URL, which proxies and logs keep: use the Authorization: Bearer or x-mailbox-token header")
	}
	var body map[string]any
	if r.Method == http.MethodPost {
		var err error
		if body, err = readJSONObject(r); err != nil {
			status := http.StatusBadRequest
			if errors.Is(err, errMediaType) {
				status = http.StatusUnsupportedMediaType
			}
			return 0, nil, status, err
		}
	}
	// Which tool: the first that takes every argument given.
	names := make([]string, 0, len(params)+len(query)+len(body))
	for k := range params {
		names = append(names, k)
	}
	for k := range query {
		names = append(names, k)
	}
	for k := range body {
		names = append(names, k)
	}
	pick := len(ep.tools) - 1
	for i, in := range ep.inputs {
		if !slices.ContainsFunc(names, func(n string) bool { return in.Properties[n] == nil }) {
			pick = i
			break
		}
	}
	in := ep.inputs[pick]
	args := make(map[string]any, len(names))
	for k, v := range params {
		args[k] = convert(in.Properties[k], []string{v})
	}
	for k, vs := range query {
		if _, dup := args[k]; dup {
			return 0, nil, http.StatusBadRequest, fmt.Errorf("%s is given in the path; do not repeat it in the query", k)
		}
		args[k] = convert(in.Properties[k], vs)
	}
	for k, v := range body {
		if _, dup := args[k]; dup {
			return 0, nil, http.StatusBadRequest, fmt.Errorf("%s is given twice: in the URL and in the body", k)
		}
		args[k] = v
	}
	return pick, args, 0, nil
}

var errMediaType = errors.New("the request body must be JSON: send it with Content-Type: application/json")

// readJSONObject reads a POST body: nothing, or one JSON object. Numbers
// stay json.Number, so that large integers keep every digit.
func readJSONObject(r *http.Request) (map[string]any, error) {
	if r.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, errors.New("could not read the request body")
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" && !strings.HasSuffix(mt, "+json") {
			return nil, errMediaType
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the request body is not valid JSON: %v", err)
	}
	if dec.Decode(new(any)) != io.EOF {
		return nil, errors.New("the request body must be one JSON object, with nothing after it")
	}
	switch obj := v.(type) {
	case map[string]any:
		return obj, nil
	case nil:
		return nil, nil
	}
	return nil, errors.New("the request body must be a JSON object of the tool's arguments")
}

// convert turns the values of one query parameter into the argument the
// schema n asks for. What does not convert is passed on as the string
// given (or the list, when repeated), and the adapter says what is wrong
// with it. An array takes repeated parameters, one entry each, or one
// comma-separated value.
func convert(n *node, vs []string) any {
	if n == nil {
		return asGiven(vs)
	}
	if n.Type == "array" {
		if len(vs) == 1 {
			vs = strings.Split(vs[0], ",")
			for i := range vs {
				vs[i] = strings.TrimSpace(vs[i])
			}
		}
		out := make([]any, len(vs))
		for i, v := range vs {
			out[i] = scalar(n.Items, v)
		}
		return out
	}
	if len(vs) != 1 {
		return asGiven(vs)
	}
	return scalar(n, vs[0])
}

func asGiven(vs []string) any {
	if len(vs) == 1 {
		return vs[0]
	}
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}

func scalar(n *node, v string) any {
	if n == nil {
		return v
	}
	switch n.Type {
	case "integer":
		if i, err := strconv.ParseInt(v, 10, 64); err == nil {
			return i
		}
	case "number":
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
	case "boolean":
		switch strings.ToLower(v) {
		case "true", "1", "yes", "on":
			return true
		case "false", "0", "no", "off":
			return false
		}
	case "object", "array":
		var x any
		dec := json.NewDecoder(strings.NewReader(v))
		dec.UseNumber()
		if dec.Decode(&x) == nil {
			return x
		}
	}
	return v
}

// errorBody is every failure's JSON.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{errorDetail{code, msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	// Mail text is full of <, > and &: escaping them would only make the
	// output harder to read; nosniff keeps browsers from taking it as HTML.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		b.Reset()
		b.WriteString(`{"error":{"code":"internal","message":"internal error; the gateway's log has the details"}}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}
