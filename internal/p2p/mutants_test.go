package p2p_test

import (
	"testing"

	"github.com/gpusplit/gpusplit/internal/p2p"
	"github.com/gpusplit/gpusplit/internal/testutils/p2ptest"
)

// peerDropper is the fake driver with peer copies from GPU 0 to GPU 1 that report
// success and move nothing.
type peerDropper struct{ *p2ptest.Fake }

func (d peerDropper) Copy(c p2p.Copy) error {
	if c.Src.Dev == 0 && c.Dst.Dev == 1 && (d.PeerOn[[2]int{0, 1}] || d.PeerOn[[2]int{1, 0}]) {
		return nil
	}
	return d.Fake.Copy(c)
}

// A peer copy that does not happen leaves the destination as it was: what the staged
// copy of the same pattern left there must not pass for it.
func TestPeerCopyThatDoesNotHappen(t *testing.T) {
	f := p2ptest.New(2)
	opt := small
	opt.IntegrityOnly = true
	rep, err := p2p.Run(peerDropper{f}, opt)
	if err != nil {
		t.Fatal(err)
	}
	check(t, f)
	p := rep.Pair(0, 1)
	if p.Verdict != p2p.Corrupt {
		t.Errorf("verdict %s: %s; want corrupt", p.Verdict, p.Why)
	}
	for _, c := range p.Checks {
		if c.Path == p2p.PathPeer && c.Bad < c.Size {
			t.Errorf("peer copy of %d bytes: %d wrong, want nearly all", c.Size, c.Bad)
		}
	}
}

// Without measurements (an integrity-only run) there is no rate to call slow: a pair
// whose copies arrive intact is ok, whatever its link.
func TestIntegrityOnlyIsNeverSlow(t *testing.T) {
	f := p2ptest.New(2)
	opt := small
	opt.IntegrityOnly = true
	opt.Relation = relations(nil, "PIX")
	opt.LinkGBps = func(string) float64 { return 31.5 }
	rep, err := p2p.Run(f, opt)
	if err != nil {
		t.Fatal(err)
	}
	if p := rep.Pair(0, 1); p.Verdict != p2p.OK {
		t.Errorf("verdict %s: %s; want ok", p.Verdict, p.Why)
	}
}

// One wrong byte in one pass is corruption.
func TestOneWrongByteIsCorrupt(t *testing.T) {
	f := p2ptest.New(2)
	opt := small
	opt.IntegrityOnly = true
	opt.Passes = 1
	rep, err := p2p.Run(edgeFlipper{f, func(n int64) []int64 { return []int64{n - 1} }}, opt)
	if err != nil {
		t.Fatal(err)
	}
	p := rep.Pair(0, 1)
	if p.Verdict != p2p.Corrupt {
		t.Errorf("verdict %s: %s; want corrupt", p.Verdict, p.Why)
	}
	for _, c := range p.Checks {
		if want := map[bool]int64{true: 1, false: 0}[c.Path == p2p.PathPeer]; c.Bad != want {
			t.Errorf("%s copy of %d bytes: %d wrong, want %d", c.Path, c.Size, c.Bad, want)
		}
	}
}
