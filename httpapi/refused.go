package httpapi

import (
	"context"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/schedulerhost"
)

// Refused claims (schedulerhost.OnClaimsRefused): a leader whose claims
// the backend has refused (not authorised) for longer than the lease's
// TTL runs no job, while it may still renew its lease. It steps down, as
// on POST /step-down (drain, release, the step-down cooldown), when the
// instance registry shows another instance eligible and live: that one,
// with credentials of its own, may be able to claim. It stays when none
// is known (no registry, the registry unreadable, no eligible instance
// seen lately): stepping down would only leave the election without a
// leader. Errors that may pass (timeouts, resets) never count; see
// docs/operations.md.

// refusedWarnEvery bounds how often a leader that stays says why.
const refusedWarnEvery = time.Minute

// claimsRefused is the Host's OnClaimsRefused.
func (a *API) claimsRefused(ctx context.Context, s schedulerhost.RefusedStreak) {
	log := a.cfg.Logger
	peer, why := a.eligiblePeer(ctx)
	if peer == "" {
		now := time.Now()
		a.mu.Lock()
		warn := now.Sub(a.refusedWarned) >= refusedWarnEvery
		if warn {
			a.refusedWarned = now
		}
		a.mu.Unlock()
		if warn {
			log.Warn("claims refused: staying leader: "+why, "token", s.Token, "refused", s.Count, "since", s.Since, "err", s.Err)
		}
		return
	}
	leading, token, until := a.stepDown(a.cfg.StepDownCooldown)
	if leading {
		log.Warn("claims refused: stepping down: draining runs, then releasing", "token", token, "refused", s.Count,
			"since", s.Since, "span", s.Span, "eligible_follower", peer, "no_campaign_before", until.Format(time.RFC3339Nano), "err", s.Err)
	}
}

// eligiblePeer returns an instance of the registry other than this one,
// eligible and seen within three publish intervals, or "" and why none.
func (a *API) eligiblePeer(ctx context.Context) (id, why string) {
	if a.cfg.Control == nil {
		return "", "no instance registry (the backend keeps no control store) to tell of an eligible follower"
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ins, err := control.NewJobs(a.cfg.Control).Instances(ctx)
	if err != nil {
		return "", "reading the instance registry: " + err.Error()
	}
	self := a.cfg.Elector.Identity().ID
	live := 3 * a.cfg.InstanceInterval
	for _, in := range ins {
		if in.ID != self && in.Eligible && time.Since(in.Seen) <= live {
			return in.ID, ""
		}
	}
	return "", "no eligible follower is known (instance registry)"
}
