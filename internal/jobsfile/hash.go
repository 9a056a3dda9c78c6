package jobsfile

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"reflect"
	"slices"
)

// JobsHash returns the SHA-256 of f's jobs, hex: the same for the same
// set of jobs, whatever their order, lines and comments or the election
// section, so that instances can be compared (GET /status). It hashes
// the JSON of the jobs sorted by name: every field but Line and what is
// each instance's own. Those are an HTTP job's scheme, host and port
// (each sidecar calls its own service) and its files (bearer_token_file,
// ca_cert, client_cert, client_key); the URL's path and query count.
func (f *File) JobsHash() string {
	jobs := slices.Clone(f.Jobs)
	for i := range jobs {
		jobs[i].Line = 0
		if h := jobs[i].HTTP; h != nil {
			shared := *h
			shared.URL = urlPathQuery(h.URL)
			shared.BearerTokenFile, shared.CACert, shared.ClientCert, shared.Key = "", "", "", ""
			jobs[i].HTTP = &shared
		}
	}
	slices.SortStableFunc(jobs, func(a, b Job) int { return cmp.Compare(a.Name, b.Name) })
	b, err := json.Marshal(jobs)
	if err != nil { // a Job is strings, numbers and lists of them
		panic("jobsfile: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// SameJob reports whether a and b are the same entry but for their lines.
func SameJob(a, b Job) bool {
	a.Line, b.Line = 0, 0
	return reflect.DeepEqual(a, b)
}

// urlPathQuery is raw without its scheme and host: what instances calling
// their own service have in common.
func urlPathQuery(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Scheme, u.Host, u.User = "", "", nil
	return u.String()
}
