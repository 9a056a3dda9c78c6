package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// The admin endpoints change what a node does: POST /step-down, POST
// /standby, POST /eligible and POST /reload (reload.go). They need the
// bearer token of the node (--admin-token-file or BATON_ADMIN_TOKEN);
// without one they are off.

const (
	// AdminTokenEnv names the environment variable LoadAdminToken reads
	// when no file is given.
	AdminTokenEnv = "BATON_ADMIN_TOKEN"
	// DefaultStepDownCooldown is the default of --step-down-cooldown.
	DefaultStepDownCooldown = 30 * time.Second
)

// LoadAdminToken reads the admin token from file, or when file is "" from
// the environment variable AdminTokenEnv. A nil token (and no error) means
// the admin endpoints are disabled. from says where the token came from,
// for the log.
func LoadAdminToken(file string) (token []byte, from string, err error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, "", fmt.Errorf("--admin-token-file: %w", err)
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return nil, "", fmt.Errorf("--admin-token-file %s: empty", file)
		}
		return []byte(t), "file " + file, nil
	}
	if t := strings.TrimSpace(os.Getenv(AdminTokenEnv)); t != "" {
		return []byte(t), "env " + AdminTokenEnv, nil
	}
	return nil, "disabled", nil
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// tokenMatches compares in constant time; hashing first keeps the length
// of the expected token from showing in the timing too.
func tokenMatches(got string, want []byte) bool {
	g := sha256.Sum256([]byte(got))
	w := sha256.Sum256(want)
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// admin wraps an admin handler: 403 when no token is configured, 401 when
// the request's bearer token is missing or wrong.
func (s *server) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a := s.api
		if len(a.cfg.AdminToken) == 0 {
			http.Error(w, errAdminDisabled.Error(), http.StatusForbidden)
			return
		}
		tok, ok := bearer(r)
		if !ok || !tokenMatches(tok, a.cfg.AdminToken) {
			a.cfg.Logger.Warn("admin request refused", "path", r.URL.Path, "remote", r.RemoteAddr, "bearer_given", ok)
			w.Header().Set("WWW-Authenticate", `Bearer realm="baton"`)
			http.Error(w, "unauthorized: send \"Authorization: Bearer <admin token>\"", http.StatusUnauthorized)
			return
		}
		h(w, r)
	}
}

// adminReply is the JSON answer of the admin endpoints.
type adminReply struct {
	Message       string    `json:"message"`
	Leading       bool      `json:"leading"`                 // leading when the request came
	Eligible      bool      `json:"eligible"`                // may campaign (not on standby)
	CooldownUntil time.Time `json:"cooldown_until,omitzero"` // no campaign before; absent if no cooldown
}

func (s *server) reply(w http.ResponseWriter, code int, msg string, leading bool) {
	rep := adminReply{Message: msg, Leading: leading, Eligible: s.api.cfg.Elector.Eligible(), CooldownUntil: s.api.cfg.Elector.CooldownUntil()}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(rep)
}

// handleStepDown: POST /step-down[?cooldown=DURATION]. A leader stops
// starting runs, drains them as on SIGTERM, releases the lease and does
// not campaign again for the cooldown; a follower only starts the
// cooldown. It answers at once (202 while a term is handed over); /status
// tells when the handover is done.
func (s *server) handleStepDown(w http.ResponseWriter, r *http.Request) {
	a := s.api
	cooldown := a.cfg.StepDownCooldown
	if v := r.URL.Query().Get("cooldown"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			http.Error(w, fmt.Sprintf("cooldown %q: want a duration such as 30s or 10m, not negative", v), http.StatusBadRequest)
			return
		}
		cooldown = d
	}
	leading, token, until := a.stepDown(cooldown)
	log := a.cfg.Logger
	if leading {
		log = log.With("token", token)
	}
	log.Info("step-down requested", "leading", leading, "cooldown", cooldown, "until", until, "remote", r.RemoteAddr)
	if !leading {
		s.reply(w, http.StatusOK, fmt.Sprintf("not leading; no campaign before %s", until.Format(time.RFC3339Nano)), false)
		return
	}
	s.reply(w, http.StatusAccepted, fmt.Sprintf("stepping down: draining %d runs, then releasing; no campaign before %s",
		a.cfg.Host.Running(), until.Format(time.RFC3339Nano)), true)
}

// handleStandby: POST /standby. The node stops campaigning; a term it
// holds goes on (POST /step-down ends it).
func (s *server) handleStandby(w http.ResponseWriter, r *http.Request) {
	s.setEligible(w, r, false)
}

// handleEligible: POST /eligible. The node campaigns again, once a
// step-down cooldown, if any, is over.
func (s *server) handleEligible(w http.ResponseWriter, r *http.Request) {
	s.setEligible(w, r, true)
}

func (s *server) setEligible(w http.ResponseWriter, r *http.Request, ok bool) {
	a, el := s.api, s.api.cfg.Elector
	was := el.Eligible()
	el.SetEligible(ok)
	leading := el.IsLeader()
	a.cfg.Logger.Info("eligibility set", "eligible", ok, "was", was, "leading", leading, "remote", r.RemoteAddr)
	var msg string
	switch {
	case ok && el.Held() != "":
		msg = "eligible for the operator, but does not campaign while " + a.notEligible()
	case ok && time.Until(el.CooldownUntil()) > 0:
		msg = "eligible: campaigns once the step-down cooldown is over"
	case ok:
		msg = "eligible: campaigns for leadership"
	case leading:
		msg = "standby: will not campaign again, but still leads; POST /step-down hands over"
	default:
		msg = "standby: follows, does not campaign"
	}
	s.reply(w, http.StatusOK, msg, leading)
}
