package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func meta(t *testing.T) Meta {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	m, err := ReadMeta(root, "")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// need skips when a tool is missing, unless BATON_TEST_REQUIRE is set.
func need(t *testing.T, tool string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		if os.Getenv("BATON_TEST_REQUIRE") != "" {
			t.Fatalf("%s: %v", tool, err)
		}
		t.Skipf("%s: %v", tool, err)
	}
}

// The single-target build, on the code path of `make dist`: the archive's
// binary, the .deb's installed binary and the image's entrypoint run as
// its user each print the stamped version; the image goes through a
// registry and back unchanged.
func TestSingle(t *testing.T) {
	m := meta(t)
	out := t.TempDir()
	start := time.Now()
	var steps bytes.Buffer
	a, err := Build(m, Single, out, &steps)
	if err != nil {
		t.Fatalf("%v\n%s", err, steps.String())
	}
	t.Logf("built in %v", time.Since(start).Round(time.Second))
	for _, f := range a.Files() {
		if fi, err := os.Stat(f); err == nil {
			t.Logf("%10d %s", fi.Size(), filepath.Base(f))
		}
	}
	want := "baton " + m.Version + " commit " + m.Commit + " built " + m.Date.Format("2006-01-02T15:04:05Z") + "\n"
	run := func(t *testing.T, cmd *exec.Cmd) {
		t.Helper()
		for _, arg := range []string{"version", "--version"} {
			c := *cmd
			c.Args = append(append([]string{}, cmd.Args...), arg)
			out, err := c.CombinedOutput()
			if err != nil || string(out) != want {
				t.Errorf("%s %s: %v, %q; want %q", cmd.Path, arg, err, out, want)
			}
		}
	}

	t.Run("archive", func(t *testing.T) {
		dir := t.TempDir()
		untar(t, a.Archives[Target{"linux", "amd64"}], true, dir)
		run(t, exec.Command(filepath.Join(dir, "baton_"+m.Plain()+"_linux_amd64", "baton")))
		var bom struct {
			Metadata struct {
				Component struct{ Name, Version string }
			}
			Components []struct{ Name, Version string }
		}
		raw, err := os.ReadFile(a.SBOMs[Target{"linux", "amd64"}])
		if err == nil {
			err = json.Unmarshal(raw, &bom)
		}
		if c := bom.Metadata.Component; err != nil || c.Name != "github.com/batonhq/baton" || c.Version != m.Version || len(bom.Components) < 10 {
			t.Errorf("SBOM: %v, component %+v, %d components", err, c, len(bom.Components))
		}
		sums, err := os.ReadFile(a.Sums)
		if err != nil || !strings.Contains(string(sums), "  "+filepath.Base(a.Archives[Target{"linux", "amd64"}])+"\n") {
			t.Errorf("SHA256SUMS: %v\n%s", err, sums)
		}
	})

	t.Run("deb", func(t *testing.T) {
		need(t, "dpkg-deb")
		root, ctrl := t.TempDir(), t.TempDir()
		deb := a.Debs["amd64"]
		for _, args := range [][]string{{"-x", deb, root}, {"-e", deb, ctrl}} {
			if out, err := exec.Command("dpkg-deb", args...).CombinedOutput(); err != nil {
				t.Fatalf("dpkg-deb %v: %v\n%s", args, err, out)
			}
		}
		run(t, exec.Command(filepath.Join(root, "usr", "bin", "baton")))
		unit, err := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system/baton@.service"))
		src, _ := os.ReadFile(filepath.Join(m.Root, "docs/deploy/baton@.service"))
		if err != nil || !bytes.Equal(unit, src) {
			t.Errorf("baton@.service: %v, or not docs/deploy/baton@.service", err)
		}
		if conf, err := os.ReadFile(filepath.Join(ctrl, "conffiles")); err != nil || string(conf) != "/etc/baton/example.yaml\n" {
			t.Errorf("conffiles: %v %q, want /etc/baton/example.yaml", err, conf)
		}
	})

	t.Run("image", func(t *testing.T) {
		img := layoutImage(t, m, a.Layout)
		checkImage(t, m, img)
		tag, err := name.NewTag(m.Tag())
		if err != nil {
			t.Fatal(err)
		}
		loaded, err := tarball.ImageFromPath(a.Images["amd64"], &tag)
		if err != nil {
			t.Fatal(err)
		}
		sameContent(t, img, loaded)
		runImage(t, loaded, run)
		pushPull(t, m, img, a.Layout)
	})
}

