package jobsfile_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/jobsfile"
)

const appJobs = `jobs:
  - {name: a, schedule: '@every 1s', http: {url: 'http://127.0.0.1:8081/jobs/a'}}
  - {name: b, schedule: '@every 1s', http: {url: 'https://svc.internal/jobs/b'}}
  - {name: c, schedule: '@every 1s', http: {url: 'http://127.0.0.1:8081/jobs/c'}}
  - {name: d, schedule: '@every 1s', builtin: log}
`

// The app section and the check it gives after the defaults.
func TestParse_App(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		check, url string
		addrs      []string
	}{
		{"default with http jobs: their endpoints", appJobs, "tcp", "", []string{"127.0.0.1:8081", "svc.internal:443"}},
		{"default without http jobs: none", "jobs:\n  - {name: d, schedule: '@every 1s', builtin: log}\n", "none", "", nil},
		{"health_url", appJobs + "app:\n  health_url: http://127.0.0.1:8081/healthz\n  interval: 2s\n  timeout: 500ms\n  unhealthy_after: 4\n  healthy_after: 1\n",
			"http", "http://127.0.0.1:8081/healthz", nil},
		{"check none", appJobs + "app: {check: none}\n", "none", "", nil},
		{"check tcp", appJobs + "app: {check: tcp, interval: 3s}\n", "tcp", "", []string{"127.0.0.1:8081", "svc.internal:443"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := jobsfile.Parse("baton.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			check, url, addrs := f.AppCheck()
			if check != tc.check || url != tc.url || !slices.Equal(addrs, tc.addrs) {
				t.Errorf("AppCheck: %q %q %q, want %q %q %q", check, url, addrs, tc.check, tc.url, tc.addrs)
			}
		})
	}
	f, _ := jobsfile.Parse("baton.yaml", []byte(appJobs+"app:\n  health_url: http://127.0.0.1:8081/healthz\n  interval: 2s\n  timeout: 500ms\n  unhealthy_after: 4\n  healthy_after: 1\n"))
	if a := f.App; a.Interval != 2*time.Second || a.Timeout != 500*time.Millisecond || a.UnhealthyAfter != 4 || a.HealthyAfter != 1 || a.Line != 6 {
		t.Errorf("App: %+v", a)
	}
}

// Each bad value of the app section is an error naming the field and
// the value.
func TestParse_AppBad(t *testing.T) {
	for _, tc := range []struct{ name, app, want string }{
		{"unknown field", "app: {health: x}\n", `baton.yaml:6: app.health: unknown field (want one of check, health_url, interval, timeout, unhealthy_after, healthy_after)`},
		{"bad check", "app: {check: ping}\n", `baton.yaml:6: app.check: "ping": unknown (want http, tcp or none)`},
		{"http without url", "app: {check: http}\n", `baton.yaml:6: app.check: "http": needs app.health_url (e.g. http://127.0.0.1:8080/healthz)`},
		{"url with check none", "app: {check: none, health_url: 'http://x/h'}\n", `baton.yaml:6: app.health_url: "http://x/h": set with check none (want check http, or no health_url)`},
		{"bad url", "app: {health_url: 'ftp://x/h'}\n", `baton.yaml:6: app.health_url: `},
		{"negative interval", "app: {interval: -1s}\n", `baton.yaml:6: app.interval: "-1s": must not be negative`},
		{"bad timeout", "app: {timeout: soon}\n", `baton.yaml:6: app.timeout: "soon": not a duration`},
		{"timeout over interval", "app:\n  interval: 500ms\n  timeout: 2s\n", `baton.yaml:8: app.timeout: "2s": longer than app.interval "500ms"`},
		{"zero unhealthy_after", "app: {unhealthy_after: 0}\n", `baton.yaml:6: app.unhealthy_after: "0": want at least 1 check`},
		{"negative healthy_after", "app: {healthy_after: -2}\n", `baton.yaml:6: app.healthy_after: "-2": must not be negative`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := jobsfile.Parse("baton.yaml", []byte(appJobs+tc.app))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v, want it to start with %s", err, tc.want)
			}
		})
	}
	_, err := jobsfile.Parse("baton.yaml", []byte("jobs:\n  - {name: d, schedule: '@every 1s', builtin: log}\napp: {check: tcp}\n"))
	if err == nil || err.Error() != `baton.yaml:3: app.check: "tcp": no http job whose endpoint to connect to (want http with health_url, or none)` {
		t.Errorf("check tcp without http jobs: %v", err)
	}
}
