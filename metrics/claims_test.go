package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/batonhq/baton/metrics"
)

func TestMetrics_ClaimsRefused(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, "e")
	if err != nil {
		t.Fatal(err)
	}
	m.ClaimRefused("report")
	m.ClaimRefused("report")
	m.ClaimRefused("mail")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "baton_claims_refused_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "job" {
					got[l.GetValue()] = s.GetCounter().GetValue()
				}
			}
		}
	}
	if got["report"] != 2 || got["mail"] != 1 || len(got) != 2 {
		t.Errorf("baton_claims_refused_total by job = %v, want report 2, mail 1", got)
	}
}
