package pve

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mappingsText(t *testing.T, rep *MappingsReport, width int) string {
	t.Helper()
	var b strings.Builder
	if err := rep.WriteText(&b, "kpro6", width); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Each entry is a row: this node's with its device, driver, NUMA node and Proxmox's
// check (a failed one with why), another node's marked so; the lines of pci.cfg left
// out are listed after the table; without pci.cfg it says so.
func TestMappingsReportText(t *testing.T) {
	h, inv := demoDir(t, nil)
	rep, err := ReportMappings(h, inv.Tree, deviceID)
	if err != nil {
		t.Fatal(err)
	}
	rep.Entries[0].Checked, rep.Entries[0].Device, rep.Entries[0].Driver = true, "", ""
	rep.Entries[0].Problems = []string{"id mismatch", "gone"}
	rep.Problems = []string{"pci.cfg:3: bad line"}
	out := mappingsText(t, rep, 300)
	lines := strings.Split(out, "\n")
	if lines[0] != "kpro6: 2 PCI mappings; this node is kpro6." || lines[1] != "" || !strings.HasPrefix(lines[2], "MAPPING ") {
		t.Fatalf("the head:\n%s", out)
	}
	fields := func(i int) []string { return strings.Fields(lines[3+i]) }
	if f := fields(0); strings.Join(f[len(f)-6:], " ") != "- (none) FAILS: id mismatch; gone" {
		t.Errorf("a failed check: %q", lines[3])
	}
	for i, e := range rep.Entries[1:] {
		f := fields(i + 1)
		switch {
		case e.Node != "kpro6" && (len(f) != 5 || f[3] != "(other" || f[4] != "node)"):
			t.Errorf("another node's entry: %q", lines[4+i])
		case e.Node == "kpro6" && (f[0] != e.Mapping || f[1] != "kpro6" || f[3] != e.Device || f[4] != "nvidia" || f[5] != "1" && f[5] != "0" || f[6] != "ok"):
			t.Errorf("this node's entry: %q", lines[4+i])
		}
	}
	if !strings.HasSuffix(out, "\n\n1 line not listed, which gpusplit pve sync refuses until fixed:\n  problem: pci.cfg:3: bad line\n") {
		t.Errorf("the problems:\n%s", out)
	}
	rep.Problems = nil
	if out := mappingsText(t, rep, 300); strings.Contains(out, "not listed") {
		t.Errorf("no problems:\n%s", out)
	}

	if err := os.Remove(filepath.Join(h.Root(), MappingPath)); err != nil {
		t.Fatal(err)
	}
	if rep, err = ReportMappings(h, inv.Tree, deviceID); err != nil {
		t.Fatal(err)
	}
	if out := mappingsText(t, rep, 100); out != "kpro6: no PCI mappings (/etc/pve/mapping/pci.cfg does not exist).\n" {
		t.Errorf("without pci.cfg: %q", out)
	}
}
