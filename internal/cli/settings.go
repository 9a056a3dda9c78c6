package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/batonhq/baton/internal/jobsfile"
)

// EnvPrefix starts the environment variable of every flag of `baton run`
// and `demo node`: --redis-addr is BATON_REDIS_ADDR.
const EnvPrefix = "BATON_"

// EnvName is the environment variable of flag name.
func EnvName(flagName string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// backendFlagNames are the flags BackendFlags registers, the names a
// backend section may use (with _ for -; kind for --backend).
var backendFlagNames = func() []string {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	new(BackendFlags).Register(fs)
	var out []string
	fs.VisitAll(func(f *flag.Flag) { out = append(out, f.Name) })
	return out
}()

// source says where a flag's value came from, for errors.
type source struct {
	file    *jobsfile.File
	setting jobsfile.Setting
	env     string
}

// settings are the values of a node's flags and where they came from:
// the config file, then BATON_* variables, then the command line, each
// over the one before.
type settings struct {
	from map[string]source // flag name → where its value came from (absent: default or command line)
}

// apply sets on fs the values of f's settings sections, then those of the
// environment, skipping the flags set on the command line. nodeFlags are
// the flags a node section may set; skipEnv the flags no variable sets.
func apply(fs *flag.FlagSet, f *jobsfile.File, nodeFlags []string, getenv func(string) string, skipEnv ...string) (*settings, error) {
	onCmdLine := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { onCmdLine[fl.Name] = true })
	s := &settings{from: map[string]source{}}
	var errs []error
	if f != nil {
		for _, st := range f.Settings {
			name, err := flagOf(st, nodeFlags)
			if err != nil {
				errs = append(errs, f.Errorf(st, "%v", err))
				continue
			}
			if onCmdLine[name] {
				continue
			}
			v := st.Value
			if isPathFlag(name) && v != "" && !filepath.IsAbs(v) {
				v = filepath.Join(filepath.Dir(f.Path), v) // relative to the file, not to the working directory
			}
			if err := fs.Set(name, v); err != nil {
				errs = append(errs, f.Errorf(st, "%q: %v", st.Value, unwrapFlagErr(err)))
				continue
			}
			s.from[name] = source{file: f, setting: st}
		}
	}
	fs.VisitAll(func(fl *flag.Flag) {
		env := EnvName(fl.Name)
		v := getenv(env)
		if v == "" || onCmdLine[fl.Name] || slices.Contains(skipEnv, fl.Name) {
			return
		}
		if err := fs.Set(fl.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("$%s=%q: %v", env, v, unwrapFlagErr(err)))
			return
		}
		s.from[fl.Name] = source{env: env}
	})
	return s, errors.Join(errs...)
}

// isPathFlag reports whether flag name takes a file's path: a relative
// one in a config file is relative to the file's directory.
func isPathFlag(name string) bool {
	for _, suffix := range []string{"-file", "-cacert", "-cert", "-key"} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}

// flagOf is the flag a setting stands for.
func flagOf(st jobsfile.Setting, nodeFlags []string) (string, error) {
	name := strings.ReplaceAll(st.Key, "_", "-")
	switch st.Section {
	case "election":
		return "election", nil // election.name; the decoder knows no other setting there
	case "backend":
		if st.Key == "kind" {
			return "backend", nil
		}
		if name != "backend" && name != "election" && slices.Contains(backendFlagNames, name) {
			return name, nil
		}
		var want []string
		for _, n := range backendFlagNames {
			switch n {
			case "backend":
				want = append(want, "kind")
			case "election":
			default:
				want = append(want, strings.ReplaceAll(n, "-", "_"))
			}
		}
		return "", fmt.Errorf("unknown setting (want one of %s; the election's name is election.name)", strings.Join(want, ", "))
	case "node":
		if slices.Contains(nodeFlags, name) {
			return name, nil
		}
		var want []string
		for _, n := range nodeFlags {
			want = append(want, strings.ReplaceAll(n, "-", "_"))
		}
		return "", fmt.Errorf("unknown setting (want one of %s)", strings.Join(want, ", "))
	}
	return "", fmt.Errorf("unknown section %q", st.Section)
}

