package config

import "testing"

func TestClientEnv(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want Client
	}{
		{"nothing set: the local gateway", nil, Client{URL: "http://127.0.0.1:3000"}},
		{"PORT and BIND_ADDRESS", []string{"PORT=8080", "BIND_ADDRESS=::1"}, Client{URL: "http://[::1]:8080"}},
		{"all set", []string{"MAILBOX_URL= https://gw.example.com/mcp ", "MAILBOX_TOKEN=mbx1.abc", "IMAP_USER=a@x", "IMAP_PASS= pw "},
			Client{URL: "https://gw.example.com/mcp", Token: "mbx1.abc", User: "a@x", Password: " pw "}},
		{"agent", []string{"MAILBOX_URL=http://gw:1", "MAILBOX_AGENT= backend "}, Client{URL: "http://gw:1", Agent: "backend"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := clientEnv(tt.env); got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
