package windows

// chunkBits sets the slab chunk size: 4096 records (96–128 KiB for the
// record types here). Chunks never move once full, so growing a slab
// copies at most one chunk and wastes at most one partly filled chunk,
// instead of the up to 2× peak and ~25 % slack of a growing slice.
const (
	chunkBits = 12
	chunkSize = 1 << chunkBits
)

// slab is an append-only array of records addressed by uint32 index,
// stored in fixed-size chunks. Index 0 is reserved as "none" by the caller
// pushing a dummy record first.
type slab[T any] struct {
	chunks [][]T
	n      uint32
}

// at returns the record at index i (which must be < n).
func (s *slab[T]) at(i uint32) *T {
	return &s.chunks[i>>chunkBits][i&(chunkSize-1)]
}

// push appends v and returns its index.
func (s *slab[T]) push(v T) uint32 {
	i := s.n
	c := int(i >> chunkBits)
	if c == len(s.chunks) {
		size := chunkSize
		if c == 0 {
			size = 8 // the first chunk grows, so small windows stay small
		}
		s.chunks = append(s.chunks, make([]T, 0, size))
	}
	ch := s.chunks[c]
	if len(ch) == cap(ch) { // only the first chunk, below chunkSize
		grown := make([]T, len(ch), min(2*cap(ch), chunkSize))
		copy(grown, ch)
		ch = grown
	}
	s.chunks[c] = append(ch, v)
	s.n++
	return i
}

// reset empties the slab, keeping its chunks for reuse.
func (s *slab[T]) reset() {
	for i := range s.chunks {
		clear(s.chunks[i])
		s.chunks[i] = s.chunks[i][:0]
	}
	s.n = 0
}

// capacity is the number of records the allocated chunks hold.
func (s *slab[T]) capacity() int64 {
	n := int64(0)
	for _, c := range s.chunks {
		n += int64(cap(c))
	}
	return n
}
