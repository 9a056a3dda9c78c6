package cli

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// LogFlags are the logging flags of every command: --log-format and
// --log-level.
type LogFlags struct {
	Format string // text or json
	Level  string // debug, info, warn or error
}

// Register defines the flags on fs. It does not parse.
func (l *LogFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&l.Format, "log-format", "text", "log format: text or json")
	fs.StringVar(&l.Level, "log-level", "info", "log level: debug, info, warn or error")
}

// Logger returns a logger writing to w as the flags say, or an error
// naming the flag whose value is wrong. The keys of baton's records are
// fixed: election, identity, token, job, tick, took, err.
func (l *LogFlags) Logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.Level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", l.Level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(l.Format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", l.Format)
}
