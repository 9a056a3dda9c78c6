// Command release builds baton's release artifacts from the repository,
// one step per artifact: a tar.gz archive per target with the version,
// commit and date stamped in, a CycloneDX SBOM per archive, a .deb and an
// .rpm per Linux architecture (nfpm), an OCI image per Linux architecture
// built from scratch (go-containerregistry: an OCI layout holding an index
// of them, and a tarball each that `docker load` reads), and SHA256SUMS.
//
//	go run . [-out DIR] [-version vX.Y.Z] [-single]
//
// -single builds the linux/amd64 archive, its .deb and its image only:
// `make test` checks those (release_test.go); `make dist` builds all.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

func main() {
	out := flag.String("out", "", "the folder to write the artifacts to (default: <repo>/dist)")
	version := flag.String("version", "", "the version to stamp, vX.Y.Z (default: the repository's VERSION file)")
	single := flag.Bool("single", false, "build the linux/amd64 archive, .deb and image only")
	flag.Parse()

	root, err := repoRoot()
	if err != nil {
		fail(err)
	}
	m, err := ReadMeta(root, *version)
	if err != nil {
		fail(err)
	}
	if *out == "" {
		*out = filepath.Join(root, "dist")
	}
	start := time.Now()
	plan := Dist
	if *single {
		plan = Single
	}
	arts, err := Build(m, plan, *out, os.Stderr)
	if err != nil {
		fail(err)
	}
	for _, a := range arts.Files() {
		fi, err := os.Stat(a)
		if err != nil {
			fail(err)
		}
		fmt.Printf("%10d  %s\n", fi.Size(), a)
	}
	fmt.Printf("release: %s (%s) in %s: %s\n", m.Version, m.Commit, time.Since(start).Round(time.Second), *out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "release:", err)
	os.Exit(1)
}

// repoRoot is the repository this program is in: two folders up from the
// working directory (tools/release), where go.mod names the main module.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root := filepath.Clean(filepath.Join(wd, "..", ".."))
	if _, err := os.Stat(filepath.Join(root, "cmd", "baton")); err != nil {
		return "", fmt.Errorf("run from tools/release in the repository: %w", err)
	}
	return root, nil
}
