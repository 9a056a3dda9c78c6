package envtest

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
	if !poll(10*time.Second, 10*time.Millisecond, cond) {
		t.Fatalf("not %s within 10 s", what)
	}
}

// WaitFor polls cond every 20 ms and fails t when it is not true within
// d; what names the awaited event in the failure ("timed out after D
// waiting for WHAT").
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(d, 20*time.Millisecond, cond) {
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// poll calls cond every period until it returns true, and reports
// whether it did so before d had passed.
func poll(d, period time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(period)
	}
	return true
}

// Post sends POST url with an Authorization header (none when auth is
// empty) and returns the status code and body; a transport error fails t.
func Post(t testing.TB, url, auth string) (int, string) {
	t.Helper()
	header := http.Header{}
	if auth != "" {
		header.Set("Authorization", auth)
	}
	return Request(t, http.MethodPost, url, header)
}

// Request sends method url with header and returns the status code and
// body; a transport error fails t.
func Request(t testing.TB, method, url string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
