package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the packagers
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm"
)

// The packages' scripts: a system user for the unit, and systemd told of
// the unit. Neither starts anything: the user writes a config first.
const (
	postInstall = `#!/bin/sh
set -e
if ! getent passwd baton >/dev/null; then
	useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin baton
fi
if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
`
	postRemove = `#!/bin/sh
if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
`
)

// Package writes a .deb or .rpm (format) for linux/arch into dir:
// /usr/bin/baton, the template unit baton@.service, and
// /etc/baton/example.yaml marked as configuration. It returns its path.
func Package(m Meta, format, arch, bin, dir string) (string, error) {
	p, err := nfpm.Get(format)
	if err != nil {
		return "", err
	}
	deploy := filepath.Join(m.Root, "docs", "deploy")
	info := &nfpm.Info{
		Name:        "baton",
		Arch:        arch,
		Platform:    "linux",
		Version:     m.Version,
		Release:     "1",
		Section:     "admin",
		Priority:    "optional",
		Maintainer:  "The baton authors",
		Description: "Leader-elected cron: run each scheduled job once across a service's instances.",
		Vendor:      "batonhq",
		Homepage:    Source,
		License:     "Apache-2.0",
		MTime:       m.Date,
		Overridables: nfpm.Overridables{
			Depends: []string{"passwd"},
			Contents: files.Contents{
				{Source: bin, Destination: "/usr/bin/baton", FileInfo: &files.ContentFileInfo{Mode: 0o755, MTime: m.Date}},
				{Source: filepath.Join(deploy, "baton@.service"), Destination: "/usr/lib/systemd/system/baton@.service",
					FileInfo: &files.ContentFileInfo{Mode: 0o644, MTime: m.Date}},
				{Source: filepath.Join(deploy, "example.yaml"), Destination: "/etc/baton/example.yaml", Type: files.TypeConfigNoReplace,
					FileInfo: &files.ContentFileInfo{Mode: 0o644, MTime: m.Date}},
			},
		},
	}
	if format == "rpm" {
		info.Depends = []string{"shadow-utils"}
		info.RPM.BuildHost = "release" // not this machine's name: the same commit, the same bytes
	}
	scripts := filepath.Join(dir, ".work", "scripts")
	if err := os.MkdirAll(scripts, 0o755); err != nil {
		return "", err
	}
	info.Scripts.PostInstall = filepath.Join(scripts, "postinstall.sh")
	info.Scripts.PostRemove = filepath.Join(scripts, "postremove.sh")
	if err := os.WriteFile(info.Scripts.PostInstall, []byte(postInstall), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(info.Scripts.PostRemove, []byte(postRemove), 0o755); err != nil {
		return "", err
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, format); err != nil {
		return "", fmt.Errorf("%s: %w", format, err)
	}
	dst := filepath.Join(dir, p.ConventionalFileName(info))
	f, err := os.Create(dst)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := p.Package(info, f); err != nil {
		return "", fmt.Errorf("%s: %w", format, err)
	}
	return dst, f.Close()
}
