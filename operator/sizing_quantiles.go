package operator

// QuantileSizing is how a selection part of the quantiles releases its
// ranks (`dpstream plan`): today only the joint exponential mechanism's
// (windows.quantile_mechanism "joint", or "auto" resolved to it), so
// that the plans of the other mechanisms are unchanged.
type QuantileSizing struct {
	// Mechanism is the quantile mechanism ("joint").
	Mechanism string `json:"mechanism"`
	// Ranks are the released ranks, in the configured order.
	Ranks []float64 `json:"ranks"`
	// Selections is the number of selections per group and window (1:
	// all ranks in one draw).
	Selections int `json:"selections_per_group"`
	// Epsilon is the pure ε of one group's selection (1/scale).
	Epsilon float64 `json:"epsilon_per_group"`
	// RankError bounds, at Level and for all ranks together, how far every
	// released edge's rank is from rank·N beyond the best tuple's loss
	// (the leaf resolution; quantile.Joint.RankError).
	RankError float64 `json:"rank_error"`
	Level     float64 `json:"level"`
}

// quantileSizing returns the QuantileSizing of ap's part n, or nil when
// ap is not released by the joint exponential mechanism (only
// quantileJointAgg.complete sets ap.joint, on a lane too).
func quantileSizing(ap *aggPlan, n *vectorNoise) *QuantileSizing {
	if ap.joint.Leaves == 0 || n.kind != selectExact || len(ap.selError) == 0 {
		return nil
	}
	return &QuantileSizing{Mechanism: QuantileJoint, Ranks: ap.ranks, Selections: 1, Epsilon: 1 / n.scale,
		RankError: ap.selError[0], Level: 1 - n.beta}
}
