package jobsfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/jobsfile"
	"github.com/batonhq/baton/schedulerhost"
)

const good = `# comment
election:
  ttl: 2s
  shutdown_timeout: 10s
  kill_grace: 3s
jobs:
  - name: tick
    schedule: "* * * * * *"
    builtin: log
  - name: nap
    schedule: "*/5 * * * * *"
    builtin: sleep
    duration: 2s
    overlap: queue
    misfire: run-all
    misfire_grace: 30s
    max_catch_up: 3
  - name: env
    schedule: "@every 10s offset 3s"
    command: env | grep ^BATON_
    timeout: 5s
  - name: flaky
    schedule: "0 * * * *"
    command: ./sync.sh
    retries: 3
    retry_backoff: 2s
    retry_backoff_max: 30s
    jitter: 30s
`

func TestParse_Good(t *testing.T) {
	f, err := jobsfile.Parse("jobs.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if f.Election.TTL != 2*time.Second || f.Election.ShutdownTimeout != 10*time.Second || f.Election.KillGrace != 3*time.Second {
		t.Errorf("election = %+v", f.Election)
	}
	if len(f.Jobs) != 4 {
		t.Fatalf("jobs = %+v", f.Jobs)
	}
	nap := f.Jobs[1]
	want := jobsfile.Job{Name: "nap", Schedule: "*/5 * * * * *", Builtin: jobsfile.BuiltinSleep, Duration: 2 * time.Second,
		Overlap: schedulerhost.OverlapQueue, Misfire: schedulerhost.MisfireRunAll, MisfireGrace: 30 * time.Second, MaxCatchUp: 3, Line: 10}
	if nap != want {
		t.Errorf("jobs[1] = %+v, want %+v", nap, want)
	}
	if f.Jobs[2].Schedule != "@every 10s offset 3s" || f.Jobs[2].Command != "env | grep ^BATON_" || f.Jobs[2].Timeout != 5*time.Second || f.Jobs[2].Line != 18 {
		t.Errorf("jobs[2] = %+v", f.Jobs[2])
	}
	if j := f.Jobs[3]; j.Retries != 3 || j.RetryBackoff != 2*time.Second || j.RetryBackoffMax != 30*time.Second || j.Jitter != 30*time.Second {
		t.Errorf("jobs[3] = %+v, want retries 3, backoff 2s up to 30s, jitter 30s", j)
	}
}