// layoutImage is the linux/amd64 image of the OCI layout's index, the
// index named by the version.
func layoutImage(t *testing.T, m Meta, dir string) v1.Image {
	t.Helper()
	outer, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	om, err := outer.IndexManifest()
	if err != nil || len(om.Manifests) != 1 || om.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != m.Version {
		t.Fatalf("OCI layout index: %v %+v", err, om)
	}
	idx, err := outer.ImageIndex(om.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 || im.Manifests[0].Platform == nil || im.Manifests[0].Platform.Architecture != "amd64" {
		t.Fatalf("OCI layout: %v %+v, want one image, for linux/amd64", err, im)
	}
	if an := im.Annotations; an["org.opencontainers.image.version"] != m.Version {
		t.Errorf("index annotations %v: want version %s", an, m.Version)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// checkImage checks the image's config, and its version and source in
// its annotations and its config's labels.
func checkImage(t *testing.T, m Meta, img v1.Image) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if c := cf.Config; c.User != "65532:65532" || strings.Join(c.Entrypoint, " ") != "/usr/bin/baton" || cf.Architecture != "amd64" {
		t.Errorf("image config: user %q, entrypoint %q, arch %q", c.User, c.Entrypoint, cf.Architecture)
	}
	mf, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	for what, an := range map[string]map[string]string{"annotations": mf.Annotations, "labels": cf.Config.Labels} {
		if an["org.opencontainers.image.version"] != m.Version || an["org.opencontainers.image.source"] != Source {
			t.Errorf("image %s %v: want version %s and source %s", what, an, m.Version, Source)
		}
	}
}

// sameContent checks that the `docker load` tarball holds the layout's
// image: the same config and layers (its manifest is Docker's, which has
// no annotations, so its digest differs).
func sameContent(t *testing.T, img, loaded v1.Image) {
	t.Helper()
	digests := func(img v1.Image) []string {
		c, err := img.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		l := []string{c.String()}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		for _, layer := range layers {
			d, err := layer.Digest()
			if err != nil {
				t.Fatal(err)
			}
			l = append(l, d.String())
		}
		return l
	}
	if a, b := digests(img), digests(loaded); strings.Join(a, " ") != strings.Join(b, " ") {
		t.Errorf("docker-load tarball: config and layers %v, the OCI layout's %v", b, a)
	}
}

// runImage unpacks the image's layers and runs its entrypoint as its
// user: as root, chrooted into the layers with the user's uid and gid;
// as another user, as that user (not root either way).
func runImage(t *testing.T, img v1.Image, run func(*testing.T, *exec.Cmd)) {
	cf, _ := img.ConfigFile()
	rootfs := t.TempDir()
	if err := os.Chmod(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	untarReader(t, rc, os.Geteuid() == 0, rootfs)
	uid, gid, ok := strings.Cut(cf.Config.User, ":")
	u, err1 := strconv.Atoi(uid)
	g, err2 := strconv.Atoi(gid)
	if !ok || err1 != nil || err2 != nil || u == 0 {
		t.Fatalf("image user %q: want a numeric uid:gid, not root", cf.Config.User)
	}
	if passwd, err := os.ReadFile(filepath.Join(rootfs, "etc/passwd")); err != nil || !strings.Contains(string(passwd), ":"+uid+":"+gid+":") {
		t.Errorf("/etc/passwd: %v, no entry for %s", err, cf.Config.User)
	}
	if fi, err := os.Stat(filepath.Join(rootfs, "etc/ssl/certs/ca-certificates.crt")); err != nil || fi.Size() == 0 || fi.Mode().Perm() != 0o644 {
		t.Errorf("CA certificates: %v", err)
	}
	entry := cf.Config.Entrypoint[0]
	if os.Geteuid() != 0 {
		t.Logf("not root: running %s as uid %d without a chroot", entry, os.Geteuid())
		run(t, exec.Command(filepath.Join(rootfs, entry)))
		return
	}
	cmd := exec.Command(entry)
	cmd.Dir = "/"
	cmd.Env = cf.Config.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: rootfs, Credential: &syscall.Credential{Uid: uint32(u), Gid: uint32(g)}}
	run(t, cmd)
}

// pushPull pushes the image to a registry served on loopback, pulls it
// back and compares digests; then the OCI layout's index, as `crane push
// dist/oci REF` does, and pulls the image for linux/amd64 out of it.
func pushPull(t *testing.T, m Meta, img v1.Image, dir string) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/batonhq/baton:" + m.Version
	if err := crane.Push(img, ref, crane.Insecure); err != nil {
		t.Fatalf("crane push %s: %v", ref, err)
	}
	pulled, err := crane.Pull(ref, crane.Insecure)
	if err != nil {
		t.Fatalf("crane pull %s: %v", ref, err)
	}
	want, _ := img.Digest()
	got, err := pulled.Digest()
	listed, err2 := crane.Digest(ref, crane.Insecure)
	if err != nil || err2 != nil || got != want || listed != want.String() {
		t.Errorf("pulled %v (%v), registry says %s (%v); pushed %v", got, err, listed, err2, want)
	}

	outer, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	om, err := outer.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	idx, err := outer.ImageIndex(om.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	multi := strings.TrimSuffix(ref, m.Version) + "multi-" + m.Version
	r, err := name.ParseReference(multi, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(r, idx); err != nil {
		t.Fatalf("push the layout's index to %s: %v", multi, err)
	}
	pulled, err = crane.Pull(multi, crane.Insecure, crane.WithPlatform(&v1.Platform{OS: "linux", Architecture: "amd64"}))
	if err != nil {
		t.Fatalf("crane pull %s: %v", multi, err)
	}
	if got, err := pulled.Digest(); err != nil || got != want {
		t.Errorf("pulled %v for linux/amd64 from the index (%v); the image is %v", got, err, want)
	}
}

// The deploy manifests name the image the release builds: Image, tagged
// with the VERSION the release stamps, and no other baton image.
func TestManifestsNameTheReleaseImage(t *testing.T) {
	m := meta(t)
	ref := regexp.MustCompile(`[\w.:-]+(/[\w.-]+)*/baton:[\w.-]+`)
	for _, f := range []string{"kubernetes.yaml", "kube-run.yaml", "kube-lock.yaml"} {
		raw, err := os.ReadFile(filepath.Join(m.Root, "docs", "deploy", f))
		if err != nil {
			t.Fatal(err)
		}
		refs := ref.FindAllString(string(raw), -1)
		if len(refs) == 0 {
			t.Errorf("%s names no baton image; want %s", f, m.Tag())
		}
		for _, r := range refs {
			if r != m.Tag() {
				t.Errorf("%s names %s; the release builds %s", f, r, m.Tag())
			}
		}
	}
}
