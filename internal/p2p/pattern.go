package p2p

import "encoding/binary"

// fill writes the pattern of a pass into b: each 8-byte word a hash of its offset under a
// key made of the seed and the pass, so that no two words, no two passes and no two
// buffers agree, and a copy that lands shifted, truncated, stale or zeroed cannot match.
func fill(b []byte, seed uint64, pass int) {
	k := key(seed, pass)
	for off := 0; off+8 <= len(b); off += 8 {
		binary.LittleEndian.PutUint64(b[off:], word(k, off))
	}
	if r := len(b) % 8; r != 0 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], word(k, len(b)-r))
		copy(b[len(b)-r:], w[:r])
	}
}

// key mixes the seed and the pass before any offset is involved. Combining them with the
// offset first (seed ^ offset) made the pattern of one pair the pattern of another at a
// shifted offset (pairs 0->j and 1->j 256 bytes apart), so a read served from the wrong
// GPU's buffer could pass. keyDomain keeps what is mixed into a key apart from any
// offset (its bits 40 to 47 are set, and no buffer is 2^40 bytes), or a key could be
// the mix of an offset, and two keys' words the same with seed and offset swapped.
func key(seed uint64, pass int) uint64 { return mix(keyDomain ^ seed ^ uint64(pass)<<48) }

const keyDomain = 0xd1b54a32d192ed03

// word is the pattern's word at an offset: the offset is mixed on its own, then with the
// key, so that the words of two keys do not line up at any shift.
func word(k uint64, off int) uint64 { return mix(k ^ mix(uint64(off))) }

// mix is SplitMix64's step: a bijection of 64-bit words that spreads every input bit.
func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// compare counts the bytes of got that differ from the pattern of a pass, and returns
// the offset of the first (-1 when none does).
func compare(got []byte, seed uint64, pass int) (bad int64, first int64) {
	first = -1
	k := key(seed, pass)
	var w [8]byte
	for off := 0; off < len(got); off += 8 {
		want := word(k, off)
		// Whole words first: nearly all match, and a word's bytes are only counted one by
		// one when it does not.
		if off+8 <= len(got) && binary.LittleEndian.Uint64(got[off:]) == want {
			continue
		}
		binary.LittleEndian.PutUint64(w[:], want)
		end := min(off+8, len(got))
		for i := off; i < end; i++ {
			if got[i] != w[i-off] {
				if first < 0 {
					first = int64(i)
				}
				bad++
			}
		}
	}
	return bad, first
}
