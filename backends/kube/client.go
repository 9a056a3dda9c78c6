package kube

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// Client speaks to one Kubernetes API server: the few calls on Leases and
// ConfigMaps that the backend makes, as JSON over HTTPS. It is not
// client-go: the backend needs GET, POST, PUT with a resourceVersion
// precondition and a watch on one object, and keeping client-go out keeps
// baton's dependencies what they are for users of the other backends.
//
// A Client has no client-side rate limit; the server's API Priority and
// Fairness may answer 429, which the backend retries like any transient
// error. Its methods are safe for concurrent use.
type Client struct {
	server    string // https://host:port, without a trailing slash
	http      *http.Client
	token     string
	tokenFile string
	tokenFunc func() (string, error)
	timeout   time.Duration
	labels    map[string]string // set on the objects create makes (events.go)

	mu        sync.Mutex
	fileToken string
	readAt    time.Time
}

// ClientConfig is how to reach an API server.
type ClientConfig struct {
	// Server is the API server's URL, such as https://10.0.0.1:443.
	Server string
	// Token is a bearer token. TokenFile, if set instead, is a file
	// holding one, read again every minute (service account tokens are
	// rotated).
	Token     string
	TokenFile string
	// CAFile is a PEM file of the CAs that sign the server's certificate;
	// empty means the system's roots.
	CAFile string
	// CAData is PEM CAs given inline, used as well as CAFile.
	CAData []byte
	// CertFile and KeyFile, or CertData and KeyData (PEM), are a client
	// certificate the client presents.
	CertFile, KeyFile string
	CertData, KeyData []byte
	// InsecureSkipVerify trusts any server certificate. Only a
	// kubeconfig that asks for it, and a caller that allows it, set it.
	InsecureSkipVerify bool
	// TokenFunc, if set, gives the bearer token for each request instead
	// of Token and TokenFile (an exec credential plugin: kubeconfig.go).
	TokenFunc func() (string, error)
	// Timeout bounds each request but watches. Zero means 10 s.
	Timeout time.Duration
}

// The files a pod's service account is mounted as.
const (
	saDir = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// InClusterConfig returns the ClientConfig of a pod's service account:
// the API server from KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT, the token and CA mounted under
// /var/run/secrets/kubernetes.io/serviceaccount.
func InClusterConfig() (ClientConfig, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return ClientConfig{}, errors.New("kube: not in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set")
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return ClientConfig{Server: "https://" + host + ":" + port, TokenFile: saDir + "/token", CAFile: saDir + "/ca.crt"}, nil
}

// InClusterNamespace returns the namespace of the pod's service account,
// or "" outside a pod.
func InClusterNamespace() string {
	b, err := os.ReadFile(saDir + "/namespace")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// NewClient returns a Client for cfg. It reads the CA file now, and the
// token file now and then.
func NewClient(cfg ClientConfig) (*Client, error) {
	u, err := url.Parse(cfg.Server)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("kube: Server %q: want an http(s)://host:port URL", cfg.Server)
	}
	tlsCfg, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	c := &Client{
		server:    strings.TrimSuffix(cfg.Server, "/"),
		http:      &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 8}},
		token:     cfg.Token,
		tokenFile: cfg.TokenFile,
		tokenFunc: cfg.TokenFunc,
	}
	if cfg.TokenFile != "" {
		if _, err := c.bearer(); err != nil {
			return nil, err
		}
	}
	c.timeout = cfg.Timeout
	return c, nil
}

// CloseIdleConnections closes the client's idle connections.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

func (c *Client) bearer() (string, error) {
	if c.tokenFunc != nil {
		return c.tokenFunc()
	}
	if c.tokenFile == "" {
		return c.token, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fileToken == "" || time.Since(c.readAt) > time.Minute {
		b, err := os.ReadFile(c.tokenFile)
		if err != nil {
			if c.fileToken != "" {
				return c.fileToken, nil
			}
			return "", fmt.Errorf("kube: TokenFile %q: %w", c.tokenFile, err)
		}
		c.fileToken, c.readAt = strings.TrimSpace(string(b)), time.Now()
	}
	return c.fileToken, nil
}

// StatusError is an API server's refusal: its HTTP status and the reason
// and message of the Status object it sent.
type StatusError struct {
	Code    int
	Reason  string
	Message string
	Method  string
	Path    string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Code, e.Reason, e.Message)
}

