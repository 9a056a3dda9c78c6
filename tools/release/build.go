package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Target is a platform a release builds for.
type Target struct{ OS, Arch string }

func (t Target) String() string { return t.OS + "_" + t.Arch }

// Plan is which targets get an archive and SBOM, and which Linux ones a
// .deb, an .rpm and an image.
type Plan struct {
	Archives []Target
	Packages []string // Linux architectures: .deb and image; .rpm if RPM
	RPM      bool
}

var (
	// Dist is `make dist`: every artifact.
	Dist = Plan{
		Archives: []Target{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}},
		Packages: []string{"amd64", "arm64"},
		RPM:      true,
	}
	// Single is what `make test` builds and checks, on the same path.
	Single = Plan{Archives: []Target{{"linux", "amd64"}}, Packages: []string{"amd64"}}
)

// Artifacts are the paths a build wrote.
type Artifacts struct {
	Binaries map[Target]string // the stamped binaries (a work folder)
	Archives map[Target]string
	SBOMs    map[Target]string
	Debs     map[string]string // by architecture
	RPMs     map[string]string
	Images   map[string]string // docker-load tarballs, by architecture
	Layout   string            // the OCI layout folder
	Sums     string
}

// Files lists the artifacts a release publishes, sorted.
func (a *Artifacts) Files() []string {
	var l []string
	for _, m := range []map[Target]string{a.Archives, a.SBOMs} {
		for _, p := range m {
			l = append(l, p)
		}
	}
	for _, m := range []map[string]string{a.Debs, a.RPMs, a.Images} {
		for _, p := range m {
			l = append(l, p)
		}
	}
	sort.Strings(l)
	if a.Sums != "" {
		l = append(l, a.Sums)
	}
	return l
}

// Build builds plan's artifacts into out (emptied first), one step per
// artifact, logging each step to log.
func Build(m Meta, plan Plan, out string, log io.Writer) (*Artifacts, error) {
	work := filepath.Join(out, ".work")
	if err := emptyOut(out, work); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	a := &Artifacts{Binaries: map[Target]string{}, Archives: map[Target]string{}, SBOMs: map[Target]string{},
		Debs: map[string]string{}, RPMs: map[string]string{}, Images: map[string]string{}}
	step := func(what string, f func() error) error {
		fmt.Fprintf(log, "release: %s\n", what)
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	for _, t := range plan.Archives {
		bin := filepath.Join(work, t.String(), "baton")
		name := fmt.Sprintf("baton_%s_%s", m.Plain(), t)
		a.Binaries[t], a.Archives[t] = bin, filepath.Join(out, name+".tar.gz")
		a.SBOMs[t] = filepath.Join(out, name+".sbom.cdx.json")
		if err := step("build "+t.String(), func() error { return GoBuild(m, t, bin) }); err != nil {
			return nil, err
		}
		if err := step("archive "+filepath.Base(a.Archives[t]), func() error { return Archive(m, name, bin, a.Archives[t]) }); err != nil {
			return nil, err
		}
		if err := step("sbom "+filepath.Base(a.SBOMs[t]), func() error { return SBOM(m, bin, a.SBOMs[t]) }); err != nil {
			return nil, err
		}
	}
	formats := []string{"deb"}
	if plan.RPM {
		formats = append(formats, "rpm")
	}
	var images []ArchImage
	for _, arch := range plan.Packages {
		bin, ok := a.Binaries[Target{"linux", arch}]
		if !ok {
			return nil, fmt.Errorf("packages for %s: the plan builds no linux/%s archive", arch, arch)
		}
		for _, format := range formats {
			var p string
			if err := step(format+" "+arch, func() (err error) { p, err = Package(m, format, arch, bin, out); return err }); err != nil {
				return nil, err
			}
			map[string]map[string]string{"deb": a.Debs, "rpm": a.RPMs}[format][arch] = p
		}
		var img ArchImage
		a.Images[arch] = filepath.Join(out, fmt.Sprintf("baton_%s_linux_%s.image.tar", m.Plain(), arch))
		if err := step("image "+filepath.Base(a.Images[arch]), func() (err error) {
			img, err = ImageFor(m, arch, bin)
			if err != nil {
				return err
			}
			return WriteDockerTarball(m, img, a.Images[arch])
		}); err != nil {
			return nil, err
		}
		images = append(images, img)
	}
	if len(images) > 0 {
		a.Layout = filepath.Join(out, "oci")
		if err := step("OCI layout oci/", func() error { return WriteLayout(m, images, a.Layout) }); err != nil {
			return nil, err
		}
	}
	a.Sums = filepath.Join(out, "SHA256SUMS")
	if err := step("SHA256SUMS", func() error { return Sums(a.Files(), a.Sums) }); err != nil {
		return nil, err
	}
	return a, nil
}

// emptyOut empties out, which must be missing, empty, or a folder an
// earlier build wrote (it holds work): never a folder of something else.
func emptyOut(out, work string) error {
	entries, err := os.ReadDir(out)
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(entries) == 0 {
		return nil
	}
	if err != nil {
		return fmt.Errorf("out %s: %w", out, err)
	}
	if _, err := os.Stat(work); err != nil {
		return fmt.Errorf("out %s: not empty, and not a folder this program wrote (no %s): refusing to empty it", out, filepath.Base(work))
	}
	return os.RemoveAll(out)
}

// GoBuild builds cmd/baton for t, static, with the version, commit and
// date stamped in.
func GoBuild(m Meta, t Target, bin string) error {
	const pkg = "github.com/batonhq/baton/internal/cli"
	ldflags := fmt.Sprintf("-s -w -X %s.stampVersion=%s -X %s.stampCommit=%s -X %s.stampDate=%s",
		pkg, m.Version, pkg, m.Commit, pkg, m.Date.Format("2006-01-02T15:04:05Z"))
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin, "./cmd/baton")
	cmd.Dir = m.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+t.OS, "GOARCH="+t.Arch, "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, stderr.String())
	}
	return nil
}

// Archive writes name.tar.gz: a folder name holding the binary, the
// licence and the README, each file's time the commit's.
func Archive(m Meta, name, bin, dst string) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	files := []struct {
		src, name string
		mode      int64
	}{{bin, "baton", 0o755}, {filepath.Join(m.Root, "LICENSE"), "LICENSE", 0o644}, {filepath.Join(m.Root, "README.md"), "README.md", 0o644}}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, ModTime: m.Date, Format: tar.FormatPAX}); err != nil {
		return err
	}
	for _, file := range files {
		data, err := os.ReadFile(file.src)
		if err != nil {
			return err
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: name + "/" + file.name, Mode: file.mode, Size: int64(len(data)), ModTime: m.Date, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// Sums writes SHA256SUMS in the format `sha256sum -c` reads: each file
// by its base name.
func Sums(files []string, dst string) error {
	var b strings.Builder
	for _, p := range files {
		if p == dst {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), filepath.Base(p))
	}
	return os.WriteFile(dst, []byte(b.String()), 0o644)
}
