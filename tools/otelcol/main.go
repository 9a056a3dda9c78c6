// Command otelcol is the OpenTelemetry Collector the tests export their
// traces to (internal/oteltest): the collector's own packages at the
// release pinned in go.mod, with one receiver (OTLP, over gRPC and HTTP)
// and one exporter (the contrib file exporter, which writes OTLP JSON
// lines). No processors, connectors or extensions: a test reads what the
// file exporter wrote, so nothing between them should batch or drop.
//
// tools/otelcol/build.sh builds it into <repo>/.bin/otelcol, setting
// version to the pinned release. Run it as the collector is run:
//
//	otelcol --config=file:/path/to/config.yaml
package main

import (
	"fmt"
	"os"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

// version is set by build.sh (-ldflags -X main.version=...).
var version = "dev"

func main() {
	cmd := otelcol.NewCommand(otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "otelcol",
			Description: "baton's test collector (OTLP receiver, file exporter)",
			Version:     version,
		},
		Factories: factories,
		// The config comes from a file (--config=file:PATH); ${NAME} in
		// it reads the environment, the scheme the command defaults to.
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{
					fileprovider.NewFactory(),
					envprovider.NewFactory(),
				},
				DefaultScheme: "env",
			},
		},
	})
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "otelcol:", err)
		os.Exit(1)
	}
}

// factories lists the components a config may name. The service's own
// telemetry factory is required; a config turns its metrics off
// (service.telemetry.metrics.level: none) so that no collector listens
// on the default :8888.
func factories() (otelcol.Factories, error) {
	receivers, err := otelcol.MakeFactoryMap(otlpreceiver.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	exporters, err := otelcol.MakeFactoryMap(fileexporter.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	return otelcol.Factories{
		Receivers: receivers,
		Exporters: exporters,
		Telemetry: otelconftelemetry.NewFactory(),
	}, nil
}
