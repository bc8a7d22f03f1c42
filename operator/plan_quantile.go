package operator

// plan_quantile.go resolves windows.quantile_mechanism "auto": the plan
// is built with the tree and with the exponential mechanism, and the one
// whose stated rank-error bound is smaller at the tree's resolution is
// kept — the exponential one released by the joint exponential mechanism
// for two ranks or more.

import (
	"fmt"
	"math"
	"slices"

	"github.com/dpstream/dpstream/privacy/quantile"
	"github.com/dpstream/dpstream/schema"
	"github.com/dpstream/dpstream/windows"
)

// autoQuantilePlan builds the plan of c with the tree and with the
// exponential mechanism and keeps the one whose rank-error bound
// (quantileRankBound) is smaller; the tree on a tie or when the other
// cannot be planned. Both plans are complete calibrations of the same
// release (the budget, the other aggregates and their joint calibration
// included), so the comparison is of what the release would state. When
// the exponential mechanism wins and there are two ranks or more
// (autoJointRanks), the joint exponential mechanism releases them in its
// place (autoJoint). The choice is a function of the configuration (and,
// when recalibrating, of the ledger's recalibration r) only, so every
// instance and every restart makes the same.
func autoQuantilePlan(c Config, dec *schema.Decoder, wcfg windows.Config, r *recalSpec) (*plan, error) {
	ct, ce := c, c
	ct.Windows.QuantileMechanism, ce.Windows.QuantileMechanism = QuantileTree, QuantileExponential
	ct.Windows.autoQuantiles, ce.Windows.autoQuantiles = true, true
	pt, errT := buildPlanWith(ct, dec, wcfg, r)
	pe, errE := buildPlanWith(ce, dec, wcfg, r)
	switch {
	case errT != nil && errE != nil:
		return nil, errT
	case errE != nil:
		return pt, nil
	case errT != nil:
		return autoJoint(c, dec, wcfg, r, pe, quantileRankBound(pe), math.NaN()), nil
	}
	bt, be := quantileRankBound(pt), selectionBoundAt(pe, pt)
	if be < bt {
		return autoJoint(c, dec, wcfg, r, pe, be, bt), nil
	}
	pt.choices = append(pt.choices, fmt.Sprintf("quantiles: %s (auto: rank-error bound %.4g, the %s's %.4g at the tree's resolution)",
		QuantileTree, bt, QuantileExponential, be))
	pt.note += fmt.Sprintf("; quantile mechanism %s chosen by auto (largest rank-error bound over the ranks %.4g; %s: %.4g at the tree's resolution)",
		QuantileTree, bt, QuantileExponential, be)
	return pt, nil
}

// selectionBoundAt returns the largest stated rank error over the ranks
// of the exponential mechanism's plan pe with its candidates the edges of
// the tree's leaves (pt's) instead of its own (quantileRankBound(pe)
// when either has no such quantiles). auto compares the selection with
// the tree at the tree's resolution: the selections' finer default grid
// (quantileLeaves) does not widen their rank errors, which follow the
// values between the edges, not how many edges lie there, but adds the
// logarithm of the extra candidates to their stated bound (at 16⁵
// against 16⁴ leaves about 1.16–1.24×), which would otherwise tip
// configurations near the tie to the tree (38–45 ranks at V = 1, ε = 1).
func selectionBoundAt(pe, pt *plan) float64 {
	ae, at := quantilePlanOf(pe), quantilePlanOf(pt)
	if ae == nil || at == nil || ae.selError == nil || at.selError != nil || len(ae.noises) != 1 {
		return quantileRankBound(pe)
	}
	e := ae.selector
	e.Leaves = at.tree.Leaves()
	errs, err := ae.selectErrors(e, ae.noises[0].beta)
	if err != nil || len(errs) == 0 {
		return quantileRankBound(pe)
	}
	return slices.Max(errs)
}

