package testenv

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// WaitUntil polls cond every 10 ms and fails t when it is not true within
// 10 s; what names the awaited state in the failure.
func WaitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s within 10 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Post sends POST url with an Authorization header (none when auth is
// empty) and returns the status code and body; a transport error fails t.
func Post(t testing.TB, url, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