// unwrapFlagErr drops the flag package's wrapping of a Value's error.
func unwrapFlagErr(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

var flagRef = regexp.MustCompile(`--([a-z][a-z0-9-]*)`)

// locate prefixes err with where the value of the first flag it names
// came from, when that is the config file (FILE:LINE: backend.dsn: ) or
// the environment ($BATON_DSN: ), so that an error about a value in the
// file points at the file.
func (s *settings) locate(err error) error {
	if err == nil || s == nil {
		return err
	}
	m := flagRef.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	src, ok := s.from[m[1]]
	switch {
	case !ok:
		return err
	case src.file != nil:
		return fmt.Errorf("%s:%d: %s: %w", src.file.Path, src.setting.Line, src.setting.Field(), err)
	default:
		return fmt.Errorf("$%s: %w", src.env, err)
	}
}

// osGetenv is os.Getenv; tests replace the environment with their own.
var osGetenv = os.Getenv

// CheckSettings reports the settings of f that a node (`baton run`) would
// refuse: an unknown name, or a value its flag does not take. Each error
// names FILE:LINE and the field.
func CheckSettings(f *jobsfile.File) error {
	p := &Program{Name: "baton", Getenv: func(string) string { return "" }}
	_, _, _, err := p.nodeSettings("run", []string{"--config", f.Path}, io.Discard)
	return err
}

// ApplyBackendSection sets on fs the values of f's backend section (as
// `baton lock --config` reads a sidecar's file), skipping the flags set on
// the command line. A relative path is relative to f's directory. Each
// error names FILE:LINE and the field.
func ApplyBackendSection(fs *flag.FlagSet, f *jobsfile.File) error {
	g := *f
	g.Settings = nil
	for _, st := range f.Settings {
		if st.Section == "backend" {
			g.Settings = append(g.Settings, st)
		}
	}
	_, err := apply(fs, &g, nil, func(string) string { return "" })
	return err
}

// electionKeys are the election section's keys of the Timing fields a
// backend's invalid config names.
var electionKeys = map[string]string{"TTL": "ttl", "RenewInterval": "renew_interval", "SafetyMargin": "safety_margin", "PollInterval": "poll_interval"}

// fieldFlags are, per backend, the flags behind the Config fields its
// invalid config names.
var fieldFlags = map[string]map[string]string{
	"kube":  {"Namespace": "kube-namespace", "Name": "election"},
	"sql":   {"Table": "table", "Election": "election"},
	"redis": {"Election": "election", "Addr": "redis-addr", "MasterName": "redis-master", "WaitReplicas": "redis-wait-replicas"},
}

// locateOpen places each problem of a backend's invalid config (an error
// of Open, "PKG: invalid config: " and the problems) at the config file's
// line it comes from, one line each: a Timing field at its election key
// (FILE:3: election.ttl: ), a field a flag gives at where that flag's
// value came from (FILE:6: backend.kube_namespace: ), anything else at
// the election section. Other errors are placed as locate places them.
func (s *settings) locateOpen(err error, f *jobsfile.File) error {
	const marker = "invalid config: "
	i := strings.Index(err.Error(), marker)
	if i < 0 {
		return s.locate(err)
	}
	prefix := err.Error()[:i+len(marker)]
	head := strings.TrimSuffix(prefix[:i], ": ") // "etcd", or "... kube"
	pkg := head[strings.LastIndex(head, " ")+1:]
	var out []error
	for _, p := range problems(err) {
		msg := prefix + p.Error()
		field, _, _ := strings.Cut(p.Error(), " ")
		switch key, flagName := electionKeys[field], fieldFlags[pkg][field]; {
		case key != "" && f != nil && f.ElectionLines[key] > 0:
			out = append(out, fmt.Errorf("%s:%d: election.%s: %s", f.Path, f.ElectionLines[key], key, msg))
		case flagName != "" && s != nil && s.from[flagName] != (source{}):
			out = append(out, s.at(flagName, msg))
		case flagName != "":
			out = append(out, fmt.Errorf("--%s: %s", flagName, msg)) // from the command line, or its default
		case f != nil && f.Election.Line > 0:
			out = append(out, fmt.Errorf("%s:%d: election: %s", f.Path, f.Election.Line, msg))
		default:
			out = append(out, errors.New(msg))
		}
	}
	return errors.Join(out...)
}

// at prefixes msg with where flag name's value came from.
func (s *settings) at(name, msg string) error {
	src := s.from[name]
	if src.file != nil {
		return fmt.Errorf("%s:%d: %s: %s", src.file.Path, src.setting.Line, src.setting.Field(), msg)
	}
	return fmt.Errorf("$%s: %s", src.env, msg)
}

// problems flattens the joined errors in err's chain into the problems
// they hold; an error that joins nothing is one problem.
func problems(err error) []error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			var out []error
			for _, p := range j.Unwrap() {
				out = append(out, problems(p)...)
			}
			return out
		}
	}
	return []error{err}
}
