package kube

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// Kubeconfig is what LoadKubeconfig read: how to reach the API server of
// one context, and that context's namespace ("" if it names none).
type Kubeconfig struct {
	Client    ClientConfig
	Namespace string
	Context   string // the context's name
	Source    string // the files read, for messages
}

// KubeconfigOptions adjusts LoadKubeconfig.
type KubeconfigOptions struct {
	// Paths are the kubeconfig files, merged as kubectl merges them: the
	// first file to name a cluster, user, context or current-context
	// wins. Empty means $KUBECONFIG (a list split like $PATH), else
	// ~/.kube/config.
	Paths []string
	// Context is the context to use; empty means current-context.
	Context string
	// AllowInsecure accepts a cluster with insecure-skip-tls-verify:
	// true. Without it such a cluster is refused.
	AllowInsecure bool
}

// The parts of a kubeconfig file the backend reads.
type kcFile struct {
	CurrentContext string `yaml:"current-context"`
	Clusters       []struct {
		Name    string    `yaml:"name"`
		Cluster kcCluster `yaml:"cluster"`
	} `yaml:"clusters"`
	Users []struct {
		Name string `yaml:"name"`
		User kcUser `yaml:"user"`
	} `yaml:"users"`
	Contexts []struct {
		Name    string `yaml:"name"`
		Context struct {
			Cluster   string `yaml:"cluster"`
			User      string `yaml:"user"`
			Namespace string `yaml:"namespace"`
		} `yaml:"context"`
	} `yaml:"contexts"`
}

type kcCluster struct {
	Server   string `yaml:"server"`
	CA       string `yaml:"certificate-authority"`
	CAData   string `yaml:"certificate-authority-data"`
	Insecure bool   `yaml:"insecure-skip-tls-verify"`
	dir      string
}

type kcUser struct {
	Token        string  `yaml:"token"`
	TokenFile    string  `yaml:"tokenFile"`
	Cert         string  `yaml:"client-certificate"`
	CertData     string  `yaml:"client-certificate-data"`
	Key          string  `yaml:"client-key"`
	KeyData      string  `yaml:"client-key-data"`
	Exec         *kcExec `yaml:"exec"`
	AuthProvider any     `yaml:"auth-provider"`
	Username     string  `yaml:"username"`
	dir          string
}

// kcContext is one context: its cluster, user and namespace.
type kcContext struct{ cluster, user, namespace string }

// DefaultKubeconfigPaths are the files kubectl reads: $KUBECONFIG split
// like $PATH, or ~/.kube/config.
func DefaultKubeconfigPaths() []string {
	if env := os.Getenv("KUBECONFIG"); env != "" {
		var ps []string
		for _, p := range filepath.SplitList(env) {
			if p != "" {
				ps = append(ps, p)
			}
		}
		return ps
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return nil
	}
	return []string{filepath.Join(home, ".kube", "config")}
}

