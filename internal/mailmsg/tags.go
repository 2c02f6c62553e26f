package mailmsg

import (
	"slices"
	"strings"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// TagsHeader carries a message's tags: short labels that agents put on
// the mail they send and filter their inbox by.
const TagsHeader = "X-Mailbox-Tags"

// MaxTags is the most tags one message may carry.
const MaxTags = 10

// CheckTag refuses what is not a tag: 1 to 32 lower-case letters, digits,
// '.', '_' or '-'. The narrow alphabet keeps a tag safe in a header and
// exact in a search.
func CheckTag(tag string) error {
	if tag == "" || len(tag) > 32 {
		return mailerr.Newf(mailerr.BadInput, "tag %q must be 1 to 32 characters long", SanitizeLine(tag))
	}
	for _, r := range tag {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return mailerr.Newf(mailerr.BadInput, "tag %q may only hold lower-case letters, digits, '.', '_' and '-'", SanitizeLine(tag))
		}
	}
	return nil
}

// ParseTags splits an X-Mailbox-Tags value into its tags, lower-cased,
// skipping anything that is not a tag.
func ParseTags(v string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		f = strings.ToLower(f)
		if CheckTag(f) == nil {
			out = append(out, f)
		}
	}
	return out
}

// CheckTags checks the tags of a message (at most MaxTags, each a
// CheckTag tag) and returns them without repeats. The outbox's sending
// tools and the agents' messages share it.
func CheckTags(tags []string) ([]string, error) {
	if len(tags) > MaxTags {
		return nil, mailerr.Newf(mailerr.BadInput, "tags: at most %d tags (got %d)", MaxTags, len(tags))
	}
	var out []string
	for _, t := range tags {
		if err := CheckTag(t); err != nil {
			return nil, err
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}
