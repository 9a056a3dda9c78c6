package readme_test

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestLinks checks every relative link of README.md, CHANGELOG.md and
// docs/**/*.md: the file or folder it names exists in the repository, and
// a #fragment names a heading of the Markdown file it points to (or of
// the same file), by GitHub's rules for heading anchors.
func TestLinks(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	files := []string{"README.md", "CHANGELOG.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	problems, n := checkLinks(root, files)
	for _, p := range problems {
		t.Error(p)
	}
	if n < 50 {
		t.Errorf("found only %d relative links in %d files; is the link pattern broken?", n, len(files))
	}
	t.Logf("%d relative links in %d files", n, len(files))
}

// TestLinks_ReportsBroken runs the checker on a small tree with one link
// of each kind, good and broken.
func TestLinks_ReportsBroken(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/page.md", "# Page\n\n## The `lock` command's flags\n\nBack to [the README](../README.md#intro).\n")
	write("README.md", strings.Join([]string{
		"# Intro",
		"",
		"[good](docs/page.md#the-lock-commands-flags), [folder](docs/), [self](#intro)",
		"[no file](docs/missing.md)",
		"[no heading](docs/page.md#the-lock-command)",
		"[no heading here](#outro)",
		"[web](https://example.com/x.md#y), [mail](mailto:a@example.com)",
		"`[in code](nowhere.md)`",
		"```",
		"[in a block](nowhere.md)",
		"```",
		"[ref]: docs/gone.md",
	}, "\n"))
	problems, n := checkLinks(root, []string{"README.md", "docs/page.md"})
	if n != 8 {
		t.Errorf("found %d relative links, want 8", n)
	}
	want := []string{
		"README.md:4: docs/missing.md",
		"README.md:5: docs/page.md#the-lock-command",
		"README.md:6: #outro",
		"README.md:12: docs/gone.md",
	}
	if len(problems) != len(want) {
		t.Fatalf("problems:\n%s\nwant %d, starting %q", strings.Join(problems, "\n"), len(want), want)
	}
	for i, w := range want {
		if !strings.HasPrefix(problems[i], w+": ") {
			t.Errorf("problem %d = %q, want it to start %q", i, problems[i], w)
		}
	}
}

// TestLinkAnchor checks heading anchors against GitHub's.
func TestLinkAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"1. Single starter":                                          "1-single-starter",
		"Library `Config` fields":                                    "library-config-fields",
		"Blue/green switch without stopping anything":                "bluegreen-switch-without-stopping-anything",
		"The application's health":                                   "the-applications-health",
		"Crash failover, timed from the kill":                        "crash-failover-timed-from-the-kill",
		"An HTTP job's `cancelled` means that baton stopped waiting": "an-http-jobs-cancelled-means-that-baton-stopped-waiting",
		"Jobs file (`baton run --config`)":                           "jobs-file-baton-run---config",
		"See [the page](x.md) **now**":                               "see-the-page-now",
		"snake_case and Ünïcode":                                     "snake_case-and-ünïcode",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

var (
	inlineLink = regexp.MustCompile(`\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:[ \t]*<?([^\s>]+)>?`)
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	atx        = regexp.MustCompile(`^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	setext     = regexp.MustCompile(`^ {0,3}(?:=+|-+)[ \t]*$`)
	htmlAnchor = regexp.MustCompile(`<a\s[^>]*(?:name|id)="([^"]+)"`)
	lineAnchor = regexp.MustCompile(`^L\d+(?:-L\d+)?$`)
	mdLink     = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag    = regexp.MustCompile(`<[^>]+>`)
)

// checkLinks checks the relative links of files (paths relative to
// root). It returns one line per broken link, "FILE:LINE: TARGET: why",
// and how many relative links it checked.
func checkLinks(root string, files []string) (problems []string, n int) {
	anchors := map[string]map[string]bool{} // by file, relative to root
	anchorsOf := func(rel string) (map[string]bool, error) {
		if a, ok := anchors[rel]; ok {
			return a, nil
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return nil, err
		}
		a := headingAnchors(string(b))
		anchors[rel] = a
		return a, nil
	}
	for _, file := range files {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", file, err))
			continue
		}
		text := proseOnly(string(b))
		var found [][]int
		for _, m := range inlineLink.FindAllStringSubmatchIndex(text, -1) {
			found = append(found, m[2:4])
		}
		for _, m := range refDef.FindAllStringSubmatchIndex(text, -1) {
			found = append(found, m[2:4])
		}
		for _, m := range found {
			target := text[m[0]:m[1]]
			if target == "" || scheme.MatchString(target) || strings.HasPrefix(target, "//") {
				continue
			}
			n++
			line := strings.Count(text[:m[0]], "\n") + 1
			bad := func(format string, args ...any) {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: %s", file, line, target, fmt.Sprintf(format, args...)))
			}
			path, frag, _ := strings.Cut(target, "#")
			if path, err = url.PathUnescape(path); err != nil {
				bad("%v", err)
				continue
			}
			if frag, err = url.PathUnescape(frag); err != nil {
				bad("%v", err)
				continue
			}
			rel := file
			if path != "" {
				if strings.HasPrefix(path, "/") {
					rel = filepath.Clean(strings.TrimPrefix(path, "/"))
				} else {
					rel = filepath.Join(filepath.Dir(file), path)
				}
				if rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
					bad("outside the repository")
					continue
				}
				if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
					bad("no such file")
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(rel, ".md") {
				if !lineAnchor.MatchString(frag) {
					bad("#%s on a file that is not Markdown", frag)
				}
				continue
			}
			a, err := anchorsOf(rel)
			if err != nil {
				bad("%v", err)
				continue
			}
			if !a[frag] {
				bad("no heading with anchor #%s in %s", frag, filepath.ToSlash(rel))
			}
		}
	}
	return problems, n
}

