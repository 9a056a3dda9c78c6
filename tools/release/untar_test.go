package main

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func untar(t *testing.T, path string, gz bool, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if gz {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	untarReader(t, r, false, dir)
}

// untarReader unpacks folders and regular files (owners too, if chown).
func untarReader(t *testing.T, r io.Reader, chown bool, dir string) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			t.Fatalf("tar entry %q: outside the folder", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, data, 0o600)
			}
		default:
			t.Fatalf("tar entry %q: type %c", h.Name, h.Typeflag)
		}
		if err == nil {
			err = os.Chmod(p, os.FileMode(h.Mode).Perm()|modeBits(h.Mode))
		}
		if err == nil && chown {
			err = os.Lchown(p, h.Uid, h.Gid)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func modeBits(mode int64) os.FileMode {
	var m os.FileMode
	if mode&0o1000 != 0 {
		m |= os.ModeSticky
	}
	return m
}
