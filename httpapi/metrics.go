package httpapi

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// NewRegistry returns a metrics registry of a node's own (no global
// state), with the Go runtime and process collectors on it.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// registerGauges adds the node's operational gauges, eligibility and the
// step-down cooldown, to reg, next to the metrics package's.
func (a *API) registerGauges(reg prometheus.Registerer) error {
	el := a.cfg.Elector
	cl := prometheus.Labels{"election": a.cfg.Election}
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "baton_eligible", ConstLabels: cl,
			Help: "1 while this instance may campaign, 0 on standby or while its application is unhealthy."}, func() float64 {
			if el.Eligible() && el.Held() == "" {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "baton_step_down_cooldown_seconds", ConstLabels: cl,
			Help: "Time left before this instance campaigns again after a step-down; 0 when none."}, func() float64 {
			if u := el.CooldownUntil(); !u.IsZero() {
				return max(time.Until(u).Seconds(), 0)
			}
			return 0
		}),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("metrics: register: %w", err)
		}
	}
	return nil
}