func isCode(err error, code int) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == code
}

func isNotFound(err error) bool { return isCode(err, http.StatusNotFound) }
func isConflict(err error) bool { return isCode(err, http.StatusConflict) }

// isDenied reports a refusal that retrying will not mend: a bad token or
// a missing permission.
func isDenied(err error) bool {
	return isCode(err, http.StatusUnauthorized) || isCode(err, http.StatusForbidden)
}

// do sends one request with body (marshalled as JSON unless nil) and
// decodes a 2xx answer into out (unless nil).
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("kube: %s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return statusError(method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("kube: %s %s: decoding the answer: %w", method, path, err)
		}
	}
	return nil
}

func (c *Client) send(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.server+path, rd)
	if err != nil {
		return nil, err
	}
	tok, err := c.bearer()
	if err != nil {
		return nil, err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp, nil
}

func statusError(method, path string, code int, body []byte) error {
	var st struct {
		Reason  string `json:"reason"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &st) != nil || st.Message == "" {
		st.Message = strings.TrimSpace(string(body))
		if len(st.Message) > 200 {
			st.Message = st.Message[:200]
		}
	}
	if st.Reason == "" {
		st.Reason = http.StatusText(code)
	}
	return &StatusError{Code: code, Reason: st.Reason, Message: st.Message, Method: method, Path: path}
}

// watchEvent is one line of a watch stream.
type watchEvent struct {
	Type   string          `json:"type"` // ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
	Object json.RawMessage `json:"object"`
}

// watchOne watches the object named name in the collection at path from
// resourceVersion rv, and returns the first event (or the stream's end,
// as an error) before ctx is done or timeout passes. An expired rv comes
// back as a StatusError with code 410.
func (c *Client) watchOne(ctx context.Context, path, name, rv string, timeout time.Duration) (watchEvent, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	q := url.Values{"watch": {"1"}, "fieldSelector": {"metadata.name=" + name}, "allowWatchBookmarks": {"false"}}
	if rv != "" {
		q.Set("resourceVersion", rv)
	}
	q.Set("timeoutSeconds", fmt.Sprint(max(1, int(timeout/time.Second)+1)))
	resp, err := c.send(ctx, http.MethodGet, path+"?"+q.Encode(), nil)
	if err != nil {
		return watchEvent{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return watchEvent{}, statusError(http.MethodGet, path, resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		var ev watchEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return watchEvent{}, fmt.Errorf("kube: watch %s: %w", path, err)
		}
		if ev.Type == "BOOKMARK" {
			continue
		}
		if ev.Type == "ERROR" {
			var st struct {
				Code    int    `json:"code"`
				Reason  string `json:"reason"`
				Message string `json:"message"`
			}
			json.Unmarshal(ev.Object, &st)
			return watchEvent{}, &StatusError{Code: st.Code, Reason: st.Reason, Message: st.Message, Method: "WATCH", Path: path}
		}
		return ev, nil
	}
	if err := sc.Err(); err != nil {
		return watchEvent{}, fmt.Errorf("kube: watch %s: %w", path, err)
	}
	return watchEvent{}, errWatchEnded
}

var errWatchEnded = errors.New("kube: watch ended without an event")

// checkWatch starts a watch of the object named name in the collection
// at path and stops it as soon as the server has answered: it returns
// the server's refusal, if any.
func (c *Client) checkWatch(ctx context.Context, path, name string) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	q := url.Values{"watch": {"1"}, "fieldSelector": {"metadata.name=" + name}, "timeoutSeconds": {"1"}}
	resp, err := c.send(ctx, http.MethodGet, path+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return statusError("WATCH", path, resp.StatusCode, b)
	}
	return nil
}
