package schema

// decoder_lanes.go is the part of the Decoder that reads histograms and the
// extra measures and histograms (Config.Measures, Config.Histograms).

// bucketer finds the bucket of a histogram's field.
type bucketer struct {
	idx     int            // the field's index in Decoder.fields, −1: no histogram
	catList []string       // the categories
	catSigs []uint32       // sig of each category, for few categories
	cats    map[string]int // category → bucket, for many categories
	other   int            // the "other" bucket or −1
	edges   []float64      // the edges of a numeric histogram
}

// newBucketer returns the bucketer of h, whose field has index idx.
func newBucketer(h *Histogram, idx int) bucketer {
	b := bucketer{idx: idx, other: -1, edges: h.Edges}
	if h.Numeric() {
		return b
	}
	b.catList = h.Categories
	if len(h.Categories) > linearCategories {
		b.cats = make(map[string]int, len(h.Categories))
		for i, c := range h.Categories {
			b.cats[c] = i
		}
	} else {
		for _, c := range h.Categories {
			b.catSigs = append(b.catSigs, sig([]byte(c)))
		}
	}
	if h.Other {
		b.other = len(h.Categories)
	}
	return b
}

// cloneHistogram returns a copy of h that shares no slice with it.
func cloneHistogram(h *Histogram) Histogram {
	hc := *h
	hc.Categories = append([]string(nil), h.Categories...)
	hc.Edges = append([]float64(nil), h.Edges...)
	return hc
}

// addField registers the field name in role and returns its index; a name
// already registered gains the role. required says whether the role
// rejects an event without the field.
func (d *Decoder) addField(name string, role uint8, required bool) int {
	for i := range d.fields {
		if d.fields[i].name == name {
			d.fields[i].roles |= role
			d.fields[i].required = d.fields[i].required || required
			return i
		}
	}
	keys, _ := parsePath(name) // valid: Validate checked it
	d.fields = append(d.fields, field{name: name, roles: role, required: required})
	d.insert(keys, len(d.fields)-1)
	return len(d.fields) - 1
}

// addExtras registers the extra measures' and histograms' fields.
func (d *Decoder) addExtras() {
	cfg := &d.cfg
	if len(cfg.Measures) > 0 {
		cfg.Measures = append([]Measure(nil), cfg.Measures...)
	}
	for _, m := range cfg.Measures {
		d.measureIdx = append(d.measureIdx, d.addField(m.Field, roleMeasure, !m.Optional))
	}
	if len(cfg.Histograms) > 0 {
		cfg.Histograms = append([]NamedHistogram(nil), cfg.Histograms...)
	}
	for i := range cfg.Histograms {
		h := &cfg.Histograms[i]
		h.Histogram = cloneHistogram(&h.Histogram)
		role := roleHistCat
		if h.Numeric() {
			role = roleHistNum
		}
		d.hists = append(d.hists, newBucketer(&h.Histogram, d.addField(h.Field, role, true)))
	}
}

// category returns the bucket of a declared category of b, or −1.
func (b *bucketer) category(c []byte) int {
	if b.cats != nil {
		if k, ok := b.cats[string(c)]; ok {
			return k
		}
		return -1
	}
	cs := sig(c)
	for i, cat := range b.catList {
		if b.catSigs[i] == cs && string(c) == cat {
			return i
		}
	}
	return -1
}

// bucket returns the bucket of b's field in the current message.
func (d *Decoder) bucket(b *bucketer) (int, error) {
	i := b.idx
	v := &d.vals[i]
	if b.edges != nil {
		x, err := d.number(v, i)
		if err != nil {
			return 0, err
		}
		return bucketOf(b.edges, x), nil
	}
	c, err := d.text(v, i, false)
	if err != nil {
		return 0, err
	}
	k := b.category(c)
	switch {
	case k >= 0:
		return k, nil
	case b.other >= 0:
		return b.other, nil
	}
	return 0, d.fail(ReasonUnknownCategory, i)
}

// buildExtras sets e.Extra (reusing x when not nil), checking the extra
// measures, then the extra histograms, in configured order.
func (d *Decoder) buildExtras(e *Event, x *Extra) error {
	if x == nil {
		x = &Extra{}
	}
	ms, bs := x.Measures[:0], x.Buckets[:0]
	for j, i := range d.measureIdx {
		v := &d.vals[i]
		if d.cfg.Measures[j].Optional && (v.k == kAbsent || v.k == kNil) {
			ms = append(ms, MeasureValue{})
			continue
		}
		f, err := d.number(v, i)
		if err != nil {
			return err
		}
		ms = append(ms, MeasureValue{Value: f, Has: true})
	}
	for j := range d.hists {
		k, err := d.bucket(&d.hists[j])
		if err != nil {
			return err
		}
		bs = append(bs, k)
	}
	x.Measures, x.Buckets = ms, bs
	e.Extra = x
	return nil
}
