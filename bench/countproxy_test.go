package main

import (
	"fmt"
	"strings"
	"testing"
)

func resp(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// TestRESPParser feeds the commands the Redis backend sends, whole and
// split at every byte, and checks the counts by kind.
func TestRESPParser(t *testing.T) {
	big := strings.Repeat("x", 3000)
	claim := []string{"evalsha", "abc", "4", "baton:{e}:lease", "baton:{e}:last", "baton:{e}:runs:a", "baton:{e}:runs:b", "7 ", "10", "a", "1", big, "b", "2", big}
	stream := resp("hello", "3") +
		resp("evalsha", "sha", "2", "baton:{e}:lease", "baton:{e}:token", "nonce", "{}", "5000", "baton:{e}:events") + // acquire
		resp("evalsha", "sha", "1", "baton:{e}:lease", "7 ", "5000") + // renew
		resp("eval", "local v = ...", "1", "baton:{e}:lease", "7 ", "5000") + // renew, after NOSCRIPT
		resp("evalsha", "sha", "1", "baton:{e}:lease", "nonce", "7", "baton:{e}:events") + // release
		resp(claim...) +
		resp("evalsha", "sha", "2", "baton:{e}:runs:a", "baton:{e}:runs:b", "p", big, "q", big) + // finish
		resp("get", "baton:{e}:lease") +
		resp("hmget", "baton:{e}:last", "a", "b") +
		resp("lrange", "baton:{e}:runs:a", "0", "9") +
		resp("subscribe", "baton:{e}:events") +
		resp("evalsha", "sha", "1", "baton:{e}:check", "baton:{e}:events") +
		resp("ping") + "PING\r\n"
	want := map[string]int64{kOther: 4, kWrite: 4, kRenew: 2, kRead: 3, kBlocking: 1}
	for _, step := range []int{len(stream), 1, 7, 4096} {
		p := &countProxy{counts: map[string]int64{}}
		r := &respParser{p: p}
		for i := 0; i < len(stream); i += step {
			r.feed([]byte(stream[i:min(i+step, len(stream))]))
		}
		got := p.Counts()
		for _, k := range kinds {
			if got[k] != want[k] {
				t.Errorf("step %d: %s = %d, want %d (all %v)", step, k, got[k], want[k], got)
			}
		}
	}
}
