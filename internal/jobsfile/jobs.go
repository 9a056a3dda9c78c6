package jobsfile

import (
	"fmt"
	"net/textproto"
	"path/filepath"
	"slices"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/batonhq/baton/internal/httpjob"
	"github.com/batonhq/baton/schedulerhost"
)

var jobFields = []string{"name", "schedule", "builtin", "duration", "command", "http", "timeout", "overlap", "misfire", "misfire_grace", "max_catch_up",
	"retries", "retry_backoff", "retry_backoff_max", "jitter", "deadline"}

// oneOf reads the string at n (path names it in errors) as one of
// allowed, which want lists for the error. An empty string is no error
// and gives the zero value; any other value not allowed is reported and
// gives the zero value too.
func oneOf[T ~string](d *decoder, n *yaml.Node, path string, allowed []T, want string) T {
	s := d.str(n, path)
	if s == "" || slices.Contains(allowed, T(s)) {
		return T(s)
	}
	d.fail(n.Line, path, "%q: unknown (want %s)", s, want)
	return ""
}

// nonEmpty reads the string at n, reporting an empty one.
func (d *decoder) nonEmpty(n *yaml.Node, path string) string {
	s := d.str(n, path)
	if s == "" && n.Tag != "!!null" && n.Kind == yaml.ScalarNode {
		d.fail(n.Line, path, "\"\": must not be empty")
	}
	return s
}

func (d *decoder) jobs(n *yaml.Node) []Job {
	if n.Kind != yaml.SequenceNode {
		d.fail(n.Line, "jobs", "%s: want a list of jobs", describe(n))
		return nil
	}
	if len(n.Content) == 0 {
		d.fail(n.Line, "jobs", "empty: want at least one job")
		return nil
	}
	var out []Job
	seen := map[string]int{}
	for i, jn := range n.Content {
		path := fmt.Sprintf("jobs[%d]", i)
		j, ok := d.job(jn, path)
		if !ok {
			continue
		}
		if j.Name != "" {
			if line, dup := seen[j.Name]; dup {
				d.fail(jn.Line, path+".name", "%q: repeated (first on line %d)", j.Name, line)
			}
			seen[j.Name] = jn.Line
		}
		out = append(out, j)
	}
	return out
}

func (d *decoder) job(n *yaml.Node, path string) (Job, bool) {
	j := Job{Line: n.Line}
	fields, ok := d.mapping(n, path, jobFields)
	if !ok {
		return j, false
	}
	if f, ok := fields["name"]; ok {
		j.Name = d.nonEmpty(f.val, path+".name")
	} else {
		d.fail(n.Line, path+".name", "required")
	}
	if f, ok := fields["schedule"]; ok {
		p := path + ".schedule"
		j.Schedule = d.nonEmpty(f.val, p)
		if j.Schedule != "" {
			if _, err := schedulerhost.ParseSchedule(j.Schedule); err != nil {
				d.fail(f.val.Line, p, "%q: %v", j.Schedule, err)
			}
		}
	} else {
		d.fail(n.Line, path+".schedule", "required (a cron spec such as \"*/5 * * * * *\" or \"@every 10s\")")
	}
	bf, hasBuiltin := fields["builtin"]
	cf, hasCommand := fields["command"]
	hf, hasHTTP := fields["http"]
	var kinds []field
	for _, f := range []struct {
		has bool
		f   field
	}{{hasBuiltin, bf}, {hasCommand, cf}, {hasHTTP, hf}} {
		if f.has {
			kinds = append(kinds, f.f)
		}
	}
	switch {
	case len(kinds) > 1:
		d.fail(kinds[1].key.Line, path+"."+kinds[1].key.Value, "set together with %s (line %d): want exactly one of builtin, command and http",
			kinds[0].key.Value, kinds[0].key.Line)
	case len(kinds) == 0:
		d.fail(n.Line, path+".command", "required: set command (run with /bin/sh -c), http (a request to your service) or builtin (sleep, log, fail)")
	case hasCommand:
		j.Command = d.nonEmpty(cf.val, path+".command")
	case hasHTTP:
		j.HTTP = d.http(hf.val, path+".http")
	case hasBuiltin:
		if d.nonEmpty(bf.val, path+".builtin") != "" {
			j.Builtin = oneOf(d, bf.val, path+".builtin", []Builtin{BuiltinSleep, BuiltinLog, BuiltinFail}, "sleep, log or fail")
		}
	}
	if f, ok := fields["duration"]; ok {
		p := path + ".duration"
		j.Duration = d.duration(f.val, p)
		if hasBuiltin && j.Builtin != "" && j.Builtin != BuiltinSleep {
			d.fail(f.key.Line, p, "only for builtin sleep, not %s", j.Builtin)
		} else if hasCommand || hasHTTP {
			d.fail(f.key.Line, p, "only for builtin sleep, not for a command or http job")
		}
	} else if j.Builtin == BuiltinSleep {
		d.fail(bf.key.Line, path+".duration", "required with builtin sleep (e.g. duration: 4s)")
	}
	if f, ok := fields["timeout"]; ok {
		j.Timeout = d.duration(f.val, path+".timeout")
	}
	if f, ok := fields["misfire_grace"]; ok {
		j.MisfireGrace = d.duration(f.val, path+".misfire_grace")
	}
	if f, ok := fields["overlap"]; ok {
		j.Overlap = oneOf(d, f.val, path+".overlap",
			[]schedulerhost.Overlap{schedulerhost.OverlapSkip, schedulerhost.OverlapAllow, schedulerhost.OverlapQueue}, "skip, allow or queue")
	}
	if f, ok := fields["misfire"]; ok {
		j.Misfire = oneOf(d, f.val, path+".misfire",
			[]schedulerhost.Misfire{schedulerhost.MisfireSkip, schedulerhost.MisfireRunOnce, schedulerhost.MisfireRunAll}, "skip, run-once or run-all")
	}
	if f, ok := fields["max_catch_up"]; ok {
		j.MaxCatchUp = d.count(f.val, path+".max_catch_up", -1)
	}
	if f, ok := fields["retries"]; ok {
		j.Retries = d.count(f.val, path+".retries", schedulerhost.MaxRetries)
	}
	if f, ok := fields["retry_backoff"]; ok {
		j.RetryBackoff = d.duration(f.val, path+".retry_backoff")
	}
	if f, ok := fields["retry_backoff_max"]; ok {
		j.RetryBackoffMax = d.duration(f.val, path+".retry_backoff_max")
		if j.RetryBackoff > 0 && j.RetryBackoffMax > 0 && j.RetryBackoff > j.RetryBackoffMax {
			d.fail(f.val.Line, path+".retry_backoff_max", "%q: less than retry_backoff (%v)", f.val.Value, j.RetryBackoff)
		}
	}
	if f, ok := fields["jitter"]; ok {
		j.Jitter = d.duration(f.val, path+".jitter") // shorter than the schedule's period: checked by the Host (Locate)
	}
	if f, ok := fields["deadline"]; ok {
		j.Deadline = d.duration(f.val, path+".deadline")
	}
	return j, true
}

