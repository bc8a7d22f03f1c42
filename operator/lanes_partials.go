package operator

// lanes_partials.go carries the lanes (lanes.go) through scale-out: stage
// 1 keeps one Tumbling per input partition and lane, and writes a window's
// partial state of every lane in one partials topic payload; stage 2 merges
// each lane's partials (re-applying the lane's bounds per unit across the
// whole input) and attaches them to the merged window.
//
// The payload of a configuration with lanes (format "dpl1") is
//
//	tag "dpl1" (4 bytes)
//	number of partial states n = 1 + lanes (unsigned varint)
//	n times: length (unsigned varint), then the windows package's
//	encoding of the partial (MarshalBinary): the primary's first, then
//	the lanes' in the order of lanesOf
//
// in place of the primary's encoding alone, which a configuration without
// lanes keeps unchanged. The chunks, their MAC and their keys are as for
// every partial (partials.go); the MAC binds the release digest, which
// covers the lanes, so a deployment never accepts the other format.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/dpstream/dpstream/windows"
)

// partialLanesTag starts the partials payload of a configuration with
// lanes.
var partialLanesTag = []byte("dpl1")

// errPartialLanes: a partials payload that is not a valid "dpl1" payload
// of this configuration's lanes.
var errPartialLanes = errors.New("operator: damaged partial state of several measures")

// encodePartial returns the partials payload of p: the primary's encoding
// alone without lanes, else the "dpl1" payload of the primary's and every
// lane's partial.
func encodePartial(p partialOut, lanes int) ([]byte, error) {
	b, err := p.p.MarshalBinary()
	if err != nil || lanes == 0 {
		return b, err
	}
	if len(p.lanes) != lanes {
		return nil, fmt.Errorf("operator: window %s: %d lane partials, want %d", tsString(p.p.Start), len(p.lanes), lanes)
	}
	out := slices.Clone(partialLanesTag)
	out = binary.AppendUvarint(out, uint64(1+lanes))
	out = binary.AppendUvarint(out, uint64(len(b)))
	out = append(out, b...)
	for i := range p.lanes {
		lb, err := p.lanes[i].MarshalBinary()
		if err != nil {
			return nil, err
		}
		out = binary.AppendUvarint(out, uint64(len(lb)))
		out = append(out, lb...)
	}
	return out, nil
}

// decodePartial decodes a partials payload of a configuration with lanes
// lanes (0: the primary's encoding alone).
func decodePartial(b []byte, lanes int) (windows.Partial, []windows.Partial, error) {
	var p windows.Partial
	if lanes == 0 {
		return p, nil, p.UnmarshalBinary(b)
	}
	if !bytes.HasPrefix(b, partialLanesTag) {
		return p, nil, fmt.Errorf("%w: no %s tag", errPartialLanes, partialLanesTag)
	}
	b = b[len(partialLanesTag):]
	n, k := binary.Uvarint(b)
	if k <= 0 || n != uint64(1+lanes) {
		return p, nil, fmt.Errorf("%w: %d partial states, want %d", errPartialLanes, n, 1+lanes)
	}
	b = b[k:]
	ps := make([]windows.Partial, 1+lanes)
	for i := range ps {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return p, nil, fmt.Errorf("%w: truncated", errPartialLanes)
		}
		if err := ps[i].UnmarshalBinary(b[k : k+int(l)]); err != nil {
			return p, nil, err
		}
		b = b[k+int(l):]
	}
	if len(b) != 0 {
		return p, nil, fmt.Errorf("%w: trailing bytes", errPartialLanes)
	}
	for _, lp := range ps[1:] {
		if lp.Start != ps[0].Start || !slices.Equal(lp.Partitions, ps[0].Partitions) {
			return p, nil, fmt.Errorf("%w: a lane's partial of another window or partition", errPartialLanes)
		}
	}
	return ps[0], ps[1:], nil
}

// newSplitLanes makes the lanes' Tumbling of input partition id (split
// mode), releasing from c.from on.
func (c *core) newSplitLanes(id int32) ([]*windows.Tumbling, error) {
	var out []*windows.Tumbling
	for _, l := range c.lanes {
		agg, err := windows.New(l.wcfg, c.seed)
		if err != nil {
			return nil, fmt.Errorf("operator: %s: %w", l.name, err)
		}
		if err := agg.EmitFrom(c.from); err != nil {
			return nil, fmt.Errorf("operator: first window %d: %w", c.from, err)
		}
		agg.AssignPartitions(id)
		out = append(out, agg)
	}
	return out, nil
}

// laneAggsOf returns the lanes' Tumbling that hold partition id's events.
func (c *core) laneAggsOf(id int32) []*windows.Tumbling {
	if c.split {
		return c.splitLanes[id]
	}
	return c.laneAggs
}

// pollLanePartials returns the partials of the windows that closed in
// partition id's lanes, by lane and window start. The lanes saw the same
// events and watermarks as the partition's primary Tumbling, so they
// close the same windows.
func (c *core) pollLanePartials(id int32) []map[int64]windows.Partial {
	var out []map[int64]windows.Partial
	for _, la := range c.splitLanes[id] {
		m := map[int64]windows.Partial{}
		for {
			ps := la.PollPartials(0)
			for _, p := range ps {
				m[p.Start] = p
			}
			if len(ps) < windows.DefaultPollLimit {
				break
			}
		}
		out = append(out, m)
	}
	return out
}

// mergeLanes merges every lane's partials of the window starting at start
// (m.lanePending) and attaches the merged windows to win.
func (m *merger) mergeLanes(win *windows.Window, start int64) error {
	if len(m.lanes) == 0 {
		return nil
	}
	byPid := m.lanePending[start]
	win.Lanes = make([]windows.Window, len(m.lanes))
	for i, l := range m.lanes {
		parts := make([]windows.Partial, 0, len(byPid))
		for _, pid := range slices.Sorted(maps.Keys(byPid)) {
			parts = append(parts, byPid[pid][i])
		}
		lw, err := windows.MergePartials(l.wcfg, m.seed, parts)
		if err != nil {
			return fmt.Errorf("operator: merging %s of window %s: %w", l.name, tsString(start), err)
		}
		win.Lanes[i] = lw
	}
	return nil
}
