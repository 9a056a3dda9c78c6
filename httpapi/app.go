package httpapi

import (
	"context"
	"strings"
	"time"

	"github.com/batonhq/baton/httpapi/appcheck"
)

// The application gate (Config.App): an instance whose application does
// not answer its check does not campaign (Elector.Hold), and a leader
// whose application stops answering steps down as on POST /step-down
// (drain, release, the step-down cooldown), so that an instance whose
// application answers leads. When no application answers, nobody leads;
// the next leader catches the missed ticks up by their misfire policy.

// WatchApp runs the application's checks (Config.App) until ctx ends,
// and follows each change of their verdict: it holds the Elector or
// lifts the hold, and steps a leader down. It blocks; the runner (package
// baton's Run) runs it on a goroutine of its own while it runs the
// Elector. Without an App it only waits for ctx to end.
func (a *API) WatchApp(ctx context.Context) {
	if a.cfg.App == nil {
		<-ctx.Done()
		return
	}
	a.cfg.App.Run(ctx, a.appChanged)
}

// appChanged follows a change of the application's verdict or of its
// campaign gate. A follower whose app failed its last check does not
// campaign (an instance whose app may be down does not take over); a
// leader steps down only when the verdict turns (UnhealthyAfter failures
// in a row), so that one failed check does not move the leadership.
func (a *API) appChanged(st appcheck.State) {
	el, log := a.cfg.Elector, a.cfg.Logger
	if gate := st.Gate(); st.Healthy {
		el.Hold(gate)
		if gate == "" {
			log.Info("application healthy: may campaign", "check", st.Check, "good_checks", st.Successes)
		} else if _, held := el.Term(); !held {
			log.Warn("application suspect: not campaigning", "check", st.Check, "reason", st.Reason, "failed_checks", st.Failures)
		}
		return
	}
	el.Hold(st.Why())
	if _, held := el.Term(); !held {
		log.Warn("application unhealthy: not campaigning", "check", st.Check, "reason", st.Reason, "failed_checks", st.Failures)
		return
	}
	a.appStepDown(st)
}

// appStepDown steps a leader down because of its application.
func (a *API) appStepDown(st appcheck.State) {
	leading, token, until := a.stepDown(a.cfg.StepDownCooldown)
	if leading {
		a.cfg.Logger.Warn("application unhealthy: stepping down: draining runs, then releasing", "token", token,
			"check", st.Check, "reason", st.Reason, "failed_checks", st.Failures, "running", a.cfg.Host.Running(),
			"no_campaign_before", until.Format(time.RFC3339Nano))
	}
}

// notEligible says why this node does not campaign, "" if it does.
func (a *API) notEligible() string {
	el := a.cfg.Elector
	var why []string
	if !el.Eligible() {
		why = append(why, "standby (--standby or POST /standby)")
	}
	if a.cfg.App != nil {
		if w := a.cfg.App.State().Gate(); w != "" {
			why = append(why, w)
		}
	} else if h := el.Held(); h != "" {
		why = append(why, h)
	}
	return strings.Join(why, "; ")
}
