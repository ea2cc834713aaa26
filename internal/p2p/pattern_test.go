package p2p

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
)

// differ counts the bytes where a and b differ and the offset of the first, byte by
// byte: what compare must report, worked out without it.
func differ(a, b []byte) (bad, first int64) {
	first = -1
	for i := range a {
		if a[i] != b[i] {
			if first < 0 {
				first = int64(i)
			}
			bad++
		}
	}
	return bad, first
}

// The pattern differs by position, pass and seed, and a wrong copy cannot match it:
// compare counts every byte that differs, no more and no fewer.
func TestPattern(t *testing.T) {
	a, b := make([]byte, 4099), make([]byte, 4099)
	fill(a, 1, 0)
	fill(b, 1, 1)
	if bytes.Equal(a, b) {
		t.Fatal("two passes fill the same bytes")
	}
	if bad, first := compare(a, 1, 0); bad != 0 || first != -1 {
		t.Fatalf("the pattern does not match itself: %d at %d", bad, first)
	}
	c := make([]byte, 4099)
	fill(c, 2, 0)
	for _, tt := range []struct {
		name string
		got  []byte
	}{
		{"zeros", make([]byte, 4099)},
		{"a copy shifted by a byte", append([]byte{0}, a[:4098]...)},
		{"another pass", b},
		{"another seed", c},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantBad, wantFirst := differ(tt.got, a)
			// Each wrong byte has a 1 in 256 chance of matching by luck.
			if wantBad < 4000 {
				t.Fatalf("only %d of 4099 bytes differ from the pattern", wantBad)
			}
			if bad, first := compare(tt.got, 1, 0); bad != wantBad || first != wantFirst {
				t.Errorf("compare = %d wrong, first at %d; want %d, first at %d", bad, first, wantBad, wantFirst)
			}
		})
	}
}

// A single wrong byte is found wherever it is: the first of the buffer, the last, the
// last of a word and the first of the next, in buffers of whole words and not.
func TestCompareOneByte(t *testing.T) {
	for _, n := range []int{1, 7, 8, 9, 15, 16, 4096, 4099} {
		offs := []int{0}
		if n > 1 {
			offs = append(offs, n-1)
		}
		if n > 9 {
			offs = append(offs, 7, 8)
		}
		for _, off := range offs {
			t.Run(fmt.Sprintf("%d bytes, byte %d", n, off), func(t *testing.T) {
				for _, flip := range []byte{0x01, 0x80, 0xff} {
					buf := make([]byte, n)
					fill(buf, 7, 1)
					buf[off] ^= flip
					if bad, first := compare(buf, 7, 1); bad != 1 || first != int64(off) {
						t.Errorf("byte %d ^ %#02x: compare = %d wrong, first at %d; want 1 at %d", off, flip, bad, first, off)
					}
				}
			})
		}
	}
	// The first and the last together: two, the first at 0.
	buf := make([]byte, 4099)
	fill(buf, 7, 1)
	buf[0] ^= 0xff
	buf[4098] ^= 0xff
	if bad, first := compare(buf, 7, 1); bad != 2 || first != 0 {
		t.Errorf("first and last bytes wrong: compare = %d, first at %d; want 2 at 0", bad, first)
	}
}

// No pair's pattern is another pair's shifted: among the patterns of every pair of 16
// GPUs and two passes, over 32 KiB each, no 8-byte word appears twice, so a read served
// from the wrong buffer at any offset cannot pass.
func TestPatternPairs(t *testing.T) {
	seen := map[uint64]string{}
	b := make([]byte, 32<<10)
	for i := range 16 {
		for j := range 16 {
			seed := uint64(i)<<8 | uint64(j)
			for pass := range 2 {
				fill(b, seed, pass)
				for off := 0; off < len(b); off += 8 {
					w := binary.LittleEndian.Uint64(b[off:])
					here := fmt.Sprintf("pair %d->%d pass %d offset %d", i, j, pass, off)
					if there, ok := seen[w]; ok {
						t.Fatalf("the word at %s is the word at %s", here, there)
					}
					seen[w] = here
				}
			}
		}
	}
}

// The pattern is written and compared for every byte of every check: 16 MiB of each.
func BenchmarkFill(b *testing.B) {
	buf := make([]byte, 16<<20)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		fill(buf, 0x0102, 1)
	}
}

func BenchmarkCompare(b *testing.B) {
	buf := make([]byte, 16<<20)
	fill(buf, 0x0102, 1)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		compare(buf, 0x0102, 1)
	}
}
