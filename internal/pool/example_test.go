package pool_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
)

// session stands for a logged-in IMAP connection.
type session struct{ n int }

func (s *session) Close() error { fmt.Printf("session %d closed\n", s.n); return nil }

func Example() {
	p := pool.New(pool.Config{MaxTotal: 50, MaxPerGroup: 4},
		func(ctx context.Context, s *session) error { return nil }, // e.g. NOOP
		nil,
		pool.WithGracefulClose(func(ctx context.Context, s *session) {
			fmt.Printf("session %d logged out\n", s.n) // e.g. LOGOUT
		}))

	dialled := 0
	dial := func(ctx context.Context) (*session, error) { // dial and LOGIN
		dialled++
		return &session{n: dialled}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for range 2 {
		// Conn would be credentials.Key(host) (host, user and password), Group
		// the account (the user name as the server folds it).
		lease, err := p.Get(ctx, pool.Key{Group: "alice@example.com", Conn: "3f1c…"}, dial)
		if errors.Is(err, pool.ErrBusy) {
			fmt.Println("server busy, retry")
			return
		} else if err != nil {
			fmt.Println("login failed:", err)
			return
		}
		fmt.Printf("using session %d, reused %v\n", lease.Conn().n, lease.Reused())
		lease.Release() // or lease.Discard() after an error
	}
	_ = p.Close(ctx)
	// Output:
	// using session 1, reused false
	// using session 1, reused true
	// session 1 logged out
	// session 1 closed
}
