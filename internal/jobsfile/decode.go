package jobsfile

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

type decoder struct {
	file  string
	lines int // lines in the file: yaml.v3 puts an empty document on the line after its last
	errs  []error
}

func (d *decoder) fail(line int, field, format string, args ...any) {
	line = min(line, d.lines)
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlParserProblems are the problems of yaml.v3's parser (its scanner's
// are other words): it reports their line counted from 0, the scanner's
// from 1.
var yamlParserProblems = []string{
	"did not find expected ',' or ']'", "did not find expected ',' or '}'", "did not find expected '-' indicator",
	"did not find expected <document start>", "did not find expected key", "did not find expected node content",
	"found duplicate %TAG directive", "found duplicate %YAML directive", "found incompatible YAML document",
	"found undefined tag handle",
}

func (d *decoder) decodeFile(f *File, data []byte) {
	d.lines = 1 + bytes.Count(data, []byte("\n"))
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		msg := err.Error()
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			n, _ := strconv.Atoi(m[1])
			if slices.Contains(yamlParserProblems, m[2]) {
				n++ // yaml.v3 gives a parser error's line counted from 0
			}
			d.fail(n, "", "%s", m[2])
		} else if strings.Contains(msg, "EOF") {
			d.fail(0, "", "empty file: want election: and jobs:")
		} else {
			d.fail(badCharLine(data), "", "%s", strings.TrimPrefix(msg, "yaml: "))
		}
		return
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		d.fail(more.Line, "", "a second YAML document: want one")
		return
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	fields, ok := d.mapping(root, "", []string{"election", "jobs", "backend", "node", "app"})
	if !ok {
		return
	}
	if n, ok := fields["election"]; ok {
		f.Election = d.election(n.key, n.val, f)
	}
	for _, section := range []string{"backend", "node"} {
		if n, ok := fields[section]; ok {
			f.Settings = append(f.Settings, d.settings(n.val, section)...)
		}
	}
	n, ok := fields["jobs"]
	if !ok {
		d.fail(root.Line, "jobs", "required: a list of jobs")
		return
	}
	f.Jobs = d.jobs(n.val)
	if n, ok := fields["app"]; ok {
		f.App = d.app(n.key, n.val)
		if c, _, _ := f.AppCheck(); f.App.Check == CheckTCP && c != CheckTCP {
			d.fail(n.key.Line, "app.check", "%q: no http job whose endpoint to connect to (want http with health_url, or none)", f.App.Check)
		}
	}
}

// badCharLine is the line of the first character YAML does not allow
// (invalid UTF-8, or a control character other than tab and line breaks),
// which yaml.v3 reports without a line; 1 if there is none.
func badCharLine(data []byte) int {
	for i, r := range string(data) {
		ok := r == '\t' || r == '\n' || r == '\r' || (r >= 0x20 && r <= 0x7e) || r == 0x85 ||
			(r >= 0xa0 && r <= 0xd7ff) || (r >= 0xe000 && r <= 0xfffd && r != utf8.RuneError) || r >= 0x10000 ||
			(r == utf8.RuneError && strings.HasPrefix(string(data[i:]), "\ufffd"))
		if !ok {
			return 1 + bytes.Count(data[:i], []byte("\n"))
		}
	}
	return 1
}

type field struct{ key, val *yaml.Node }

// mapping checks that n is a mapping whose keys are all in known, without
// repeats, and returns its fields by key.
func (d *decoder) mapping(n *yaml.Node, path string, known []string) (map[string]field, bool) {
	if n.Kind != yaml.MappingNode {
		d.fail(n.Line, path, "%s: want a mapping of %s", describe(n), strings.Join(known, ", "))
		return nil, false
	}
	out := map[string]field{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := k.Value
		full := join(path, name)
		if k.Kind != yaml.ScalarNode {
			d.fail(k.Line, path, "%s as a key: want a field name", describe(k))
			continue
		}
		if !contains(known, name) {
			d.fail(k.Line, full, "unknown field (want one of %s)", strings.Join(known, ", "))
			continue
		}
		if prev, dup := out[name]; dup {
			d.fail(k.Line, full, "repeated (first on line %d)", prev.key.Line)
			continue
		}
		out[name] = field{k, v}
	}
	return out, true
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "nothing"
}

