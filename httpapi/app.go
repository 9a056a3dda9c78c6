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

// watchApp runs the application's checks until ctx ends.
func (n *Node) watchApp(ctx context.Context) {
	n.cfg.App.Run(ctx, n.appChanged)
}

// appChanged follows a change of the application's verdict or of its
// campaign gate. A follower whose app failed its last check does not
// campaign (an instance whose app may be down does not take over); a
// leader steps down only when the verdict turns (UnhealthyAfter failures
// in a row), so that one failed check does not move the leadership.
func (n *Node) appChanged(st appcheck.State) {
	el, log := n.cfg.Elector, n.cfg.Logger
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
	n.appStepDown(st)
}

// appStepDown steps a leader down because of its application.
func (n *Node) appStepDown(st appcheck.State) {
	leading, token, until := n.stepDown(n.cfg.StepDownCooldown)
	if leading {
		n.cfg.Logger.Warn("application unhealthy: stepping down: draining runs, then releasing", "token", token,
			"check", st.Check, "reason", st.Reason, "failed_checks", st.Failures, "running", n.cfg.Host.Running(),
			"no_campaign_before", until.Format(time.RFC3339Nano))
	}
}

// notEligible says why this node does not campaign, "" if it does.
func (n *Node) notEligible() string {
	el := n.cfg.Elector
	var why []string
	if !el.Eligible() {
		why = append(why, "standby (--standby or POST /standby)")
	}
	if n.cfg.App != nil {
		if w := n.cfg.App.State().Gate(); w != "" {
			why = append(why, w)
		}
	} else if h := el.Held(); h != "" {
		why = append(why, h)
	}
	return strings.Join(why, "; ")
}