// TestParse_Deadline: deadline is read as a duration; a file without it
// hashes as it did before the key existed.
func TestParse_Deadline(t *testing.T) {
	const file = "jobs:\n  - name: a\n    schedule: '@every 1m'\n    builtin: log\n"
	f, err := jobsfile.Parse("jobs.yaml", []byte(file+"    deadline: 5m\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Jobs[0].Deadline; got != 5*time.Minute {
		t.Errorf("deadline = %v, want 5m", got)
	}
	g, err := jobsfile.Parse("jobs.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if g.Jobs[0].Deadline != 0 || f.JobsHash() == g.JobsHash() {
		t.Errorf("without deadline: %v, hashes %s and %s: want 0 and different hashes", g.Jobs[0].Deadline, f.JobsHash(), g.JobsHash())
	}
	// A job without deadline hashes as before the key existed.
	if got, want := g.JobsHash(), "6ea9f095fec5285b01b3cc97bddd2ef751b318df43581756898103db17b9bb19"; got != want {
		t.Errorf("hash without deadline = %s, want %s (the hash before deadline existed)", got, want)
	}
}

func TestParse_Bad(t *testing.T) {
	const head = "election:\n  ttl: 2s\njobs:\n"
	for _, tc := range []struct {
		name, yaml string
		want       string // the whole message
	}{
		{"unknown top-level field", "election:\n  ttl: 2s\nfrobs: 1\njobs:\n  - {name: a, schedule: '@every 1s', builtin: log}\n",
			`jobs.yaml:3: frobs: unknown field (want one of election, jobs, backend, node, app)`},
		{"unknown election field", "election:\n  ttl: 2s\n  tll: 3s\njobs:\n  - {name: a, schedule: '@every 1s', builtin: log}\n",
			`jobs.yaml:3: election.tll: unknown field (want one of name, ttl, renew_interval, safety_margin, retry_period, release_timeout, shutdown_timeout, kill_grace, poll_interval)`},
		{"unknown job field", head + "  - name: a\n    schedule: '@every 1s'\n    builtin: log\n    retry: 3\n",
			`jobs.yaml:7: jobs[0].retry: unknown field (want one of name, schedule, builtin, duration, command, http, timeout, overlap, misfire, misfire_grace, max_catch_up, retries, retry_backoff, retry_backoff_max, jitter, deadline)`},
		{"negative retries", head + "  - name: a\n    schedule: '@every 1s'\n    builtin: log\n    retries: -1\n",
			`jobs.yaml:7: jobs[0].retries: "-1": must not be negative`},
		{"too many retries", head + "  - name: a\n    schedule: '@every 1s'\n    builtin: log\n    retries: 1000\n",
			`jobs.yaml:7: jobs[0].retries: "1000": want at most 100`},
		{"retries not a number", head + "  - name: a\n    schedule: '@every 1s'\n    builtin: log\n    retries: twice\n",
			`jobs.yaml:7: jobs[0].retries: "twice": want a whole number`},
		{"backoff above its cap", head + "  - name: a\n    schedule: '@every 1s'\n    builtin: log\n    retry_backoff: 1m\n    retry_backoff_max: 10s\n",
			`jobs.yaml:8: jobs[0].retry_backoff_max: "10s": less than retry_backoff (1m0s)`},
		{"negative deadline", head + "  - name: a\n    schedule: '@every 1s'\n    builtin: log\n    deadline: -2m\n",
			`jobs.yaml:7: jobs[0].deadline: "-2m": must not be negative`},
		{"deadline not a duration", head + "  - name: a\n    schedule: '@every 1s'\n    builtin: log\n    deadline: soon\n",
			`jobs.yaml:7: jobs[0].deadline: "soon": not a duration (want e.g. "5s", "1m30s")`},
		{"negative jitter", head + "  - name: a\n    schedule: '@every 1s'\n    builtin: log\n    jitter: -1s\n",
			`jobs.yaml:7: jobs[0].jitter: "-1s": must not be negative`},
		{"bad cron spec", head + "  - name: a\n    schedule: '@every 1s'\n    builtin: log\n  - name: b\n    schedule: '61 * * * *'\n    builtin: log\n",
			`jobs.yaml:8: jobs[1].schedule: "61 * * * *": end of range (61) above maximum (59): 61`},
		{"@every offset not shorter than the interval", head + "  - name: a\n    schedule: '@every 1h offset 90m'\n    builtin: log\n",
			`jobs.yaml:5: jobs[0].schedule: "@every 1h offset 90m": @every offset "90m": must be shorter than the interval (1h0m0s)`},
		{"@every interval of zero", head + "  - name: a\n    schedule: '@every 0s'\n    builtin: log\n",
			`jobs.yaml:5: jobs[0].schedule: "@every 0s": @every interval "0s": must be positive`},
		{"unknown zone", head + "  - name: a\n    schedule: '@every 1s'\n    builtin: log\n  - name: b\n    schedule: 'CRON_TZ=Mars/Olympus_Mons 30 2 * * *'\n    builtin: log\n",
			`jobs.yaml:8: jobs[1].schedule: "CRON_TZ=Mars/Olympus_Mons 30 2 * * *": provided bad location Mars/Olympus_Mons: unknown time zone Mars/Olympus_Mons`},
		{"missing command", head + "  - name: a\n    schedule: '@every 1s'\n",
			`jobs.yaml:4: jobs[0].command: required: set command (run with /bin/sh -c), http (a request to your service) or builtin (sleep, log, fail)`},
		{"empty command", head + "  - name: a\n    schedule: '@every 1s'\n    command: ''\n",
			`jobs.yaml:6: jobs[0].command: "": must not be empty`},
		{"negative timeout", head + "  - name: a\n    schedule: '@every 1s'\n    builtin: log\n  - name: b\n    schedule: '@every 1s'\n    command: date\n    timeout: -5s\n",
			`jobs.yaml:10: jobs[1].timeout: "-5s": must not be negative`},
		{"duration without unit", "election:\n  ttl: 5\njobs:\n  - {name: a, schedule: '@every 1s', builtin: log}\n",
			`jobs.yaml:2: election.ttl: "5": not a duration (want e.g. "5s", "1m30s")`},
		{"both builtin and command", head + "  - name: a\n    schedule: '@every 1s'\n    builtin: log\n    command: date\n",
			`jobs.yaml:7: jobs[0].command: set together with builtin (line 6): want exactly one of builtin, command and http`},
		{"sleep without duration", head + "  - name: a\n    schedule: '@every 1s'\n    builtin: sleep\n",
			`jobs.yaml:6: jobs[0].duration: required with builtin sleep (e.g. duration: 4s)`},
		{"unknown builtin", head + "  - name: a\n    schedule: '@every 1s'\n    builtin: nap\n",
			`jobs.yaml:6: jobs[0].builtin: "nap": unknown (want sleep, log or fail)`},
		{"bad overlap", head + "  - name: a\n    schedule: '@every 1s'\n    builtin: log\n    overlap: never\n",
			`jobs.yaml:7: jobs[0].overlap: "never": unknown (want skip, allow or queue)`},
		{"duplicate name", head + "  - {name: a, schedule: '@every 1s', builtin: log}\n  - {name: a, schedule: '@every 2s', builtin: log}\n",
			`jobs.yaml:5: jobs[1].name: "a": repeated (first on line 4)`},
		{"repeated key", head + "  - name: a\n    name: b\n    schedule: '@every 1s'\n    builtin: log\n",
			`jobs.yaml:5: jobs[0].name: repeated (first on line 4)`},
		{"missing name", head + "  - schedule: '@every 1s'\n    builtin: log\n",
			`jobs.yaml:4: jobs[0].name: required`},
		{"missing jobs", "election:\n  ttl: 2s\n",
			`jobs.yaml:1: jobs: required: a list of jobs`},
		{"jobs not a list", "jobs:\n  name: a\n",
			`jobs.yaml:2: jobs: a mapping: want a list of jobs`},
		{"negative max_catch_up", head + "  - name: a\n    schedule: '@every 1s'\n    builtin: log\n    max_catch_up: -1\n",
			`jobs.yaml:7: jobs[0].max_catch_up: "-1": must not be negative`},
		{"yaml syntax", "jobs:\n\t- name: a\n",
			`jobs.yaml:2: found character that cannot start any token`},
		{"control character", "jobs:\n  - name: a\f\n", `jobs.yaml:2: control characters are not allowed`},
		{"invalid UTF-8", "# ok\n\n# \xff\n", `jobs.yaml:3: invalid leading UTF-8 octet`},
		{"empty name, schedule and builtin", head + "  - name: ''\n    schedule: \"\"\n    builtin: ''\n",
			"jobs.yaml:4: jobs[0].name: \"\": must not be empty\njobs.yaml:5: jobs[0].schedule: \"\": must not be empty\njobs.yaml:6: jobs[0].builtin: \"\": must not be empty"},
		{"http and command", head + "  - name: a\n    schedule: '@every 1s'\n    command: date\n    http: {url: 'http://127.0.0.1:8080/'}\n",
			`jobs.yaml:7: jobs[0].http: set together with command (line 6): want exactly one of builtin, command and http`},
		{"http without url", head + "  - name: a\n    schedule: '@every 1s'\n    http:\n      method: GET\n",
			`jobs.yaml:7: jobs[0].http.url: required (e.g. http://127.0.0.1:8080/jobs/report)`},
		{"http file url", head + "  - name: a\n    schedule: '@every 1s'\n    http:\n      url: file:///etc/passwd\n",
			`jobs.yaml:7: jobs[0].http.url: url "file:///etc/passwd": scheme "file": want http or https`},
		{"http bad method", head + "  - name: a\n    schedule: '@every 1s'\n    http:\n      url: http://x/\n      method: 'GET /'\n",
			`jobs.yaml:8: jobs[0].http.method: method "GET /": not an HTTP method`},
		{"http baton header", head + "  - name: a\n    schedule: '@every 1s'\n    http:\n      url: http://x/\n      headers:\n        baton-token: '1'\n",
			`jobs.yaml:9: jobs[0].http.headers.baton-token: header "baton-token": Baton-* headers are set by baton`},
		{"http unknown field", head + "  - name: a\n    schedule: '@every 1s'\n    http:\n      url: http://x/\n      timeout: 5s\n",
			`jobs.yaml:8: jobs[0].http.timeout: unknown field (want one of method, url, headers, body, bearer_token_file, ca_cert, client_cert, client_key, retry_statuses)`},
		{"http bad retry status", head + "  - name: a\n    schedule: '@every 1s'\n    http:\n      url: http://x/\n      retry_statuses: [409, 2xx]\n",
			`jobs.yaml:8: jobs[0].http.retry_statuses[1]: "2xx": want a status from 300 to 599 (e.g. 409) or a class (3xx, 4xx, 5xx)`},
		{"http retry statuses not a list", head + "  - name: a\n    schedule: '@every 1s'\n    http:\n      url: http://x/\n      retry_statuses: 5xx\n",
			`jobs.yaml:8: jobs[0].http.retry_statuses: "5xx": want a list of statuses, e.g. [408, 429, 5xx]`},
		{"http idempotency key header", head + "  - name: a\n    schedule: '@every 1s'\n    http:\n      url: http://x/\n      headers: {Idempotency-Key: k}\n",
			`jobs.yaml:8: jobs[0].http.headers.Idempotency-Key: header "Idempotency-Key": set by baton (the run id)`},
		{"http cert without key", head + "  - name: a\n    schedule: '@every 1s'\n    http:\n      url: https://x/\n      client_cert: c.pem\n",
			`jobs.yaml:7: jobs[0].http.client_cert: client_cert and client_key: give both or neither`},
		{"http with duration", head + "  - name: a\n    schedule: '@every 1s'\n    http: {url: 'http://x/'}\n    duration: 1s\n",
			`jobs.yaml:7: jobs[0].duration: only for builtin sleep, not for a command or http job`},
		{"backend not a mapping", "backend: etcd\njobs:\n  - {name: a, schedule: '@every 1s', builtin: log}\n",
			`jobs.yaml:1: backend: "etcd": want a mapping of settings`},
		{"repeated setting", "node:\n  http: ':1'\n  http: ':2'\njobs:\n  - {name: a, schedule: '@every 1s', builtin: log}\n",
			`jobs.yaml:3: node.http: repeated (first on line 2)`},
		{"setting a mapping", "backend:\n  endpoints: {a: b}\njobs:\n  - {name: a, schedule: '@every 1s', builtin: log}\n",
			`jobs.yaml:2: backend.endpoints: a mapping: want a single value`},
		{"empty file", "", `jobs.yaml: empty file: want election: and jobs:`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := jobsfile.Parse("jobs.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("no error; want %s", tc.want)
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("error:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// An HTTP job and the settings sections.
func TestParse_HTTPAndSettings(t *testing.T) {
	const y = `election:
  name: orders
  ttl: 5s
backend:
  kind: etcd
  endpoints:
    - http://10.0.0.1:2379
    - http://10.0.0.2:2379
node:
  http: 127.0.0.1:8081
  standby: true
jobs:
  - name: report
    schedule: "@every 1m"
    http:
      url: http://127.0.0.1:8080/jobs/report
      method: PUT
      headers:
        X-Team: billing
        Content-Type: application/json
      body: '{"full": true}'
      bearer_token_file: /run/secrets/job-token
    retries: 2
`
	f, err := jobsfile.Parse("baton.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	want := []jobsfile.Setting{
		{Section: "election", Key: "name", Value: "orders", Line: 2},
		{Section: "backend", Key: "kind", Value: "etcd", Line: 5},
		{Section: "backend", Key: "endpoints", Value: "http://10.0.0.1:2379,http://10.0.0.2:2379", Line: 6},
		{Section: "node", Key: "http", Value: "127.0.0.1:8081", Line: 10},
		{Section: "node", Key: "standby", Value: "true", Line: 11},
	}
	if !slices.Equal(f.Settings, want) {
		t.Errorf("settings = %+v\nwant %+v", f.Settings, want)
	}
	h := f.Jobs[0].HTTP
	if h == nil || h.URL != "http://127.0.0.1:8080/jobs/report" || h.Method != "PUT" || h.Body != `{"full": true}` ||
		h.BearerTokenFile != "/run/secrets/job-token" || len(h.Headers) != 2 || h.Headers[0] != [2]string{"X-Team", "billing"} {
		t.Errorf("http = %+v", h)
	}
	if e := f.Errorf(f.Settings[2], "%q: bad", "x").Error(); e != `baton.yaml:6: backend.endpoints: "x": bad` {
		t.Errorf("Errorf = %s", e)
	}
	// The same job with another header is another job.
	g, _ := jobsfile.Parse("baton.yaml", []byte(strings.Replace(y, "billing", "ops", 1)))
	if jobsfile.SameJob(f.Jobs[0], g.Jobs[0]) || f.JobsHash() == g.JobsHash() {
		t.Error("a changed header leaves the job the same")
	}
	g, _ = jobsfile.Parse("baton.yaml", []byte(y))
	if !jobsfile.SameJob(f.Jobs[0], g.Jobs[0]) || f.JobsHash() != g.JobsHash() {
		t.Error("the same http job parsed twice differs")
	}
	// retry_statuses: absent is nil (the default), [] is empty, not nil,
	// and each is another job.
	if h.RetryStatuses != nil {
		t.Errorf("retry_statuses absent: %q, want nil", h.RetryStatuses)
	}
	for _, c := range []struct {
		yaml string
		want []string
	}{{"[]", []string{}}, {"[409, 4xx, '503']", []string{"409", "4xx", "503"}}} {
		y2 := strings.Replace(y, "      method: PUT\n", "      method: PUT\n      retry_statuses: "+c.yaml+"\n", 1)
		g, err := jobsfile.Parse("baton.yaml", []byte(y2))
		if err != nil {
			t.Fatalf("retry_statuses: %s: %v", c.yaml, err)
		}
		if got := g.Jobs[0].HTTP.RetryStatuses; got == nil || !slices.Equal(got, c.want) {
			t.Errorf("retry_statuses: %s = %#v, want %#v", c.yaml, got, c.want)
		}
		if f.JobsHash() == g.JobsHash() {
			t.Errorf("retry_statuses: %s leaves the hash the same", c.yaml)
		}
	}
}

func TestParse_ReportsEveryProblem(t *testing.T) {
	_, err := jobsfile.Parse("j.yaml", []byte("jobs:\n  - name: a\n    schedule: nope\n    builtin: log\n    timeout: -1s\n"))
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "j.yaml:3: jobs[0].schedule: ") || !strings.HasPrefix(lines[1], "j.yaml:5: jobs[0].timeout: ") {
		t.Errorf("error:\n%v", err)
	}
	var fe *jobsfile.Error
	if !errors.As(err, &fe) || fe.Line != 3 || fe.Field != "jobs[0].schedule" {
		t.Errorf("errors.As: %+v", fe)
	}
}

func TestFile_Locate(t *testing.T) {
	f, err := jobsfile.Parse("jobs.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	_, herr := schedulerhost.New(schedulerhost.Config{Jobs: []schedulerhost.Job{{Name: "nap", Schedule: "bad spec"}}})
	got := f.Locate(herr).Error()
	if !strings.HasPrefix(got, `jobs.yaml:10: jobs[1]: Schedule "bad spec": `) {
		t.Errorf("Locate = %s", got)
	}
}

func TestLoad_Example(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "cmd", "demo", "jobs.example.yaml")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no example: %v", err)
	}
	f, err := jobsfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Jobs) < 3 {
		t.Errorf("example has %d jobs", len(f.Jobs))
	}
}

// TestJobsHash: the hash of a job set ignores the order of the jobs, the
// lines, comments and the election section, and changes with any field of
// any job.
func TestJobsHash(t *testing.T) {
	f, err := jobsfile.Parse("jobs.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	h := f.JobsHash()
	if len(h) != 64 {
		t.Fatalf("JobsHash = %q, want 64 hex digits (SHA-256)", h)
	}
	reordered := slices.Clone(f.Jobs)
	slices.Reverse(reordered)
	moved := &jobsfile.File{Path: "other.yaml", Election: jobsfile.Election{TTL: time.Minute}, Jobs: reordered}
	for i := range moved.Jobs {
		moved.Jobs[i].Line += 7
	}
	if got := moved.JobsHash(); got != h {
		t.Errorf("hash of the same jobs reordered, on other lines: %s, want %s", got, h)
	}
	for name, edit := range map[string]func(*jobsfile.Job){
		"schedule": func(j *jobsfile.Job) { j.Schedule = "@every 11s" },
		"command":  func(j *jobsfile.Job) { j.Command += " " },
		"timeout":  func(j *jobsfile.Job) { j.Timeout++ },
		"name":     func(j *jobsfile.Job) { j.Name = "env2" },
	} {
		g := *f
		g.Jobs = append([]jobsfile.Job(nil), f.Jobs...)
		edit(&g.Jobs[2])
		if g.JobsHash() == h {
			t.Errorf("%s changed: same hash", name)
		}
	}
}

// The files of an HTTP job (bearer_token_file, ca_cert, client_cert,
// client_key) are relative to the jobs file's directory when relative.
func TestParse_HTTPFilesRelativeToTheFile(t *testing.T) {
	const y = `jobs:
  - name: report
    schedule: "@every 1m"
    http:
      url: https://127.0.0.1:8080/jobs/report
      bearer_token_file: secrets/job-token
      ca_cert: /etc/ssl/ca.pem
      client_cert: tls/client.pem
      client_key: tls/client.key
`
	path := filepath.Join("conf", "baton.yaml")
	f, err := jobsfile.Parse(path, []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	h := f.Jobs[0].HTTP
	want := jobsfile.HTTP{URL: "https://127.0.0.1:8080/jobs/report", BearerTokenFile: filepath.Join("conf", "secrets", "job-token"),
		CACert: "/etc/ssl/ca.pem", ClientCert: filepath.Join("conf", "tls", "client.pem"), Key: filepath.Join("conf", "tls", "client.key")}
	if h == nil || h.BearerTokenFile != want.BearerTokenFile || h.CACert != want.CACert || h.ClientCert != want.ClientCert || h.Key != want.Key {
		t.Errorf("http = %+v\nwant %+v", h, want)
	}
}

// Instances beside their own service differ in the job URL's host and
// port, and in where their secrets and certificates are: the hash of the
// job set ignores those, and still covers the URL's path and what every
// instance must agree on.
func TestJobsHash_IgnoresPerInstanceAddresses(t *testing.T) {
	const y = `jobs:
  - name: report
    schedule: "@every 1m"
    timeout: 10s
    retries: 2
    http:
      url: http://127.0.0.1:8081/jobs/report?full=1
      bearer_token_file: /etc/one/token
`
	hash := func(s string) string {
		t.Helper()
		f, err := jobsfile.Parse("baton.yaml", []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return f.JobsHash()
	}
	h := hash(y)
	for _, other := range []string{
		strings.Replace(y, "127.0.0.1:8081", "127.0.0.1:8082", 1),
		strings.Replace(y, "http://127.0.0.1:8081", "https://app-2.internal", 1),
		strings.Replace(y, "/etc/one/token", "/etc/two/token", 1),
	} {
		if got := hash(other); got != h {
			t.Errorf("an instance's own address or files change the hash:\n%s", other)
		}
	}
	for _, other := range []string{
		strings.Replace(y, "/jobs/report", "/jobs/other", 1),
		strings.Replace(y, "full=1", "full=0", 1),
		strings.Replace(y, "@every 1m", "@every 2m", 1),
		strings.Replace(y, "retries: 2", "retries: 3", 1),
		strings.Replace(y, "timeout: 10s", "timeout: 11s", 1),
	} {
		if got := hash(other); got == h {
			t.Errorf("same hash for another job:\n%s", other)
		}
	}
}
