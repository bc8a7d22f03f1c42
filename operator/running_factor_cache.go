package operator

// running_factor_cache.go keeps the decoded noise of factorized series
// (running_factor.go) across windows, so that the release of window t of
// a group costs one exact discrete Gaussian draw (z_t) and one O(t)
// integer step of the decoding (continual.DecodeNext) instead of t + 1
// draws and the O(t²) decoding of z_0…z_t.
//
// What it holds. Per series — one aggregate of one group in one horizon,
// under one key and namespace — the decoded noise E_0…E_{n−1} =
// Decode(z_0…z_{n−1}) of the horizon's first n windows: noise only, never
// data. Every E_j is a deterministic function of the key and the release
// identities of windows 0…j (z_j is the first draw of window j's release
// stream), so the cache is not state: nothing persists it, a restart
// starts empty and rebuilds a series lazily by regenerating z_0…z_t at its
// first release, and a cached E_t equals the regenerated one bit for bit
// (DecodeNext is Decode's step: TestDecodeNextMatchesBigIntegers,
// TestFactorizationCacheIsInvisible). Releases, their bytes and their
// timing relative to the data do not change: which series are cached
// depends on the group keys and windows released (public groups under the
// factorization), never on values.
//
// Bounds. A series reserves T values (its horizon's windows) when first
// cached; the cache reserves at most factCacheMaxValues in all. A series
// beyond the cap, of a horizon older than the newest one seen, or of a
// plan without a cache, is computed as without the cache (regenerate and
// decode). A series of an older horizon is dropped when a window of a
// newer horizon is released (its horizon has ended), and all series when
// the key changes.

import (
	"sync"

	"github.com/dpstream/dpstream/privacy/continual"
	"github.com/dpstream/dpstream/privacy/rng"
)

// factCacheMaxValues is the most decoded noises (int64s) the cache of one
// plan reserves: 2^23, 64 MiB, e.g. 2 aggregates of 2900 groups at
// T = 1440 windows per horizon, or 832 series at the largest T, 10080
// (continual.MaxFactorWindows). A choice of memory against CPU, not of
// privacy: series beyond it are regenerated at every release.
const factCacheMaxValues = 1 << 23

// factSeriesID identifies the noise series of one aggregate of one group
// over one horizon (with the cache's key and the plan's stream digest).
type factSeriesID struct {
	namespace, agg, group string
	first                 int64 // start of the horizon's first window (ms)
}

// factSeriesNoise is the decoded noise E_0…E_{n−1} of one series.
type factSeriesNoise struct {
	mu sync.Mutex
	e  []int64
}

// factCache holds the decoded noise of a plan's factorized series; the
// zero value is unusable, nil caches nothing.
type factCache struct {
	mu       sync.Mutex
	max      int // values it may reserve
	reserved int
	key      rng.Key // the key of the cached series (a change drops them)
	newest   int64   // the newest horizon's first window start
	series   map[factSeriesID]*factSeriesNoise
}

// newFactCache returns a cache reserving at most limit values (0: caches
// nothing).
func newFactCache(limit int) *factCache {
	return &factCache{max: limit, series: map[factSeriesID]*factSeriesNoise{}}
}

// lookup returns the series id of a horizon of T windows under key,
// creating it if the cap allows, or nil: not cached.
func (c *factCache) lookup(key rng.Key, id factSeriesID, T int) *factSeriesNoise {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if key != c.key || (len(c.series) > 0 && id.first > c.newest) {
		// A new key, or a newer horizon: the series held have ended.
		clear(c.series)
		c.reserved = 0
	}
	if len(c.series) == 0 {
		c.key, c.newest = key, id.first
	}
	if id.first != c.newest {
		return nil // an older horizon's window, computed uncached
	}
	if s := c.series[id]; s != nil {
		return s
	}
	if c.reserved+T > c.max {
		return nil
	}
	s := &factSeriesNoise{e: make([]int64, 0, T)}
	c.series[id] = s
	c.reserved += T
	return s
}

// factNoiseAt returns E_t, the decoded noise of window t of a series of f:
// from the cache s, extended by regenerating z_j = zAt(j) for the windows
// it lacks (one at a time, continual.DecodeNext), or with s nil by
// decoding z_0…z_t afresh. Both give Decode(z_0…z_t)_t bit for bit.
func factNoiseAt(f *continual.Factorization, s *factSeriesNoise, t int, zAt func(int) int64) (int64, error) {
	if s == nil {
		z := make([]int64, t+1)
		for j := range z {
			z[j] = zAt(j)
		}
		e, err := f.Decode(z)
		if err != nil {
			return 0, err
		}
		return e[t], nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.e) <= t {
		q, err := f.DecodeNext(s.e, zAt(len(s.e)))
		if err != nil {
			return 0, err
		}
		s.e = append(s.e, q)
	}
	return s.e[t], nil
}
