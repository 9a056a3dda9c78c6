package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/batonhq/baton/schedulerhost"
)

var _ schedulerhost.ClaimObserver = (*Metrics)(nil)

// claimMetrics count what the ledger refused.
type claimMetrics struct {
	refused *prometheus.CounterVec
}

func newClaimMetrics(cl prometheus.Labels) claimMetrics {
	return claimMetrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_claims_refused_total", ConstLabels: cl,
			Help: "Claims of ticks the backend refused (not authorised: a 401, 403 or permission denial); the tick did not run."}, []string{"job"}),
	}
}

// ClaimRefused implements schedulerhost.ClaimObserver.
func (m *Metrics) ClaimRefused(job string) { m.claims.refused.WithLabelValues(job).Inc() }
