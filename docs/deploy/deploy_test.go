// Package deploy_test checks the deployment examples beside it: the
// configs parse and a node would accept them, the stop grace covers
// baton's shutdown budget, and the probes and ports agree with the config.
package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/batonhq/baton/httpapi"
	"github.com/batonhq/baton/internal/cli"
	"github.com/batonhq/baton/internal/jobsfile"
)

// config parses a baton config and checks that a node accepts it.
func config(t *testing.T, name string, data []byte) (*jobsfile.File, map[string]string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := jobsfile.Load(p)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := cli.CheckSettings(f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	settings := map[string]string{}
	for _, s := range f.Settings {
		settings[s.Field()] = s.Value
	}
	return f, settings
}

// get walks a decoded YAML document: get(doc, "spec", "template", ...).
func get(v any, path ...any) any {
	for _, k := range path {
		switch k := k.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func TestKubernetes(t *testing.T) {
	raw, err := os.ReadFile("kubernetes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]map[string]any{}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("kubernetes.yaml: %v", err)
		}
		docs[d["kind"].(string)] = d
	}
	cm, dep := docs["ConfigMap"], docs["Deployment"]
	if cm == nil || dep == nil {
		t.Fatalf("kubernetes.yaml: want a ConfigMap and a Deployment, have %v", docs)
	}
	data, _ := get(cm, "data", "baton.yaml").(string)
	f, set := config(t, "baton.yaml", []byte(data))

	hardened(t, "kubernetes.yaml", dep, "baton")
	if pdb := docs["PodDisruptionBudget"]; pdb == nil {
		t.Error("kubernetes.yaml: no PodDisruptionBudget")
	} else {
		pdbFor(t, "kubernetes.yaml", []map[string]any{dep, pdb})
	}
	if r, _ := get(dep, "spec", "replicas").(int); r < 2 {
		t.Errorf("replicas %d: want at least 2, the point of an election", r)
	}
	pod := get(dep, "spec", "template", "spec")
	budget := httpapi.ShutdownBudget(cli.ShutdownConfigOf(f))
	grace, _ := get(pod, "terminationGracePeriodSeconds").(int)
	if time.Duration(grace)*time.Second <= budget {
		t.Errorf("terminationGracePeriodSeconds %d: not above baton's shutdown budget %v: the kubelet would SIGKILL a draining leader", grace, budget)
	}
	t.Logf("terminationGracePeriodSeconds %d, shutdown budget %v", grace, budget)

	var baton any
	for i := 0; get(pod, "containers", i) != nil; i++ {
		if get(pod, "containers", i, "name") == "baton" {
			baton = get(pod, "containers", i)
		}
	}
	if baton == nil {
		t.Fatal("no container named baton")
	}
	args, _ := get(baton, "args").([]any)
	if len(args) < 3 || args[0] != "run" || args[1] != "--config" {
		t.Fatalf("baton args %v: want run --config FILE", args)
	}
	configPath := args[2].(string)

	host, port, err := net.SplitHostPort(set["node.http"])
	if err != nil {
		t.Fatalf("node.http %q: %v", set["node.http"], err)
	}
	if a, err := netip.ParseAddr(host); err == nil && a.IsLoopback() || host == "localhost" {
		t.Errorf("node.http %q: loopback, which the kubelet's probes cannot reach", set["node.http"])
	}
	for probe, path := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz"} {
		if p := get(baton, probe, "httpGet", "path"); p != path {
			t.Errorf("%s path %v, want %s", probe, p, path)
		}
		if p := get(baton, probe, "httpGet", "port"); strconv.Itoa(toInt(p)) != port {
			t.Errorf("%s port %v, want %s (node.http)", probe, p, port)
		}
	}
	if p := get(baton, "ports", 0, "containerPort"); strconv.Itoa(toInt(p)) != port {
		t.Errorf("containerPort %v, want %s (node.http)", p, port)
	}

	// The config and the admin token are where the config says.
	mounts := map[string]string{} // mount path → volume
	for i := 0; get(baton, "volumeMounts", i) != nil; i++ {
		mounts[get(baton, "volumeMounts", i, "mountPath").(string)] = get(baton, "volumeMounts", i, "name").(string)
	}
	volumes := map[string]any{}
	for i := 0; get(pod, "volumes", i) != nil; i++ {
		volumes[get(pod, "volumes", i, "name").(string)] = get(pod, "volumes", i)
	}
	vol := func(file string) any {
		return volumes[mounts[filepath.Dir(file)]]
	}
	if v := vol(configPath); get(v, "configMap", "name") != get(cm, "metadata", "name") {
		t.Errorf("--config %s: not in a mount of the ConfigMap %v", configPath, get(cm, "metadata", "name"))
	}
	tok := set["node.admin_token_file"]
	if v := vol(tok); get(v, "secret", "secretName") == nil || get(v, "secret", "items", 0, "path") != filepath.Base(tok) {
		t.Errorf("admin_token_file %s: not a file of a Secret's mount", tok)
	}
	// Each pod its own identity.
	if get(baton, "env", 0, "name") != "BATON_ID" || get(baton, "env", 0, "valueFrom", "fieldRef", "fieldPath") != "metadata.name" {
		t.Errorf("BATON_ID: want the pod's name, have %v", get(baton, "env"))
	}
}

func toInt(v any) int {
	switch v := v.(type) {
	case int:
		return v
	case string:
		n, _ := strconv.Atoi(v)
		return n
	}
	return -1
}

func TestSystemd(t *testing.T) {
	raw, err := os.ReadFile("baton.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, _ := config(t, "baton.yaml", raw)
	unit, err := os.Open("baton.service")
	if err != nil {
		t.Fatal(err)
	}
	defer unit.Close()
	keys := map[string]string{}
	sc := bufio.NewScanner(unit)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			keys[k] = v
		}
	}
	budget := httpapi.ShutdownBudget(cli.ShutdownConfigOf(f))
	stop, err := strconv.Atoi(keys["TimeoutStopSec"])
	if err != nil || time.Duration(stop)*time.Second <= budget {
		t.Errorf("TimeoutStopSec %q: want seconds above baton's shutdown budget %v", keys["TimeoutStopSec"], budget)
	}
	if keys["KillSignal"] != "SIGTERM" {
		t.Errorf("KillSignal %q: baton drains on SIGTERM", keys["KillSignal"])
	}
	if !strings.HasSuffix(keys["ExecStart"], " run --config /etc/baton/baton.yaml") {
		t.Errorf("ExecStart %q: want baton run --config /etc/baton/baton.yaml", keys["ExecStart"])
	}
	if !strings.Contains(keys["ExecReload"], "-HUP") {
		t.Errorf("ExecReload %q: SIGHUP re-reads the jobs", keys["ExecReload"])
	}
	// A cgroup per command job's run needs the unit's cgroup delegated
	// and writable; baton stops its jobs itself, after the drain.
	if keys["Delegate"] != "yes" {
		t.Errorf("Delegate %q: want yes, so that each run gets a cgroup of its own", keys["Delegate"])
	}
	if v := keys["ProtectControlGroups"]; v != "" && v != "no" {
		t.Errorf("ProtectControlGroups %q: makes /sys/fs/cgroup read-only, so runs get no cgroup", v)
	}
	if keys["KillMode"] != "mixed" {
		t.Errorf("KillMode %q: want mixed, SIGTERM to baton alone (its jobs are stopped after the drain)", keys["KillMode"])
	}
}
