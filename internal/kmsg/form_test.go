package kmsg

import (
	"strings"
	"testing"
)

// Record.Kernel tells a line in a kernel log's own form from a bare line and from the
// stamped lines of other programs, so that doctor --kernel-log can refuse a file that
// is no kernel log.
func TestRecordKernelForm(t *testing.T) {
	for _, c := range []struct {
		line   string
		kernel bool
	}{
		{`6,1205,2831115,-;pci 0000:01:00.0: BAR 1: can't assign; no space`, true},
		{`[    2.831115] pci 0000:01:00.0: BAR 1: can't assign; no space`, true},
		{`<6>pci 0000:01:00.0: BAR 1: can't assign`, true},
		{`kern  :info  : pci 0000:01:00.0: BAR 1: can't assign`, true},
		{`Sep 21 09:59:59 kpro6 kernel: pci 0000:01:00.0: BAR 1: can't assign`, true},
		{`kernel: pci 0000:01:00.0: BAR 1: can't assign`, true},
		{`2025-09-21T09:59:59,123456+00:00 pci 0000:01:00.0: BAR 1: can't assign`, true},
		{`pci 0000:01:00.0: BAR 1: can't assign; no space`, false},
		{`hello world`, false},
		{`2025-09-21T09:59:59 app: started`, false},
	} {
		var got []bool
		if err := Scan(strings.NewReader(c.line+"\n"), func(r Record) bool { got = append(got, r.Kernel); return true }); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0] != c.kernel {
			t.Errorf("%q: Kernel %v, want [%v]", c.line, got, c.kernel)
		}
	}
}
