package windows

// addEvent aggregates one event directly (event-level privacy).
func (w *openWindow) addEvent(e *Event) {
	cfg := &w.t.cfg
	gid, ok := w.gidx[e.Group]
	if !ok {
		gh := w.groupHash(e.Group)
		if c := cfg.MaxOpenGroups; c > 0 && len(w.gidx) >= c {
			top := w.gheap[0]
			if !groupLess(gh, e.Group, w.ghash[top], w.gkeys[top]) {
				w.drops.GroupCap++
				return
			}
			w.drops.GroupCap += w.acc[top].units
			w.acc[top] = gacc{}
			w.release(top)
			w.gheap[0] = w.gheap[len(w.gheap)-1]
			w.gheap = w.gheap[:len(w.gheap)-1]
			w.groupSiftDown(0)
		}
		gid = w.intern(e.Group, gh)
		if int(gid) == len(w.acc) {
			w.acc = append(w.acc, gacc{})
		}
		if cfg.Histogram {
			w.acc[gid].hist = make([]int64, cfg.NumBuckets)
		}
		if cfg.MaxOpenGroups > 0 {
			w.gheap = append(w.gheap, gid)
			w.groupSiftUp(len(w.gheap) - 1)
		}
	}
	a := &w.acc[gid]
	a.units++
	a.count++
	if cfg.Histogram && e.Bucket >= 0 {
		a.hist[e.Bucket]++
	}
	if w.t.valued && e.HasValue {
		w.t.addClamped(a, e.Value)
	}
}

// addClamped adds one kept value to a group accumulator.
func (t *Tumbling) addClamped(a *gacc, v float64) {
	cfg := &t.cfg
	if v < cfg.Lower {
		v = cfg.Lower
		a.clamp++
	} else if v > cfg.Upper {
		v = cfg.Upper
		a.clamp++
	}
	a.values++
	if cfg.Sum {
		a.sum.add(v)
	}
	if cfg.Mean || cfg.Variance {
		d := v - t.mid
		a.csum.add(d)
		if cfg.Variance {
			a.csq.add(d * d)
		}
	}
	if t.leaves > 0 {
		if a.leaves == nil {
			a.leaves = make(map[uint32]int64)
		}
		a.leaves[LeafOf(v, cfg.Lower, cfg.Upper, t.leaves)]++
	}
}

func (w *openWindow) groupAbove(a, b uint32) bool {
	return groupLess(w.ghash[b], w.gkeys[b], w.ghash[a], w.gkeys[a])
}

func (w *openWindow) groupSiftUp(i int) {
	h := w.gheap
	for i > 0 {
		p := (i - 1) / 2
		if !w.groupAbove(h[i], h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (w *openWindow) groupSiftDown(i int) {
	h := w.gheap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && w.groupAbove(h[r], h[l]) {
			c = r
		}
		if !w.groupAbove(h[c], h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
