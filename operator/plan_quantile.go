package operator

// plan_quantile.go resolves windows.quantile_mechanism "auto": the plan
// is built with the tree and with the exponential mechanism, and the one
// whose stated rank-error bound is smaller is kept.

import (
	"fmt"
	"math"

	"github.com/dpstream/dpstream/privacy/quantile"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// autoQuantilePlan builds the plan of c with each quantile mechanism and
// returns the one whose rank-error bound (quantileRankBound) is smaller;
// the tree on a tie or when the other cannot be planned. Both plans are
// complete calibrations of the same release (the budget, the other
// aggregates and their joint calibration included), so the comparison is
// of what the release would state. The choice is a function of the
// configuration (and, when recalibrating, of the ledger's recalibration r)
// only, so every instance and every restart makes the same.
func autoQuantilePlan(c Config, dec *schema.Decoder, wcfg windows.Config, r *recalSpec) (*plan, error) {
	ct, ce := c, c
	ct.Windows.QuantileMechanism, ce.Windows.QuantileMechanism = QuantileTree, QuantileExponential
	pt, errT := buildPlanWith(ct, dec, wcfg, r)
	pe, errE := buildPlanWith(ce, dec, wcfg, r)
	switch {
	case errT != nil && errE != nil:
		return nil, errT
	case errE != nil:
		return pt, nil
	case errT != nil:
		return pe, nil
	}
	bt, be := quantileRankBound(pt), quantileRankBound(pe)
	best, other, name := pt, be, QuantileTree
	if be < bt {
		best, other, name = pe, bt, QuantileExponential
	}
	best.choices = append(best.choices, fmt.Sprintf("quantiles: %s (auto: rank-error bound %.4g, the %s's %.4g)",
		name, quantileRankBound(best), otherMechanism(name), other))
	best.note += fmt.Sprintf("; quantile mechanism %s chosen by auto (largest rank-error bound over the ranks %.4g; %s: %.4g)",
		name, quantileRankBound(best), otherMechanism(name), other)
	return best, nil
}

// otherMechanism names the quantile mechanism auto did not choose.
func otherMechanism(name string) string {
	if name == QuantileTree {
		return QuantileExponential
	}
	return QuantileTree
}

// quantileRankBound returns the largest stated rank error over the ranks
// of p's quantiles (at the plan's level, all ranks together): the tree's
// 2(1+q)·H of any value in the interval (quantile.RankError), or the
// exponential mechanism's tail bound beyond the leaf resolution
// (quantile.Exponential.RankError). +Inf without quantiles.
func quantileRankBound(p *plan) float64 {
	for i := range p.aggs {
		ap := &p.aggs[i]
		if ap.kind != schema.KindQuantiles {
			continue
		}
		m := 0.0
		if ap.selError != nil {
			for _, e := range ap.selError {
				m = math.Max(m, e)
			}
			return m
		}
		for _, r := range ap.ranks {
			m = math.Max(m, quantile.RankError(r, ap.rankH))
		}
		return m
	}
	return math.Inf(1)
}