// LoadKubeconfig reads the kubeconfig files of opts and returns the
// ClientConfig of the chosen context: its cluster's server and CA, and
// its user's token, token file, client certificate or exec credential
// plugin. Relative file names are taken from the directory of the file
// that names them, as kubectl does. A file of $KUBECONFIG that does not
// exist is skipped; if none exists, the error says so.
func LoadKubeconfig(opts KubeconfigOptions) (Kubeconfig, error) {
	paths := opts.Paths
	if len(paths) == 0 {
		paths = DefaultKubeconfigPaths()
	}
	src := strings.Join(paths, string(filepath.ListSeparator))
	clusters, users, contexts := map[string]kcCluster{}, map[string]kcUser{}, map[string]kcContext{}
	current, read := "", 0
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return Kubeconfig{}, fmt.Errorf("kube: kubeconfig %s: %w", p, err)
		}
		read++
		var f kcFile
		if err := yaml.Unmarshal(b, &f); err != nil {
			return Kubeconfig{}, fmt.Errorf("kube: kubeconfig %s: %w", p, err)
		}
		dir := filepath.Dir(p)
		if current == "" {
			current = f.CurrentContext
		}
		for _, c := range f.Clusters {
			if _, ok := clusters[c.Name]; !ok {
				c.Cluster.dir = dir
				clusters[c.Name] = c.Cluster
			}
		}
		for _, u := range f.Users {
			if _, ok := users[u.Name]; !ok {
				u.User.dir = dir
				users[u.Name] = u.User
			}
		}
		for _, c := range f.Contexts {
			if _, ok := contexts[c.Name]; !ok {
				contexts[c.Name] = kcContext{c.Context.Cluster, c.Context.User, c.Context.Namespace}
			}
		}
	}
	if read == 0 {
		return Kubeconfig{}, fmt.Errorf("kube: kubeconfig %q: no such file", src)
	}
	name := opts.Context
	if name == "" {
		name = current
	}
	if name == "" {
		return Kubeconfig{}, fmt.Errorf("kube: kubeconfig %s: current-context is not set (kubectl config use-context NAME)", src)
	}
	ctx, ok := contexts[name]
	if !ok {
		return Kubeconfig{}, fmt.Errorf("kube: kubeconfig %s: context %q: not found", src, name)
	}
	cl, ok := clusters[ctx.cluster]
	if !ok {
		return Kubeconfig{}, fmt.Errorf("kube: kubeconfig %s: context %q: cluster %q: not found", src, name, ctx.cluster)
	}
	u, ok := users[ctx.user]
	if !ok && ctx.user != "" {
		return Kubeconfig{}, fmt.Errorf("kube: kubeconfig %s: context %q: user %q: not found", src, name, ctx.user)
	}
	cc, err := clusterConfig(cl, opts.AllowInsecure)
	if err == nil {
		err = u.apply(&cc)
	}
	if err != nil {
		return Kubeconfig{}, fmt.Errorf("kube: kubeconfig %s: context %q: %w", src, name, err)
	}
	return Kubeconfig{Client: cc, Namespace: ctx.namespace, Context: name, Source: src}, nil
}

func clusterConfig(cl kcCluster, allowInsecure bool) (ClientConfig, error) {
	var cc ClientConfig
	if cl.Server == "" {
		return cc, errors.New("cluster server: empty")
	}
	cc.Server = cl.Server
	if cl.Insecure {
		if !allowInsecure {
			return cc, errors.New("cluster insecure-skip-tls-verify: true: refused (anyone on the path could take the credentials); " +
				"give the cluster's certificate-authority, or allow it explicitly")
		}
		cc.InsecureSkipVerify = true
	}
	cc.CAFile = rel(cl.dir, cl.CA)
	var err error
	if cc.CAData, err = decode64("cluster certificate-authority-data", cl.CAData); err != nil {
		return cc, err
	}
	return cc, nil
}

// apply sets the user's credentials on cc.
func (u kcUser) apply(cc *ClientConfig) error {
	if u.AuthProvider != nil {
		return errors.New("user auth-provider: not supported (kubectl removed the built-in providers too): use an exec credential plugin")
	}
	if u.Username != "" {
		return errors.New("user username/password: basic authentication is not supported")
	}
	var err error
	cc.Token, cc.TokenFile = u.Token, rel(u.dir, u.TokenFile)
	cc.CertFile, cc.KeyFile = rel(u.dir, u.Cert), rel(u.dir, u.Key)
	if cc.CertData, err = decode64("user client-certificate-data", u.CertData); err != nil {
		return err
	}
	if cc.KeyData, err = decode64("user client-key-data", u.KeyData); err != nil {
		return err
	}
	if u.Exec != nil {
		p, err := newExecPlugin(*u.Exec, u.dir, cc.Server)
		if err != nil {
			return err
		}
		cc.TokenFunc = p.token
	}
	return nil
}

func decode64(field, s string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("%s: not base64: %w", field, err)
	}
	return b, nil
}

// rel is name taken from dir if it is relative.
func rel(dir, name string) string {
	if name == "" || filepath.IsAbs(name) {
		return name
	}
	if strings.HasPrefix(name, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, name[2:])
		}
	}
	return filepath.Join(dir, name)
}