// proseOnly returns md with the contents of fenced code blocks and code
// spans blanked out, keeping every newline, so that offsets still give
// line numbers.
func proseOnly(md string) string {
	lines := strings.SplitAfter(md, "\n")
	fence := ""
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " ")
		if fence != "" {
			if closesFence(trimmed, fence) {
				fence = ""
			}
			lines[i] = blank(l)
			continue
		}
		if f := fenceOf(trimmed); f != "" && len(l)-len(trimmed) <= 3 {
			fence = f
			lines[i] = blank(l)
			continue
		}
		lines[i] = blankCodeSpans(l)
	}
	return strings.Join(lines, "")
}

// closesFence reports whether l, without its indent, closes the fenced
// code block that fence opened.
func closesFence(l, fence string) bool {
	return strings.HasPrefix(l, fence) && strings.TrimSpace(strings.TrimLeft(l, fence[:1])) == ""
}

// fenceOf returns the opening fence of a fenced code block, if l opens
// one: three or more backticks or tildes.
func fenceOf(l string) string {
	for _, c := range []string{"`", "~"} {
		n := len(l) - len(strings.TrimLeft(l, c))
		if n >= 3 {
			return strings.Repeat(c, n)
		}
	}
	return ""
}

// blank replaces every character of l but a newline by a space.
func blank(l string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' {
			return r
		}
		return ' '
	}, l)
}

// blankCodeSpans blanks the contents of l's code spans: a run of n
// backticks up to the next run of exactly n.
func blankCodeSpans(l string) string {
	b := []byte(l)
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		j := backticksEnd(b, i)
		open := j - i
		end := -1
		for k := j; k < len(b); {
			if b[k] != '`' {
				k++
				continue
			}
			m := backticksEnd(b, k)
			if m-k == open {
				end = k
				break
			}
			k = m
		}
		if end < 0 {
			i = j
			continue
		}
		for k := j; k < end; k++ {
			b[k] = 'x'
		}
		i = end + open
	}
	return string(b)
}

// backticksEnd returns the end of the run of backticks at b[i:].
func backticksEnd(b []byte, i int) int {
	for i < len(b) && b[i] == '`' {
		i++
	}
	return i
}

// headingAnchors returns the anchors GitHub gives the headings of md
// (a repeated one gets -1, -2, ...), and the names of HTML anchors.
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	add := func(heading string) {
		a := anchor(heading)
		if k := seen[a]; k > 0 {
			seen[a]++
			a += "-" + strconv.Itoa(k)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	lines := strings.Split(md, "\n")
	fence := ""
	prev := ""
	for _, l := range lines {
		trimmed := strings.TrimLeft(l, " ")
		if fence != "" {
			if closesFence(trimmed, fence) {
				fence = ""
			}
			prev = ""
			continue
		}
		if f := fenceOf(trimmed); f != "" {
			fence, prev = f, ""
			continue
		}
		switch {
		case atx.MatchString(l):
			add(atx.FindStringSubmatch(l)[1])
			prev = ""
			continue
		case setext.MatchString(l) && strings.TrimSpace(prev) != "" && !strings.HasPrefix(strings.TrimSpace(prev), "|"):
			add(strings.TrimSpace(prev))
			prev = ""
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
		prev = l
	}
	return out
}

// anchor is GitHub's anchor of a heading: its text as rendered (links
// and images by their text, no code backticks, emphasis or HTML tags),
// in lower case, with each space turned into a hyphen and every other
// character that is not a letter, a digit, a hyphen or an underscore
// dropped.
func anchor(heading string) string {
	text := mdLink.ReplaceAllString(heading, "$1")
	text = htmlTag.ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
