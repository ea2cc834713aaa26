package p2p

import "encoding/binary"

// fill writes the pattern of a pass into b: each 8-byte word a mix of its offset, the
// pass and the seed, so that no two words, no two passes and no two buffers agree, and a
// copy that lands shifted, truncated, stale or zeroed cannot match.
func fill(b []byte, seed uint64, pass int) {
	for off := 0; off+8 <= len(b); off += 8 {
		binary.LittleEndian.PutUint64(b[off:], word(seed, pass, off))
	}
	if r := len(b) % 8; r != 0 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], word(seed, pass, len(b)-r))
		copy(b[len(b)-r:], w[:r])
	}
}

// word is SplitMix64 of the offset, pass and seed.
func word(seed uint64, pass, off int) uint64 {
	z := seed ^ uint64(pass)<<48 ^ uint64(off)
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// compare counts the bytes of got that differ from the pattern of a pass, and returns
// the offset of the first (-1 when none does).
func compare(got []byte, seed uint64, pass int) (bad int64, first int64) {
	first = -1
	var w [8]byte
	for off := 0; off < len(got); off += 8 {
		binary.LittleEndian.PutUint64(w[:], word(seed, pass, off))
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
