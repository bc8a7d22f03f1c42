package demo

// truth.go computes, from the generated events alone, the exact aggregates
// the operator must find after contribution bounding, so the demo can print
// true values beside the private ones and the tests can check both.

import (
	"math"
	"slices"
)

// GroupTruth is the exact, bounded aggregate of one region in one window,
// computed by the demo from the generated readings.
type GroupTruth struct {
	Count      int64
	Hist       []int64 // per status
	Values     int64
	Sum        float64 // of clamped kept values
	CentredSum float64 // Σ (clamped value − midpoint)
	// Units counts the meters with kept readings in the region.
	Units int64
	// CentredSqSum is Σ (clamped value − midpoint)².
	CentredSqSum float64
	// Kept are the kept clamped values, sorted (for the quantiles).
	Kept []float64
	// Exact is false when a meter exceeded a bound in a way whose outcome
	// depends on the operator's keyed random sampling (never for the
	// generated stream; kept for streams that do).
	Exact bool
}

// Mean returns the exact mean of the kept clamped values (NaN without values).
func (g *GroupTruth) Mean() float64 {
	if g.Values == 0 {
		return math.NaN()
	}
	return g.Sum / float64(g.Values)
}

// Variance returns the exact variance of the kept clamped values (NaN
// without values), from the centred sums as the operator forms it.
func (g *GroupTruth) Variance() float64 {
	if g.Values == 0 {
		return math.NaN()
	}
	n := float64(g.Values)
	m := g.CentredSum / n
	return g.CentredSqSum/n - m*m
}

// Quantile returns the exact r-quantile of the kept clamped values: the
// ⌈rN⌉-th smallest (at least the first); NaN without values.
func (g *GroupTruth) Quantile(r float64) float64 {
	if len(g.Kept) == 0 {
		return math.NaN()
	}
	k := max(1, int(math.Ceil(r*float64(len(g.Kept)))))
	return g.Kept[k-1]
}

// truth returns, per published window start and region, the exact
// aggregates after contribution bounding: per meter and window at most
// MaxGroups regions, per region at most MaxValues counted events and
// values (clamped to [synthLower, synthUpper]) and at most MaxBuckets
// statuses with at most MaxPerBucket readings each. Late, bad, non-public
// and closing messages are left out. Where bounding keeps a random subset
// whose choice matters (values that differ, too many statuses or
// regions), the result is marked inexact.
func (s *Stream) truth() map[int64]map[string]*GroupTruth {
	type meterKey struct {
		start int64
		meter string
	}
	per := map[meterKey][]*Reading{}
	var keys []meterKey
	for i := range s.Msgs {
		m := &s.Msgs[i]
		if m.Reading == nil || m.NotPublic || m.Late || m.Closing {
			continue
		}
		start := s.WindowOf(m.Reading.Time)
		k := meterKey{start, m.Reading.Meter}
		if _, ok := per[k]; !ok {
			keys = append(keys, k)
		}
		per[k] = append(per[k], m.Reading)
	}
	out := map[int64]map[string]*GroupTruth{}
	for w := range s.Config.Windows {
		gs := map[string]*GroupTruth{}
		for _, reg := range Regions {
			gs[reg] = &GroupTruth{Hist: make([]int64, len(synthStatuses)), Exact: true}
		}
		out[s.WindowStart(w)] = gs
	}
	mid := synthLower/2 + synthUpper/2
	clamp := func(v float64) float64 { return math.Min(synthUpper, math.Max(synthLower, v)) }
	b := synthBounds
	for _, k := range keys {
		gs := out[k.start]
		if gs == nil {
			continue
		}
		byRegion := map[string][]*Reading{}
		var regions []string
		for _, rd := range per[k] {
			if _, ok := byRegion[rd.Region]; !ok {
				regions = append(regions, rd.Region)
			}
			byRegion[rd.Region] = append(byRegion[rd.Region], rd)
		}
		exact := len(regions) <= b.MaxGroups
		for _, reg := range regions {
			g := gs[reg]
			rds := byRegion[reg]
			g.Exact = g.Exact && exact
			n := len(rds)
			kept := min(n, b.MaxValues)
			g.Count += int64(kept)
			g.Values += int64(kept)
			allSame := true
			for _, rd := range rds {
				allSame = allSame && clamp(rd.Wh) == clamp(rds[0].Wh)
			}
			if n > b.MaxValues && !allSame {
				g.Exact = false
			}
			g.Units++
			for _, rd := range rds[:kept] { // any kept subset when exact
				v := clamp(rd.Wh)
				g.Sum += v
				g.CentredSum += v - mid
				g.CentredSqSum += (v - mid) * (v - mid)
				i, _ := slices.BinarySearch(g.Kept, v)
				g.Kept = slices.Insert(g.Kept, i, v)
			}
			perStatus := make([]int, len(synthStatuses))
			distinct := 0
			for _, rd := range rds {
				si := slices.Index(synthStatuses, rd.Status)
				if perStatus[si] == 0 {
					distinct++
				}
				perStatus[si]++
			}
			if distinct > b.MaxBuckets {
				g.Exact = false
			}
			for si, c := range perStatus {
				g.Hist[si] += int64(min(c, b.MaxPerBucket))
			}
		}
	}
	return out
}
