package httpapi

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// page is the status page served at /: one file with inline CSS and
// JavaScript, no external assets. Its script renders /status every second
// and only ever sets text (textContent), so nothing a node reports is
// parsed as HTML.
//
//go:embed page.html
var page []byte

// pageCSP allows exactly the page's own inline style and script (by hash)
// and requests to this node; nothing else loads.
var pageCSP = func() string {
	var hashes []string
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`(?s)<style>(.*?)</style>`),
		regexp.MustCompile(`(?s)<script>(.*?)</script>`),
	} {
		m := re.FindSubmatch(page)
		if m == nil {
			panic("page.html: no " + re.String())
		}
		sum := sha256.Sum256(m[1])
		hashes = append(hashes, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
	}
	return strings.Join([]string{
		"default-src 'none'",
		"style-src " + hashes[0],
		"script-src " + hashes[1],
		"connect-src 'self'",
		"img-src 'self'",
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	}, "; ")
}()

// handlePage: GET /, the status page.
func (s *server) handlePage(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", fmt.Sprint(len(page)))
	_, _ = w.Write(page)
}
