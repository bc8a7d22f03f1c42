package schema

// SeriesRunning is the running total of a count or sum release (with the
// operator's windows.running): the sum of the group's released values of
// that aggregate over the windows of the current horizon in which the
// group was released, this window included (Series.Windows of them). It
// is derived from published values (post-processing: mechanism
// DerivedMechanism, scale 0, no noise of its own); its interval is a
// valid (conservative) bound on the summed noise of those windows.
const SeriesRunning = "running"

// kWindows is the series key of Series.Windows (running series only).
const kWindows = "windows"

func init() { derivedSeries[SeriesRunning] = true }

// runningKinds are the kinds whose releases may end with a running series.
var runningKinds = map[Kind]bool{KindCount: true, KindSum: true}

// withRunning returns the series names r must carry: want, followed by
// SeriesRunning when r is a count or sum release whose series end with it.
func withRunning(r *Release, want []string) []string {
	if runningKinds[r.Kind] && len(r.Series) == len(want)+1 && r.Series[len(want)].Name == SeriesRunning {
		return append(append([]string(nil), want...), SeriesRunning)
	}
	return want
}

// validateRunning reports running series problems through bad: Windows is
// at least 1 on a running series (and integer-valued for counts released
// as integers) and 0 on every other series.
func (r *Release) validateRunning(bad func(format string, args ...any)) {
	for i := range r.Series {
		s := &r.Series[i]
		switch {
		case s.Name == SeriesRunning && s.Windows < 1:
			bad("series %q: windows must be at least 1", s.Name)
		case s.Name == SeriesRunning && r.Kind == KindCount && s.Ints == nil && r.Series[0].Ints != nil:
			bad("series %q of a count release must be integer-valued", s.Name)
		case s.Name != SeriesRunning && s.Windows != 0:
			bad("series %q: only a running series has windows", s.Name)
		}
	}
}

// appendSeriesWindows appends the windows key of a running series.
func appendSeriesWindows(b []byte, s *Series) []byte {
	if s.Windows == 0 {
		return b
	}
	return mpAppendInt(mpAppendStr(b, kWindows), s.Windows)
}
