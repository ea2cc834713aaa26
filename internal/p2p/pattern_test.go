package p2p

import (
	"bytes"
	"testing"
)

// The pattern differs by position, pass and seed, and a wrong copy cannot match it.
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
	if bad, _ := compare(make([]byte, 4099), 1, 0); bad < 4000 {
		t.Errorf("zeros match the pattern in all but %d bytes", bad)
	}
	shifted := append([]byte{0}, a[:4098]...)
	if bad, first := compare(shifted, 1, 0); bad < 4000 || first != 0 {
		t.Errorf("a copy shifted by a byte: %d wrong, first at %d", bad, first)
	}
	c := make([]byte, 4099)
	fill(c, 2, 0)
	if bad, _ := compare(c, 1, 0); bad < 4000 {
		t.Errorf("another seed matches in all but %d bytes", bad)
	}
}
