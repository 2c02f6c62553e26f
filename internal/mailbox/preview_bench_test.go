package mailbox

import (
	"strings"
	"testing"
)

// previewBodies are list previews' typical inputs: the first bytes of a
// plain-text body, short and at the fetch's limit, and a reply whose
// quote follows an attribution line.
func previewBodies() map[string][]byte {
	words := strings.Fields("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua report meeting invoice")
	var b strings.Builder
	for i := 0; b.Len() < 4*previewBytes; i++ {
		b.WriteString(words[i*7%len(words)])
		if i%12 == 11 {
			b.WriteString("\r\n")
		} else {
			b.WriteByte(' ')
		}
	}
	long := b.String()
	reply := "Thanks, that works for me.\r\n\r\nOn Monday, Bob wrote:\r\n" + strings.Repeat("> "+long[:70]+"\r\n", 30)
	return map[string][]byte{
		"short": []byte(long[:600]),
		"full":  []byte(long[:previewBytes]),
		"reply": []byte(reply[:min(len(reply), previewBytes)]),
	}
}

func BenchmarkPreview(b *testing.B) {
	bs := leaf("text/plain", withParams("charset", "us-ascii"))
	for name, head := range previewBodies() {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				preview(bs, head)
			}
		})
	}
}
