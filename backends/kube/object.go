package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Annotations baton keeps on the objects it writes. Other writers of a
// Lease (client-go's leader election, kubectl) keep annotations they do
// not know, so the token survives their terms.
const (
	// annoToken is the fencing token of the Lease's newest baton term.
	annoToken = "baton.dev/token"
	// annoIdentity is the JSON election.Identity of that term's holder.
	annoIdentity = "baton.dev/identity"
	// annoNote is the holder's note (election.Noter): what it could not
	// write elsewhere, such as claims the backend refuses.
	annoNote = "baton.dev/note"
)

// maxNote bounds a note on the Lease, in bytes.
const maxNote = 1024

// microTime is the format of a Lease's acquireTime and renewTime.
const microTime = "2006-01-02T15:04:05.000000Z07:00"

// object is a Kubernetes object as the server sent it. Writes change the
// fields baton owns in raw and send raw back, so that fields baton does
// not know (labels, owner references, a newer API's spec fields) survive
// a PUT.
type object struct {
	raw map[string]any
}

func decodeObject(b []byte) (*object, error) {
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	return &object{raw: raw}, nil
}

func (o *object) MarshalJSON() ([]byte, error) { return json.Marshal(o.raw) }

func (o *object) UnmarshalJSON(b []byte) error {
	o.raw = nil
	return json.Unmarshal(b, &o.raw)
}

func (o *object) section(key string) map[string]any {
	m, _ := o.raw[key].(map[string]any)
	if m == nil {
		m = map[string]any{}
		o.raw[key] = m
	}
	return m
}

func (o *object) meta() map[string]any { return o.section("metadata") }

func (o *object) str(section, key string) string {
	s, _ := o.section(section)[key].(string)
	return s
}

// ResourceVersion, UID: the metadata a compare-and-swap needs.
func (o *object) resourceVersion() string { return o.str("metadata", "resourceVersion") }
func (o *object) uid() string             { return o.str("metadata", "uid") }

func (o *object) annotation(key string) string {
	m, _ := o.meta()["annotations"].(map[string]any)
	s, _ := m[key].(string)
	return s
}

func (o *object) setAnnotation(key, value string) {
	m, _ := o.meta()["annotations"].(map[string]any)
	if m == nil {
		m = map[string]any{}
		o.meta()["annotations"] = m
	}
	m[key] = value
}

// token is the annotated fencing token, 0 if none or unreadable.
func (o *object) token() uint64 {
	n, _ := strconv.ParseUint(o.annotation(annoToken), 10, 64)
	return n
}

// The Lease spec (coordination.k8s.io/v1), as client-go's leader election
// writes it too.
func (o *object) holder() string { return o.str("spec", "holderIdentity") }

func (o *object) durationSeconds() int {
	f, _ := o.section("spec")["leaseDurationSeconds"].(float64)
	return int(f)
}

func (o *object) transitions() int {
	f, _ := o.section("spec")["leaseTransitions"].(float64)
	return int(f)
}

func (o *object) timeField(key string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, o.str("spec", key))
	return t
}

// take writes a new term into the Lease: holder id for ttl, acquired and
// renewed now, one more transition if the holder changes.
func (o *object) take(id string, ttl time.Duration, token uint64, identity []byte, now time.Time) {
	spec := o.section("spec")
	if o.holder() != id {
		spec["leaseTransitions"] = float64(o.transitions() + 1)
	}
	spec["holderIdentity"] = id
	spec["leaseDurationSeconds"] = float64(ttl / time.Second)
	spec["acquireTime"] = now.UTC().Format(microTime)
	spec["renewTime"] = now.UTC().Format(microTime)
	o.setAnnotation(annoToken, strconv.FormatUint(token, 10))
	o.setAnnotation(annoIdentity, string(identity))
	if m, _ := o.meta()["annotations"].(map[string]any); m != nil {
		delete(m, annoNote) // the term before's
	}
}

// renew moves renewTime to now.
func (o *object) renew(now time.Time) {
	o.section("spec")["renewTime"] = now.UTC().Format(microTime)
}

// free writes a released Lease as client-go does: no holder, a duration
// of one second.
func (o *object) free(now time.Time) {
	spec := o.section("spec")
	spec["holderIdentity"] = ""
	spec["leaseDurationSeconds"] = float64(1)
	spec["renewTime"] = now.UTC().Format(microTime)
}

// kind names one resource collection in a namespace.
type kind struct {
	group    string // "" for the core group
	version  string
	resource string // plural: leases, configmaps
	kind     string
}

var (
	leases     = kind{"coordination.k8s.io", "v1", "leases", "Lease"}
	configMaps = kind{"", "v1", "configmaps", "ConfigMap"}
)

func (k kind) collection(ns string) string {
	if k.group == "" {
		return "/api/" + k.version + "/namespaces/" + url.PathEscape(ns) + "/" + k.resource
	}
	return "/apis/" + k.group + "/" + k.version + "/namespaces/" + url.PathEscape(ns) + "/" + k.resource
}

func (k kind) apiVersion() string {
	if k.group == "" {
		return k.version
	}
	return k.group + "/" + k.version
}

// newObject returns an empty object of kind k named name in ns.
func (k kind) newObject(ns, name string) *object {
	return &object{raw: map[string]any{
		"apiVersion": k.apiVersion(),
		"kind":       k.kind,
		"metadata":   map[string]any{"name": name, "namespace": ns},
	}}
}

func (c *Client) get(ctx context.Context, k kind, ns, name string) (*object, error) {
	var o object
	if err := c.do(ctx, http.MethodGet, k.collection(ns)+"/"+url.PathEscape(name), nil, &o); err != nil {
		return nil, err
	}
	return &o, nil
}

func (c *Client) create(ctx context.Context, k kind, ns string, o *object) (*object, error) {
	c.label(o)
	var out object
	if err := c.do(ctx, http.MethodPost, k.collection(ns), o, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// update PUTs o; the server refuses it with 409 unless o's
// resourceVersion is the stored one.
func (c *Client) update(ctx context.Context, k kind, ns string, o *object) (*object, error) {
	name, _ := o.meta()["name"].(string)
	if o.resourceVersion() == "" {
		return nil, fmt.Errorf("kube: update %s %s: no resourceVersion", k.kind, name)
	}
	var out object
	if err := c.do(ctx, http.MethodPut, k.collection(ns)+"/"+url.PathEscape(name), o, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *Client) remove(ctx context.Context, k kind, ns, name string) error {
	return c.do(ctx, http.MethodDelete, k.collection(ns)+"/"+url.PathEscape(name), nil, nil)
}
