package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Image is the repository the release publishes the image to. The deploy
// manifests name it with the release's tag (release_test.go checks).
const Image = "ghcr.io/batonhq/baton"

// Source is the project's source, in the image's annotations and the
// packages' homepage.
const Source = "https://github.com/batonhq/baton"

// Meta is what a release stamps: its version (vX.Y.Z), the commit it was
// built from, and that commit's date, which every artifact's file times
// take, so that the same commit builds the same bytes.
type Meta struct {
	Root    string // the repository
	Version string
	Commit  string
	Date    time.Time
}

// Tag is the image reference the release writes: Image:Version.
func (m Meta) Tag() string { return Image + ":" + m.Version }

// Plain is the version without its "v", as file names and packages have it.
func (m Meta) Plain() string { return strings.TrimPrefix(m.Version, "v") }

var semver = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// ReadMeta reads the version (version, else the VERSION file at the
// root) and, from git, the commit and its date. Outside a git checkout
// the commit is "unknown" and the date SOURCE_DATE_EPOCH or now.
func ReadMeta(root, version string) (Meta, error) {
	m := Meta{Root: root, Version: version}
	if m.Version == "" {
		raw, err := os.ReadFile(filepath.Join(root, "VERSION"))
		if err != nil {
			return m, fmt.Errorf("version: %w", err)
		}
		m.Version = strings.TrimSpace(string(raw))
	}
	if !semver.MatchString(m.Version) {
		return m, fmt.Errorf("version %q: want vMAJOR.MINOR.PATCH", m.Version)
	}
	out, err := exec.Command("git", "-C", root, "log", "-1", "--format=%H %ct").Output()
	if err != nil {
		m.Commit, m.Date = "unknown", time.Now().UTC().Truncate(time.Second)
		if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
			sec, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return m, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", s, err)
			}
			m.Date = time.Unix(sec, 0).UTC()
		}
		return m, nil
	}
	hash, ct, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	sec, err := strconv.ParseInt(ct, 10, 64)
	if err != nil {
		return m, fmt.Errorf("git log: commit time %q: %w", ct, err)
	}
	m.Commit, m.Date = hash, time.Unix(sec, 0).UTC()
	// A tree with changes git has not committed is not that commit.
	if err := exec.Command("git", "-C", root, "diff", "--quiet", "HEAD", "--").Run(); err != nil {
		m.Commit += "-dirty"
	}
	return m, nil
}
