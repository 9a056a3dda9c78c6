package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/httpapi"
	"github.com/batonhq/baton/internal/cli"
	"github.com/batonhq/baton/internal/jobsfile"
	"github.com/batonhq/baton/ledger"
)

// defaultNode is the node the client commands talk to without --node or
// $BATON_NODE: the default --http of `baton run`.
const defaultNode = "http://" + cli.DefaultBatonHTTP

// client is a connection to one node's HTTP API.
type client struct {
	base      string
	baseFrom  string // where base came from, for errors: FILE:LINE: node.http, or $BATON_NODE
	tokenFile string
	tokenFrom string // where tokenFile came from, for errors: FILE:LINE: field, or $VAR
	config    string
	json      bool
	timeout   time.Duration
	stdout    io.Writer
}

// clientFlagSet returns the flag set of a client command.
func clientFlagSet(name string) (*flag.FlagSet, *client) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	c := &client{}
	fs.StringVar(&c.base, "node", "", "URL of a node's HTTP API (default $BATON_NODE, else "+defaultNode+")")
	fs.StringVar(&c.tokenFile, "admin-token-file", "", "file holding the admin token (default $BATON_ADMIN_TOKEN_FILE, else $"+httpapi.AdminTokenEnv+")")
	fs.StringVar(&c.config, "config", "", "the node's config file: its node.http and node.admin_token_file are the defaults of\n--node and --admin-token-file (default $BATON_CONFIG, else ./baton.yaml if there is one)")
	fs.BoolVar(&c.json, "json", false, "print the node's answer as JSON, for scripts")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "bound on each request")
	return fs, c
}

// parse parses args into fs; want is how many arguments the command takes
// (a job name: 1). It returns them.
func (c *client) parse(fs *flag.FlagSet, args []string, want int, stdout, stderr io.Writer) ([]string, error) {
	fs.SetOutput(stderr)
	// Flags may come after the job name: baton pause JOB --note "...".
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != want {
		if want == 0 {
			return nil, fmt.Errorf("baton %s: unexpected argument %q", fs.Name(), pos[0])
		}
		return nil, fmt.Errorf("baton %s: want a job name: baton %s JOB", fs.Name(), fs.Name())
	}
	if c.base == "" {
		if c.base = os.Getenv("BATON_NODE"); c.base != "" {
			c.baseFrom = "$BATON_NODE"
		}
	}
	if c.tokenFile == "" {
		if c.tokenFile = os.Getenv(cli.EnvName("admin-token-file")); c.tokenFile != "" {
			c.tokenFrom = "$" + cli.EnvName("admin-token-file")
		}
	}
	if c.base == "" || (c.tokenFile == "" && os.Getenv(httpapi.AdminTokenEnv) == "") {
		if err := c.fromConfig(); err != nil {
			return nil, err
		}
	}
	if c.base == "" {
		c.base = defaultNode
	}
	u, err := url.Parse(c.base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--node %q: want a URL such as %s", c.base, defaultNode)
	}
	c.base = strings.TrimSuffix(c.base, "/")
	c.stdout = stdout
	return pos, nil
}

// fromConfig takes the node's address and admin token file from its
// config file, where the flags and the environment leave them unset: the
// file of --config, else $BATON_CONFIG, else ./baton.yaml if it exists.
func (c *client) fromConfig() error {
	path := c.config
	if path == "" {
		path = os.Getenv(cli.EnvName("config"))
	}
	if path == "" {
		if _, err := os.Stat("baton.yaml"); err != nil {
			return nil
		}
		path = "baton.yaml"
	}
	f, err := jobsfile.Load(path)
	if err != nil {
		return err
	}
	for _, s := range f.Settings {
		switch s.Field() {
		case "node.http":
			if c.base != "" {
				continue
			}
			host, port, err := net.SplitHostPort(s.Value)
			if err != nil || port == "0" || port == "" {
				continue // no fixed address to reach
			}
			if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
				host = "127.0.0.1" // listening on every address: this one too
			}
			c.base = "http://" + net.JoinHostPort(host, port)
			c.baseFrom = fmt.Sprintf("%s:%d: %s", path, s.Line, s.Field())
		case "node.admin_token_file":
			if c.tokenFile == "" && s.Value != "" {
				c.tokenFile = s.Value
				if !filepath.IsAbs(c.tokenFile) {
					c.tokenFile = filepath.Join(filepath.Dir(path), c.tokenFile) // relative to the file, as for baton run
				}
				c.tokenFrom = fmt.Sprintf("%s:%d: %s", path, s.Line, s.Field())
			}
		}
	}
	return nil
}

// apiError is a node's answer other than 2xx.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.msg) }

// do sends a request and returns the answer's body, or an error with the
// node's message when the status is not 2xx.
func (c *client) do(ctx context.Context, method, path string, form url.Values, header http.Header, admin bool) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, 0, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if admin {
		tok, _, err := httpapi.LoadAdminToken(c.tokenFile)
		if err != nil && c.tokenFrom != "" {
			return nil, 0, fmt.Errorf("%s: %w", c.tokenFrom, err)
		}
		if err != nil {
			return nil, 0, err
		}
		if tok == nil {
			return nil, 0, fmt.Errorf("baton: no admin token: give --admin-token-file, set $%s or $%s, or --config with node.admin_token_file",
				cli.EnvName("admin-token-file"), httpapi.AdminTokenEnv)
		}
		req.Header.Set("Authorization", "Bearer "+string(tok))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil && c.baseFrom != "" {
		return nil, 0, fmt.Errorf("%s: %s %s: %w", c.baseFrom, method, c.base+path, err)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: %w", method, c.base+path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("%s %s: %w", method, c.base+path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		msg := strings.TrimSpace(string(b))
		if json.Unmarshal(b, &e) == nil && e.Error+e.Message != "" {
			msg = e.Error + e.Message
		}
		return b, resp.StatusCode, &apiError{resp.StatusCode, msg}
	}
	return b, resp.StatusCode, nil
}