// autoJointRanks reports whether auto releases k ranks by the joint
// exponential mechanism where the exponential mechanism wins: two ranks
// or more (one rank is the same selection either way), at most
// quantile.MaxJointRanks.
func autoJointRanks(k int) bool { return k >= 2 && k <= quantile.MaxJointRanks }

// autoJoint returns the plan auto keeps once the exponential mechanism
// (pe, its rank-error bound be as compared) has won against the tree's
// rank-error bound bt (NaN: the tree cannot be planned). With two ranks or more it is c's plan with the
// joint exponential mechanism: its union-bound statement of the rank
// error is looser than the per-rank one, but its measured rank errors are
// smaller at every rank of issue 20's settings (internal/peers/README.md,
// "The S2 p99 gap"). Else, or when the joint plan cannot be built, it is
// pe (its choices and note as before the joint mechanism existed). The
// plan's choices and note say which and why.
func autoJoint(c Config, dec *schema.Decoder, wcfg windows.Config, r *recalSpec, pe *plan, be, bt float64) *plan {
	k := len(c.Windows.quantileRanks())
	var pj *plan
	var errJ error
	if autoJointRanks(k) {
		cj := c
		cj.Windows.QuantileMechanism, cj.Windows.autoQuantiles = QuantileJoint, true
		pj, errJ = buildPlanWith(cj, dec, wcfg, r)
	}
	switch {
	case math.IsNaN(bt) && pj == nil:
		return pe
	case pj == nil:
		pe.choices = append(pe.choices, fmt.Sprintf("quantiles: %s (auto: rank-error bound %.4g at the tree's resolution, the %s's %.4g)",
			QuantileExponential, be, QuantileTree, bt))
		pe.note += fmt.Sprintf("; quantile mechanism %s chosen by auto (largest rank-error bound over the ranks %.4g at the tree's resolution; %s: %.4g)",
			QuantileExponential, be, QuantileTree, bt)
		if errJ != nil {
			pe.note += fmt.Sprintf("; the joint mechanism cannot be planned: %v", errJ)
		}
		return pe
	}
	why := fmt.Sprintf("the exponential mechanism's rank-error bound %.4g at the tree's resolution is below the tree's %.4g", be, bt)
	if math.IsNaN(bt) {
		why = "the tree cannot be planned"
	}
	because := fmt.Sprintf("%s; its %d ranks are released jointly, one selection per group at the group's whole ε "+
		"(stated rank-error bound %.4g for all ranks together, against the exponential mechanism's %.4g; the joint mechanism's measured rank errors are smaller at every rank of issue 20's settings)",
		why, k, quantileRankBound(pj), quantileRankBound(pe))
	pj.choices = append(pj.choices, fmt.Sprintf("quantiles: %s (auto: %s)", QuantileJoint, because))
	pj.note += fmt.Sprintf("; quantile mechanism %s chosen by auto (%s)", QuantileJoint, because)
	return pj
}

// quantileRankBound returns the largest stated rank error over the ranks
// of p's quantiles (at the plan's level, all ranks together): the tree's
// 2(1+q)·H of any value in the interval (quantile.RankError), or the
// exponential mechanism's tail bound beyond the leaf resolution
// (quantile.Exponential.RankError, the same for every rank with
// quantile.Joint.RankError). +Inf without quantiles.
func quantileRankBound(p *plan) float64 {
	ap := quantilePlanOf(p)
	switch {
	case ap == nil:
		return math.Inf(1)
	case len(ap.selError) > 0:
		return slices.Max(ap.selError)
	}
	m := 0.0
	for _, r := range ap.ranks {
		m = math.Max(m, quantile.RankError(r, ap.rankH))
	}
	return m
}

// quantilePlanOf returns the plan of p's (first) quantiles aggregate, or
// nil without one.
func quantilePlanOf(p *plan) *aggPlan {
	for i := range p.aggs {
		if p.aggs[i].kind == schema.KindQuantiles {
			return &p.aggs[i]
		}
	}
	return nil
}
