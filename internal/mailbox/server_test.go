package mailbox

import "testing"

// Where names go on a server with a personal prefix (Cyrus, Courier:
// "INBOX.") and without one (Dovecot, the demo).
func TestNamespacePlace(t *testing.T) {
	cyrus := Namespace{Prefix: "INBOX.", Delim: '.', Others: []string{"user.", "#shared."}}
	flat := Namespace{Delim: '/'}
	for _, tc := range []struct {
		ns         Namespace
		in, placed string
		display    string
	}{
		{cyrus, "Agents", "INBOX.Agents", "Agents"},
		{cyrus, "Agents.beta", "INBOX.Agents.beta", "Agents.beta"},
		{cyrus, "INBOX.Agents", "INBOX.Agents", "Agents"},
		{cyrus, "inbox.Sent", "inbox.Sent", "Sent"},
		{cyrus, "INBOX", "INBOX", ""},
		{cyrus, "inbox", "INBOX", ""},
		{cyrus, "", "INBOX", ""},
		{cyrus, "INBOXES", "INBOX.INBOXES", "INBOXES"},
		{cyrus, "user.bob.Shared", "user.bob.Shared", ""},
		{cyrus, "#shared.team", "#shared.team", ""},
		{cyrus, "Interop Ü & Co", "INBOX.Interop Ü & Co", "Interop Ü & Co"},
		{flat, "Agents/beta", "Agents/beta", ""},
		{flat, "INBOX", "INBOX", ""},
	} {
		if got := tc.ns.Place(tc.in); got != tc.placed {
			t.Errorf("Place(%q) with prefix %q = %q, want %q", tc.in, tc.ns.Prefix, got, tc.placed)
		}
		if got := tc.ns.Display(tc.ns.Place(tc.in)); got != tc.display {
			t.Errorf("Display(%q) = %q, want %q", tc.ns.Place(tc.in), got, tc.display)
		}
	}
}

// Roles from the usual names where the server marks no special folders.
func TestRoleByName(t *testing.T) {
	courier := Namespace{Prefix: "INBOX.", Delim: '.'}
	flat := Namespace{Delim: '/'}
	for _, tc := range []struct {
		ns         Namespace
		name, role string
	}{
		{courier, "INBOX.Sent", "sent"}, {courier, "INBOX.sent items", "sent"}, {courier, "INBOX.Sent Messages", "sent"},
		{courier, "INBOX.Drafts", "drafts"}, {courier, "INBOX.TRASH", "trash"}, {courier, "INBOX.Deleted Items", "trash"},
		{courier, "INBOX.Junk", "junk"}, {courier, "INBOX.spam", "junk"}, {courier, "INBOX.Archive", "archive"},
		{courier, "INBOX.Projects.Sent", ""}, {courier, "INBOX.Sentinel", ""}, {courier, "INBOX", ""},
		{flat, "Sent", "sent"}, {flat, "Trash", "trash"}, {flat, "Work/Trash", ""},
	} {
		if got := tc.ns.roleByName(tc.name); got != tc.role {
			t.Errorf("roleByName(%q) = %q, want %q", tc.name, got, tc.role)
		}
	}
}