// count reads a whole number, not negative, at most most unless most is
// negative.
func (d *decoder) count(n *yaml.Node, path string, most int) int {
	s, ok := d.scalar(n, path)
	if !ok {
		return 0
	}
	v, err := strconv.Atoi(s)
	switch {
	case err != nil:
		d.fail(n.Line, path, "%q: want a whole number", s)
	case v < 0:
		d.fail(n.Line, path, "%q: must not be negative", s)
	case most >= 0 && v > most:
		d.fail(n.Line, path, "%q: want at most %d", s, most)
	default:
		return v
	}
	return 0
}

var httpFields = []string{"method", "url", "headers", "body", "bearer_token_file", "ca_cert", "client_cert", "client_key", "retry_statuses"}

// http reads a job's http mapping. The URL, method and header names are
// checked here (httpjob's checks), the files when the job is built.
func (d *decoder) http(n *yaml.Node, path string) *HTTP {
	h := &HTTP{}
	fields, ok := d.mapping(n, path, httpFields)
	if !ok {
		return h
	}
	if f, ok := fields["url"]; ok {
		h.URL = d.nonEmpty(f.val, path+".url")
		if h.URL != "" {
			if err := httpjob.CheckURL(h.URL); err != nil {
				d.fail(f.val.Line, path+".url", "%v", err)
			}
		}
	} else {
		d.fail(n.Line, path+".url", "required (e.g. http://127.0.0.1:8080/jobs/report)")
	}
	if f, ok := fields["method"]; ok {
		h.Method = d.nonEmpty(f.val, path+".method")
		if h.Method != "" {
			if err := httpjob.CheckMethod(h.Method); err != nil {
				d.fail(f.val.Line, path+".method", "%v", err)
			}
		}
	}
	if f, ok := fields["headers"]; ok {
		hp := path + ".headers"
		if f.val.Kind != yaml.MappingNode {
			d.fail(f.val.Line, hp, "%s: want a mapping of header names to values", describe(f.val))
		} else {
			seen := map[string]int{}
			for i := 0; i+1 < len(f.val.Content); i += 2 {
				k, v := f.val.Content[i], f.val.Content[i+1]
				name := k.Value
				if err := httpjob.CheckHeader(name); err != nil {
					d.fail(k.Line, hp+"."+name, "%v", err)
					continue
				}
				canon := textproto.CanonicalMIMEHeaderKey(name)
				if line, dup := seen[canon]; dup {
					d.fail(k.Line, hp+"."+name, "repeated (first on line %d)", line)
					continue
				}
				seen[canon] = k.Line
				h.Headers = append(h.Headers, [2]string{name, d.str(v, hp+"."+name)})
			}
		}
	}
	for name, dst := range map[string]*string{"body": &h.Body, "bearer_token_file": &h.BearerTokenFile,
		"ca_cert": &h.CACert, "client_cert": &h.ClientCert, "client_key": &h.Key} {
		if f, ok := fields[name]; ok {
			*dst = d.str(f.val, path+"."+name)
			if name != "body" && *dst != "" && !filepath.IsAbs(*dst) {
				*dst = filepath.Join(filepath.Dir(d.file), *dst) // relative to the jobs file
			}
		}
	}
	if f, ok := fields["retry_statuses"]; ok {
		h.RetryStatuses = d.statuses(f.val, path+".retry_statuses")
	}
	if (h.ClientCert == "") != (h.Key == "") {
		d.fail(n.Line, path+".client_cert", "client_cert and client_key: give both or neither")
	}
	return h
}

// statuses reads a list of HTTP statuses and classes ([408, 429, 5xx]);
// an empty list is not nil.
func (d *decoder) statuses(n *yaml.Node, path string) []string {
	if n.Kind != yaml.SequenceNode {
		d.fail(n.Line, path, "%s: want a list of statuses, e.g. [408, 429, 5xx]", describe(n))
		return nil
	}
	out := []string{}
	for i, e := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		s := d.str(e, p)
		if s == "" {
			continue
		}
		if err := httpjob.CheckStatus(s); err != nil {
			d.fail(e.Line, p, "%q: want a status from 300 to 599 (e.g. 409) or a class (3xx, 4xx, 5xx)", s)
			continue
		}
		out = append(out, s)
	}
	return out
}
