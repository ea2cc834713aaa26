package doctor

import (
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

// No IOMMU is a warning on a host that passes nothing through, and an error once the
// configured split sends GPUs to vfio-pci, which cannot work without it.
func TestIOMMUOffWithVFIOSplitIsError(t *testing.T) {
	m := fakehost.OracleO4()
	m.IOMMU = false
	m.Files = map[string]string{"etc/gpusplit/split.toml": "[[group]]\nname = \"vms\"\nselect = [\"count:1\"]\ndriver = \"vfio-pci\"\n"}
	r := run(t, machine(t, m), "")
	if f := find(r, "iommu-off", Error); f == nil {
		t.Errorf("iommu-off is not an error with a vfio-pci split: %+v", r.Findings)
	}
}

// ACS P2P Completion Redirect alone sends the completions of peer-to-peer requests up to
// the root complex: a redirect all the same.
func TestACSCompletionRedirectAlone(t *testing.T) {
	r := run(t, machine(t, switchWithACS(0x0019)), "")
	f := find(r, "p2p-topology", Warning)
	if f == nil || !strings.Contains(strings.Join(f.Evidence, "\n"), "ReqRedir- CmpltRedir+") {
		t.Errorf("a switch with CmpltRedir alone: %+v", r.Findings)
	}
}

// A VM whose GPUs have a NUMA node but all hang off one host bridge shows NCCL no more
// of the host than a flat one: it needs both, nodes and host bridges, to say anything.
func TestVMWithNUMAOnOneHostBridgeIsFlat(t *testing.T) {
	m := fakehost.ProxmoxQ35Guest(4, []fakehost.Node{{ID: 0, CPUs: "0-15"}, {ID: 1, CPUs: "16-31"}})
	m.Bridges[0].NUMA = 1
	r := run(t, machine(t, m), "")
	if find(r, "vm-flat-topology", Warning) == nil {
		t.Errorf("a VM with NUMA nodes on one host bridge is not flat: %+v", r.Findings)
	}
}

// A GPU in a slot slower than itself runs at the slot's speed: that finding says why the
// speed is low, and the idle note, which would say it is power saving, is left out.
func TestSlowSlotHidesIdleNote(t *testing.T) {
	const port = "sys/devices/pci0000:80/0000:80:01.1/"
	h := sample(t, map[string]string{
		port + "max_link_speed":                  "16.0 GT/s PCIe\n",
		port + "current_link_speed":              "16.0 GT/s PCIe\n",
		port + "0000:81:00.0/current_link_speed": "16.0 GT/s PCIe\n",
	})
	r := run(t, h, "")
	var slow, idle bool
	for _, f := range r.Findings {
		if f.ID != "link-degraded" {
			continue
		}
		slow = slow || strings.Contains(f.Title, "slower than the GPU")
		idle = idle || strings.Contains(f.Title, "as idle GPUs do")
	}
	if !slow || idle {
		t.Errorf("slower slot found %v, idle note %v; want true, false: %+v", slow, idle, r.Findings)
	}
}

// The check takes kvm_amd's sev_snp as enabled when it reads Y and when it reads 1, the
// two ways of writing a boolean module parameter's true.
func TestSNPParameterOne(t *testing.T) {
	r := run(t, sample(t, map[string]string{"sys/module/kvm_amd/parameters/sev_snp": "1\n"}), "")
	if f := find(r, "sev-snp", Warning); f == nil || !strings.Contains(strings.Join(f.Evidence, "\n"), "sev_snp: 1") {
		t.Errorf("sev_snp 1: %+v", r.Findings)
	}
}

// Inside a VM numa_node -1 says how the VM was laid out, not that the firmware failed:
// numa-unknown stays silent there, even with several guest nodes; vm-flat-topology
// speaks instead.
func TestNUMAUnknownSilentInGuest(t *testing.T) {
	m := fakehost.ProxmoxQ35Guest(4, []fakehost.Node{{ID: 0, CPUs: "0-15"}, {ID: 1, CPUs: "16-31"}})
	r := run(t, machine(t, m), "")
	if has(r, "numa-unknown") {
		t.Errorf("numa-unknown fired in a VM: %+v", r.Findings)
	}
	if find(r, "vm-flat-topology", Warning) == nil {
		t.Errorf("vm-flat-topology did not fire: %+v", r.Findings)
	}
}

// capped keeps a list of exactly its length as it is, and says how many it left out of
// a longer one.
func TestCapped(t *testing.T) {
	lines := []string{"a", "b", "c"}
	if got := capped(lines, 3); strings.Join(got, "|") != "a|b|c" {
		t.Errorf("capped(3 lines, 3) = %q", got)
	}
	if got := capped(lines, 2); strings.Join(got, "|") != "a|b|(and 1 more)" {
		t.Errorf("capped(3 lines, 2) = %q", got)
	}
	if got := capped(lines, 4); strings.Join(got, "|") != "a|b|c" {
		t.Errorf("capped(3 lines, 4) = %q", got)
	}
}

// SEV-SNP on a host with one GPU is a note: there is no peer-to-peer for it to break.
// With two GPUs it is a warning (TestChecksFire).
func TestSEVSNPOneGPUIsInfo(t *testing.T) {
	m := fakehost.OracleO4()
	devs := m.Bridges[2].Devices
	m.Bridges[2].Devices = devs[:len(devs)-1] // the second RTX 5090's port
	m.Files["sys/module/kvm_amd/parameters/sev_snp"] = "Y\n"
	r := run(t, machine(t, m), "")
	if len(r.Findings) == 0 || find(r, "sev-snp", Info) == nil || find(r, "sev-snp", Warning) != nil {
		t.Errorf("SEV-SNP with one GPU: %+v", r.Findings)
	}
}
