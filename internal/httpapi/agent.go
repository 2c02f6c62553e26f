package httpapi

import (
	"net/http"
	"strings"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
)

// HeaderAgent names the caller's agent within the mailbox; ?agent=NAME on
// the URL does the same for clients that cannot set headers.
const HeaderAgent = "X-Mailbox-Agent"

// agentParam is the query parameter naming the caller's agent.
const agentParam = "agent"

// withAgent puts the request's agent name (the x-mailbox-agent header, or
// ?agent=) into its context, after checking it is one: a bad name is a
// 400 that names where it came from, before any tool runs. A blank value
// counts as none (a client config whose variable is unset). Header and
// query naming two agents, or either given twice, is refused. With strip,
// ?agent= is removed from the URL, so that what comes next (the REST
// mirror, which turns query parameters into tool arguments) never sees it.
// Whether a token bound to an agent agrees is the tool layer's to check.
func withAgent(strip bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers := r.Header.Values(HeaderAgent)
		if len(headers) > 1 {
			httpError(w, http.StatusBadRequest, "send the x-mailbox-agent header once")
			return
		}
		var name string
		if len(headers) == 1 {
			name = strings.TrimSpace(headers[0])
			if name != "" && !credentials.ValidAgentName(name) {
				httpError(w, http.StatusBadRequest, "the x-mailbox-agent header is not a valid agent name: "+credentials.AgentNameRule)
				return
			}
		}
		query := r.URL.Query()
		if vs, ok := query[agentParam]; ok {
			if len(vs) > 1 {
				httpError(w, http.StatusBadRequest, "give ?agent= once")
				return
			}
			q := strings.TrimSpace(vs[0])
			switch {
			case q == "":
			case !credentials.ValidAgentName(q):
				httpError(w, http.StatusBadRequest, "?agent= on the URL is not a valid agent name: "+credentials.AgentNameRule)
				return
			case name != "" && q != name:
				httpError(w, http.StatusBadRequest, "the x-mailbox-agent header and ?agent= on the URL name different agents: send one")
				return
			default:
				name = q
			}
			if strip {
				query.Del(agentParam)
				r = r.Clone(r.Context())
				r.URL.RawQuery = query.Encode()
			}
		}
		if name != "" {
			r = r.WithContext(credentials.NewAgentContext(r.Context(), name))
		}
		next.ServeHTTP(w, r)
	})
}
