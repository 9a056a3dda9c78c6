package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: not root, by number (a pod's runAsNonRoot checks
// the number), named in /etc/passwd for tools that look it up.
const (
	UID = 65532
	GID = 65532
)

// CACerts is where the image's CA certificates come from: the build
// machine's bundle, at the path Go's crypto/x509 reads on Linux.
var CACerts = "/etc/ssl/certs/ca-certificates.crt"

// ArchImage is one architecture's image.
type ArchImage struct {
	Arch  string
	Image v1.Image
}

// annotations label an image and the index: version, source, revision.
func annotations(m Meta) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    "baton",
		"org.opencontainers.image.version":  m.Version,
		"org.opencontainers.image.source":   Source,
		"org.opencontainers.image.url":      Source,
		"org.opencontainers.image.revision": m.Commit,
		"org.opencontainers.image.created":  m.Date.Format(time.RFC3339),
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
}

// ImageFor builds the image for linux/arch from scratch, pulling
// nothing: a base layer (/etc/passwd and /etc/group with the user, the
// CA certificates, /tmp) and a layer with the static binary at
// /usr/bin/baton, its entrypoint, run as UID:GID.
func ImageFor(m Meta, arch, bin string) (ArchImage, error) {
	certs, err := os.ReadFile(CACerts)
	if err != nil {
		return ArchImage{}, fmt.Errorf("CA certificates: %w", err)
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return ArchImage{}, err
	}
	base, err := layer(m, []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, GID))},
		{name: "etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", GID))},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: UID, gid: GID},
		{name: "tmp/", mode: 0o1777},
	})
	if err != nil {
		return ArchImage{}, err
	}
	app, err := layer(m, []entry{
		{name: "usr/", mode: 0o755},
		{name: "usr/bin/", mode: 0o755},
		{name: "usr/bin/baton", mode: 0o755, data: binary},
	})
	if err != nil {
		return ArchImage{}, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), base, app)
	if err != nil {
		return ArchImage{}, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return ArchImage{}, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: m.Date}
	cf.Author = Source
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", UID, GID),
		Entrypoint: []string{"/usr/bin/baton"},
		Cmd:        []string{"--help"},
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/nonroot"},
		WorkingDir: "/",
		Labels:     annotations(m),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return ArchImage{}, err
	}
	return ArchImage{Arch: arch, Image: mutate.Annotations(img, annotations(m)).(v1.Image)}, nil
}

type entry struct {
	name     string // a folder's ends in "/"
	mode     int64
	uid, gid int
	data     []byte
}

// layer is a gzipped OCI layer of the entries, owned by root unless said,
// each file's time the commit's.
func layer(m Meta, entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: m.Date, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		if e.name[len(e.name)-1] == '/' {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// WriteDockerTarball writes img as a tarball that `docker load` reads,
// tagged Image:Version.
func WriteDockerTarball(m Meta, img ArchImage, dst string) error {
	tag, err := name.NewTag(m.Tag())
	if err != nil {
		return err
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := tarball.Write(tag, img.Image, f); err != nil {
		return err
	}
	return f.Close()
}

// WriteLayout writes an OCI image layout at dir: an index of the images,
// one per architecture, named by the version.
func WriteLayout(m Meta, images []ArchImage, dir string) error {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, img := range images {
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img.Image,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: img.Arch}},
		})
	}
	idx = mutate.Annotations(idx, annotations(m)).(v1.ImageIndex)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": m.Version,
	}))
}
