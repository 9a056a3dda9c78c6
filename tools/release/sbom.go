package main

import (
	"os"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/CycloneDX/cyclonedx-gomod/pkg/generate/bin"
	"github.com/rs/zerolog"
)

// SBOM writes a CycloneDX SBOM (JSON) of the modules linked into bin, as
// its build info records them, the standard library included. It reads
// the binary only: no network, no module downloads.
func SBOM(m Meta, binPath, dst string) error {
	g, err := bin.NewGenerator(binPath,
		bin.WithLogger(zerolog.Nop()),
		bin.WithIncludeStdlib(true),
		bin.WithVersionOverride(m.Version))
	if err != nil {
		return err
	}
	bom, err := g.Generate()
	if err != nil {
		return err
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := cdx.NewBOMEncoder(f, cdx.BOMFileFormatJSON).SetPretty(true).Encode(bom); err != nil {
		return err
	}
	return f.Close()
}