// print writes the raw JSON with --json, else calls human.
func (c *client) print(raw []byte, human func(io.Writer) error) error {
	if c.json {
		var buf bytes.Buffer
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return fmt.Errorf("the node's answer is not JSON: %w", err)
		}
		buf.WriteByte('\n')
		_, err := c.stdout.Write(buf.Bytes())
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	if err := human(tw); err != nil {
		return err
	}
	return tw.Flush()
}

// who is the default "by" of a pause or run now: USER@HOST.
func who() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

func runPause(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := clientFlagSet("pause")
	note := fs.String("note", "", "why, shown with the pause")
	by := fs.String("by", who(), "who pauses, shown with the pause")
	pos, err := c.parse(fs, args, 1, stdout, stderr)
	if err != nil {
		return err
	}
	raw, _, err := c.do(ctx, http.MethodPost, "/jobs/"+url.PathEscape(pos[0])+"/pause", url.Values{"note": {*note}, "by": {*by}}, nil, true)
	if err != nil {
		return err
	}
	var p control.Pause
	if err := json.Unmarshal(raw, &p); err != nil {
		return err
	}
	return c.print(raw, func(w io.Writer) error {
		fmt.Fprintf(w, "%s paused by %s at %s: every leader skips its ticks until resumed\n", p.Job, p.By, when(p.At))
		return nil
	})
}

func runResume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := clientFlagSet("resume")
	missed := fs.Bool("run-missed", false, "also run the ticks skipped while paused (default: they are not replayed)")
	by := fs.String("by", who(), "who resumes")
	pos, err := c.parse(fs, args, 1, stdout, stderr)
	if err != nil {
		return err
	}
	form := url.Values{"by": {*by}}
	if *missed {
		form.Set("run_missed", "1")
	}
	raw, _, err := c.do(ctx, http.MethodPost, "/jobs/"+url.PathEscape(pos[0])+"/resume", form, nil, true)
	if err != nil {
		return err
	}
	return c.print(raw, func(w io.Writer) error {
		fmt.Fprintf(w, "%s resumed\n", pos[0])
		return nil
	})
}

// newRequestID is a random run-now request id.
func newRequestID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "cli-" + hex.EncodeToString(b)
}

func runTrigger(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := clientFlagSet("trigger")
	id := fs.String("request-id", "", "idempotency key: a retried trigger with the same id runs once, while the leader keeps the done request (24 h, the job's 50 newest) (default: a new random id)")
	by := fs.String("by", who(), "who asks, recorded with the run")
	wait := fs.Bool("wait", false, "wait until the run has ended; exit 1 if it failed")
	pos, err := c.parse(fs, args, 1, stdout, stderr)
	if err != nil {
		return err
	}
	if *id == "" {
		*id = newRequestID()
	}
	raw, code, err := c.do(ctx, http.MethodPost, "/jobs/"+url.PathEscape(pos[0])+"/run", url.Values{"by": {*by}},
		http.Header{"Idempotency-Key": {*id}}, true)
	if err != nil {
		return err
	}
	var r control.RunRequest
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	for *wait && r.State != control.StateDone {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(250 * time.Millisecond):
		}
		raw, _, err = c.do(ctx, http.MethodGet, "/runs/"+url.PathEscape(r.ID), nil, nil, false)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return err
		}
	}
	err = c.print(raw, func(w io.Writer) error {
		switch {
		case r.State == control.StateDone:
			fmt.Fprintf(w, "%s: request %s: %s on %s with token %d", r.Job, r.ID, r.Result, r.Instance, r.Token)
			if r.Error != "" {
				fmt.Fprintf(w, ": %s", r.Error)
			}
			fmt.Fprintln(w)
		case code == http.StatusOK:
			fmt.Fprintf(w, "%s: request %s was already made (%s); not asked again\n", r.Job, r.ID, r.State)
		default:
			fmt.Fprintf(w, "%s: request %s accepted by %s (%s); the leader runs it under its token\n", r.Job, r.ID, r.Via, r.State)
		}
		return nil
	})
	if err == nil && *wait && r.Result != ledger.ResultOK {
		return &cli.ExitError{Code: 1}
	}
	return err
}

func runStepDown(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := clientFlagSet("step-down")
	cooldown := fs.Duration("cooldown", 0, "no campaign for this long (default: the node's --step-down-cooldown)")
	if _, err := c.parse(fs, args, 0, stdout, stderr); err != nil {
		return err
	}
	path := "/step-down"
	if *cooldown > 0 {
		path += "?cooldown=" + url.QueryEscape(cooldown.String())
	}
	return c.admin(ctx, path)
}

func runEligible(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	fs, c := clientFlagSet(name)
	if _, err := c.parse(fs, args, 0, stdout, stderr); err != nil {
		return err
	}
	return c.admin(ctx, "/"+name)
}

// admin posts to a leadership endpoint and prints its message.
func (c *client) admin(ctx context.Context, path string) error {
	raw, _, err := c.do(ctx, http.MethodPost, path, nil, nil, true)
	if err != nil {
		return err
	}
	var rep struct {
		Message string `json:"message"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		return err
	}
	return c.print(raw, func(w io.Writer) error {
		fmt.Fprintln(w, rep.Message)
		return nil
	})
}
