package jobsfile

import (
	"net"
	"net/url"
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/batonhq/baton/internal/httpjob"
)

// App is the app section: how the sidecar checks the health of the
// application beside it. An instance whose application is not healthy
// does not campaign, and a leader whose application stops answering
// steps down. Zero values mean the defaults (internal/appcheck).
type App struct {
	// Check is "http" (GET HealthURL, the default when it is set), "tcp"
	// (connect to each HTTP job's host:port, the default without
	// HealthURL when there are HTTP jobs) or "none" (no check, the
	// default otherwise).
	Check          string
	HealthURL      string
	Interval       time.Duration
	Timeout        time.Duration
	UnhealthyAfter int
	HealthyAfter   int

	// Line is the line of the app key, 0 if absent.
	Line int
}

// App checks.
const (
	CheckHTTP = "http"
	CheckTCP  = "tcp"
	CheckNone = "none"
)

var appFields = []string{"check", "health_url", "interval", "timeout", "unhealthy_after", "healthy_after"}

func (d *decoder) app(key, n *yaml.Node) App {
	a := App{Line: key.Line}
	fields, ok := d.mapping(n, "app", appFields)
	if !ok {
		return a
	}
	if f, ok := fields["check"]; ok {
		a.Check = oneOf(d, f.val, "app.check", []string{CheckHTTP, CheckTCP, CheckNone}, "http, tcp or none")
	}
	if f, ok := fields["health_url"]; ok {
		a.HealthURL = d.nonEmpty(f.val, "app.health_url")
		if a.HealthURL != "" {
			if err := httpjob.CheckURL(a.HealthURL); err != nil {
				d.fail(f.val.Line, "app.health_url", "%v", err)
			}
		}
		if a.Check == CheckTCP || a.Check == CheckNone {
			d.fail(f.key.Line, "app.health_url", "%q: set with check %s (want check http, or no health_url)", a.HealthURL, a.Check)
		}
	} else if a.Check == CheckHTTP {
		d.fail(fields["check"].val.Line, "app.check", "%q: needs app.health_url (e.g. http://127.0.0.1:8080/healthz)", a.Check)
	}
	for name, dst := range map[string]*time.Duration{"interval": &a.Interval, "timeout": &a.Timeout} {
		if f, ok := fields[name]; ok {
			*dst = d.duration(f.val, "app."+name)
		}
	}
	if tf, ok := fields["timeout"]; ok && a.Interval > 0 && a.Timeout > a.Interval {
		d.fail(tf.val.Line, "app.timeout", "%q: longer than app.interval %q: checks could not start every interval "+
			"(want a timeout at most the interval)", tf.val.Value, fields["interval"].val.Value)
	}
	for name, dst := range map[string]*int{"unhealthy_after": &a.UnhealthyAfter, "healthy_after": &a.HealthyAfter} {
		if f, ok := fields[name]; ok {
			p := "app." + name
			if *dst = d.count(f.val, p, 1000); *dst == 0 && f.val.Value == "0" {
				d.fail(f.val.Line, p, "\"0\": want at least 1 check")
			}
		}
	}
	return a
}

// AppCheck returns the check the file asks for after its defaults:
// CheckHTTP with the URL, CheckTCP with the HTTP jobs' host:port (each
// once, in job order), or CheckNone.
func (f *File) AppCheck() (check, healthURL string, addrs []string) {
	switch f.App.Check {
	case CheckNone:
		return CheckNone, "", nil
	case CheckHTTP:
		return CheckHTTP, f.App.HealthURL, nil
	case "":
		if f.App.HealthURL != "" {
			return CheckHTTP, f.App.HealthURL, nil
		}
	}
	for _, j := range f.Jobs {
		if j.HTTP == nil {
			continue
		}
		if a := hostPort(j.HTTP.URL); a != "" && !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return CheckNone, "", nil
	}
	return CheckTCP, "", addrs
}

// hostPort is the address a request to raw connects to.
func hostPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}
