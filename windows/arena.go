package windows

import "slices"

// arena allocates the variable-size per-unit records ("blobs") of one open
// window: runs of uint32 words addressed by a uint32 reference, so that the
// state holds no Go pointers (the garbage collector does not scan it) and a
// unit's whole state is contiguous (one or two cache lines for small
// bounds, instead of a chain of records).
//
// Blob sizes come in classes (classWords) spaced at most 12.5 % apart; a
// blob that outgrows its class moves to a larger one and its old place
// goes on the class's free list. Small blobs are carved from chunks of
// chunkWords words; blobs above maxSmall words, and every blob once the
// chunks' reference space is used up, get their own allocation (reference
// bigRef + index).
//
// Units grow through the classes as their events arrive, so holes pile up
// in classes that later units no longer need. When the free words exceed a
// quarter of the carved ones, compact slides the live blobs down over the
// holes (the caller then updates its references), which bounds the holes
// to 20 % of the arena and returns emptied chunks to the Go heap.
//
// A blob's word metaWord holds its class in bits 16–23 and, for a blob on
// a free list, the flag freeBit, so the chunks can be walked blob by blob;
// the other bits belong to the caller (word 0 links free blobs).
type arena struct {
	chunks [][]uint32 // chunk 0 grows from small; the others have chunkWords
	ends   []uint32   // words carved from each chunk (from arenaStart in chunk 0)
	cur    int        // chunk being carved
	free   [numClasses]uint32
	nfree  int // words on the free lists
	carved int // words carved from the chunks (live, free and skipped)
	// compactions counts compactions (for tests).
	compactions int

	big     [][]uint32 // own allocations; nil once freed
	bigFree []uint32   // indices of freed entries of big
}

const (
	// chunkBits sets the chunk size: 2^14 words (64 KiB). Growing the arena
	// allocates one chunk; at most one partly used chunk is slack.
	chunkBits  = 14
	chunkWords = 1 << chunkBits
	// maxSmall is the largest blob carved from a chunk (an eighth of a
	// chunk, so that the tail skipped at the end of a chunk is small).
	maxSmall = chunkWords / 8
	// bigRef flags a reference to an own allocation; references below it
	// address chunk words (chunk index << chunkBits | offset), so the
	// chunks span at most 2^31 words (8 GiB).
	bigRef = 1 << 31
	// firstChunk is the initial size of chunk 0 in words (it doubles up to
	// chunkWords), so that small windows stay small.
	firstChunk = 64
	// arenaStart is the first carved word: reference 0 means "none".
	arenaStart = 16
	// numClasses is the number of size classes (a class fits in a byte).
	numClasses = 256
	// metaWord is the blob word holding the class and the free flag.
	metaWord = 4
	// freeBit marks a blob on a free list.
	freeBit = 1 << 31
)

// Compaction trigger: at least compactMin free words (one chunk), and
// more than 1/compactShare of the carved words. Variables only so that
// tests can force a compaction after every move.
var (
	compactMin   = chunkWords
	compactShare = 4
)

// classWords[c] is the size in words of a blob of class c: 8 to 16 in steps
// of 1, then eight steps per doubling (16, 18, 20, …, 30, 32, 36, …), so a
// blob wastes less than 12.5 % of its class. The classes stop growing at
// 2^40 words (4 TiB), above the largest possible blob (maxBlobWords).
var classWords = func() (cw [numClasses]int) {
	c := 0
	for s := 8; s < 16; s++ {
		cw[c] = s
		c++
	}
	for p := 16; c < numClasses; p = min(2*p, 1<<40) {
		for q := 8; q < 16 && c < numClasses; q++ {
			cw[c] = min(p*q/8, 1<<40)
			c++
		}
	}
	return cw
}()

// The largest class, 2^40 words, holds the largest possible blob: checked
// at compile time (a negative constant does not convert to uint64).
const _ = uint64(1<<40 - maxBlobWords)

// classOf returns the smallest class holding n ≤ maxBlobWords words.
func classOf(n int) uint8 {
	c, _ := slices.BinarySearch(classWords[:], n)
	return uint8(c)
}

// classAt returns the class of the blob whose words start at s.
func classAt(s []uint32) uint8 { return uint8(s[metaWord] >> 16) }

// alloc returns a blob of class c. Its words are undefined except that
// word metaWord holds the class, with the caller's bits zero.
func (a *arena) alloc(c uint8) uint32 {
	if r := a.free[c]; r != 0 {
		s := a.at(r)
		a.free[c] = s[0]
		a.nfree -= classWords[c]
		s[metaWord] = uint32(c) << 16
		return r
	}
	n := classWords[c]
	if n <= maxSmall {
		if r, ok := a.carve(n); ok {
			a.at(r)[metaWord] = uint32(c) << 16
			return r
		}
	}
	b := make([]uint32, n)
	b[metaWord] = uint32(c) << 16
	if k := len(a.bigFree); k > 0 {
		i := a.bigFree[k-1]
		a.bigFree = a.bigFree[:k-1]
		a.big[i] = b
		return bigRef + i
	}
	a.big = append(a.big, b)
	return bigRef + uint32(len(a.big)-1)
}