var electionFields = []string{"name", "ttl", "renew_interval", "safety_margin", "retry_period", "release_timeout", "shutdown_timeout", "kill_grace", "poll_interval"}

func (d *decoder) election(key, n *yaml.Node, f *File) Election {
	e := Election{Line: key.Line}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return e // an empty section: as if absent, so election.name is named as required
	}
	fields, ok := d.mapping(n, "election", electionFields)
	if !ok {
		return e
	}
	f.ElectionLines = map[string]int{}
	for name, fl := range fields {
		f.ElectionLines[name] = fl.key.Line
	}
	if nf, ok := fields["name"]; ok {
		if v := d.nonEmpty(nf.val, "election.name"); v != "" {
			f.Settings = append(f.Settings, Setting{Section: "election", Key: "name", Value: v, Line: nf.key.Line})
		}
	}
	for name, dst := range map[string]*time.Duration{
		"ttl": &e.TTL, "renew_interval": &e.RenewInterval, "safety_margin": &e.SafetyMargin,
		"retry_period": &e.RetryPeriod, "release_timeout": &e.ReleaseTimeout,
		"shutdown_timeout": &e.ShutdownTimeout, "kill_grace": &e.KillGrace, "poll_interval": &e.PollInterval,
	} {
		if f, ok := fields[name]; ok {
			*dst = d.duration(f.val, "election."+name)
		}
	}
	return e
}

func (d *decoder) scalar(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n.Line, path, "%s: want a single value", describe(n))
		return "", false
	}
	return n.Value, true
}

func (d *decoder) str(n *yaml.Node, path string) string {
	s, ok := d.scalar(n, path)
	if !ok {
		return ""
	}
	if n.Tag == "!!null" {
		d.fail(n.Line, path, "empty: want a value")
		return ""
	}
	return s
}

// duration parses a Go duration string ("5s", "1m30s"); negative values
// are errors.
func (d *decoder) duration(n *yaml.Node, path string) time.Duration {
	s, ok := d.scalar(n, path)
	if !ok {
		return 0
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		if s == "0" {
			return 0
		}
		d.fail(n.Line, path, "%q: not a duration (want e.g. \"5s\", \"1m30s\")", s)
		return 0
	}
	if v < 0 {
		d.fail(n.Line, path, "%q: must not be negative", s)
		return 0
	}
	return v
}

// settings reads a backend or node section: a mapping of names to single
// values, or to lists of them (joined with commas, as flags take them).
// Which names exist is the command's business (Setting).
func (d *decoder) settings(n *yaml.Node, section string) []Setting {
	if n.Kind != yaml.MappingNode {
		d.fail(n.Line, section, "%s: want a mapping of settings", describe(n))
		return nil
	}
	var out []Setting
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := join(section, k.Value)
		if k.Kind != yaml.ScalarNode {
			d.fail(k.Line, section, "%s as a key: want a setting name", describe(k))
			continue
		}
		if line, dup := seen[k.Value]; dup {
			d.fail(k.Line, path, "repeated (first on line %d)", line)
			continue
		}
		seen[k.Value] = k.Line
		var val string
		switch {
		case v.Kind == yaml.SequenceNode:
			var parts []string
			for _, item := range v.Content {
				if s := d.str(item, path); s != "" {
					parts = append(parts, s)
				}
			}
			val = strings.Join(parts, ",")
		default:
			val = d.str(v, path)
		}
		out = append(out, Setting{Section: section, Key: k.Value, Value: val, Line: k.Line})
	}
	return out
}