// carve takes n words from the chunks, or returns false if the chunks'
// reference space is used up.
func (a *arena) carve(n int) (uint32, bool) {
	if len(a.chunks) == 0 {
		a.chunks = append(a.chunks, make([]uint32, firstChunk))
		a.ends = append(a.ends, arenaStart)
		a.carved = arenaStart
	}
	o := int(a.ends[a.cur])
	if o+n > chunkWords {
		// The tail of this chunk is too short: start the next one.
		if uint64(a.cur+2)<<chunkBits > bigRef {
			return 0, false
		}
		a.carved += chunkWords - o
		a.cur++
		if a.cur == len(a.chunks) {
			a.chunks = append(a.chunks, make([]uint32, chunkWords))
			a.ends = append(a.ends, 0)
		}
		o = 0
		a.ends[a.cur] = 0
	}
	if ch := a.chunks[a.cur]; o+n > len(ch) { // only chunk 0 while it grows
		size := len(ch)
		for size < o+n {
			size *= 2
		}
		grown := make([]uint32, min(size, chunkWords))
		copy(grown, ch)
		a.chunks[a.cur] = grown
	}
	a.ends[a.cur] = uint32(o + n)
	a.carved += n
	return uint32(a.cur<<chunkBits | o), true
}

// release returns blob r to the arena.
func (a *arena) release(r uint32) {
	if r >= bigRef {
		a.big[r-bigRef] = nil
		a.bigFree = append(a.bigFree, r-bigRef)
		return
	}
	s := a.at(r)
	c := classAt(s)
	s[0] = a.free[c]
	s[metaWord] = freeBit | uint32(c)<<16
	a.free[c] = r
	a.nfree += classWords[c]
}

// at returns the words from r to the end of its chunk or allocation; the
// caller knows the blob's size.
func (a *arena) at(r uint32) []uint32 {
	if r >= bigRef {
		return a.big[r-bigRef]
	}
	return a.chunks[r>>chunkBits][r&(chunkWords-1):]
}

// fragmented reports whether the holes are worth a compaction: more than
// a quarter of the carved words, and at least compactMin.
func (a *arena) fragmented() bool {
	return a.nfree >= compactMin && compactShare*a.nfree > a.carved
}

// compact slides every live blob in the chunks down over the free ones,
// keeping their order, and calls moved(old, new) for each blob that moved
// (references never collide: every new reference is below every old
// reference not yet moved). Chunks left empty are released.
func (a *arena) compact(moved func(old, new uint32)) {
	dc, do := 0, arenaStart // destination chunk and offset
	for c := 0; c <= a.cur; c++ {
		ch, end := a.chunks[c], int(a.ends[c])
		o := 0
		if c == 0 {
			o = arenaStart
		}
		for o < end {
			s := ch[o:]
			n := classWords[classAt(s)]
			if s[metaWord]&freeBit == 0 {
				if do+n > chunkWords {
					a.ends[dc] = uint32(do)
					dc, do = dc+1, 0
				}
				if dc != c || do != o {
					copy(a.chunks[dc][do:do+n], s[:n])
					moved(uint32(c<<chunkBits|o), uint32(dc<<chunkBits|do))
				}
				do += n
			}
			o += n
		}
	}
	a.ends[dc] = uint32(do)
	clear(a.chunks[dc+1:])
	a.chunks, a.ends = a.chunks[:dc+1], a.ends[:dc+1]
	a.cur = dc
	a.free, a.nfree = [numClasses]uint32{}, 0
	a.carved = dc<<chunkBits + do
	a.compactions++
}

// reset frees every blob, keeping the chunks for reuse.
func (a *arena) reset() {
	a.free, a.nfree = [numClasses]uint32{}, 0
	a.big, a.bigFree = nil, nil
	if len(a.chunks) > 0 {
		a.cur, a.ends[0], a.carved = 0, arenaStart, arenaStart
	}
}

// bytes is the memory the arena holds: chunk capacity and own allocations
// (with their 24-byte slice headers).
func (a *arena) bytes() int64 {
	n := int64(0)
	for _, c := range a.chunks {
		n += int64(cap(c)) * 4
	}
	for _, b := range a.big {
		n += int64(cap(b))*4 + 24
	}
	return n + int64(cap(a.bigFree))*4 + int64(cap(a.ends))*4
}
