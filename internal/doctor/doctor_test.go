package doctor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/samplehost"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

// sample lays the sample host out in a directory, with files added or replaced ("" removes
// one, "-> target" makes a link), so each check can be given its case.
func sample(t *testing.T, change map[string]string) *host.Host {
	t.Helper()
	dir := t.TempDir()
	if err := samplehost.Unpack(dir); err != nil {
		t.Fatal(err)
	}
	for p, body := range change {
		full := filepath.Join(dir, p)
		if body == "" {
			os.Remove(full)
			continue
		}
		os.Remove(full) // a link in the way
		os.MkdirAll(filepath.Dir(full), 0o755)
		if target, ok := strings.CutPrefix(body, "-> "); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func machine(t *testing.T, m fakehost.Machine) *host.Host {
	t.Helper()
	h, err := m.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// run runs the doctor on h, with its own kernel log or the one given.
func run(t *testing.T, h *host.Host, log string) *Report {
	t.Helper()
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	var r io.Reader
	var logErr error
	if log != "" {
		r = strings.NewReader(log)
	} else if b, err := h.KernelLog(); err == nil {
		r = bytes.NewReader(b)
	} else {
		logErr = err
	}
	e, err := NewEnv(h, inv, r, logErr)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(e, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func find(r *Report, id string, sev Severity) *Finding {
	for i, f := range r.Findings {
		if f.ID == id && f.Severity == sev {
			return &r.Findings[i]
		}
	}
	return nil
}

func has(r *Report, id string) bool {
	for _, f := range r.Findings {
		if f.ID == id && f.Severity > Info {
			return true
		}
	}
	return false
}

// The healthy sample host: nothing above info; every finding has its evidence and remedy.
func TestSampleHostIsHealthy(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, h, "")
	if r.Worst() > Info {
		for _, f := range r.Findings {
			t.Errorf("%s %s: %s %v", f.Severity, f.ID, f.Title, f.Evidence)
		}
	}
	if len(r.Ran) != len(Checks) || len(r.Partial) != 0 {
		t.Errorf("ran %v, partial %v", r.Ran, r.Partial)
	}
	if f := find(r, "iommu-param-invalid", Info); f == nil || !slices.Contains(f.Evidence, "kernel: AMD-Vi: Unknown option - 'on'") {
		t.Errorf("the invalid amd_iommu=on is not noted with its kernel line: %+v", f)
	}
}

// The VM of the reference case: 2 of 8 GPUs probed, the cloud image's GRUB trap, a flat
// topology, no P2P between root ports.
func TestReferenceVM(t *testing.T) {
	r := run(t, machine(t, fakehost.CloudGuestBARFailure()), "")
	bar := find(r, "bar-unassigned", Error)
	if bar == nil || !strings.Contains(bar.Title, "2 of 8 GPUs") || !strings.Contains(bar.Remedy, "X-PciMmio64Mb,string=2097152") {
		t.Fatalf("bar-unassigned: %+v", bar)
	}
	ev := strings.Join(bar.Evidence, "\n")
	for _, want := range []string{"0000:03:00.0 (no driver): BAR1 128 GiB 64-bit prefetchable", "kernel: pci 0000:03:00.0: BAR 1 [mem size 0x2000000000 64bit pref]: can't assign; no space"} {
		if !strings.Contains(ev, want) {
			t.Errorf("bar-unassigned evidence lacks %q:\n%s", want, ev)
		}
	}
	g := find(r, "grub-override", Warning)
	if g == nil || !strings.Contains(g.Title, "50-cloudimg-settings.cfg") || !strings.Contains(g.Title, "pci=realloc") ||
		!slices.Contains(g.Evidence, `/etc/default/grub:8: GRUB_CMDLINE_LINUX_DEFAULT="quiet splash pci=realloc"`) {
		t.Errorf("grub-override: %+v", g)
	}
	for _, id := range []string{"vm-flat-topology", "p2p-topology"} {
		if find(r, id, Warning) == nil {
			t.Errorf("%s did not fire", id)
		}
	}
	// Nothing else: a VM's virtual links, its missing NUMA, its lack of IOMMU are no faults.
	for _, f := range r.Findings {
		if !slices.Contains([]string{"bar-unassigned", "grub-override", "vm-flat-topology", "p2p-topology"}, f.ID) {
			t.Errorf("unexpected %s %s: %s", f.Severity, f.ID, f.Title)
		}
	}
	if r.Worst() != Error || r.Findings[0].ID != "bar-unassigned" {
		t.Errorf("worst %v, first %s", r.Worst(), r.Findings[0].ID)
	}
}

// readFixture reads a real log of internal/kmsg/testdata, less the "# " lines at its top
// that name its source and say what it shows.
func readFixture(t *testing.T, name string) string {
	t.Helper()
	return readLog(t, filepath.Join("..", "kmsg", "testdata", name))
}

// readLog reads a real log at path (the doctor's own are in testdata), less the "# "
// lines at its top.
func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for strings.HasPrefix(s, "# ") {
		_, s, _ = strings.Cut(s, "\n")
	}
	return s
}

// Each check fires on its case (a change to the healthy sample host, or a fixture) and not
// on the sample host itself (TestSampleHostIsHealthy).
func TestChecksFire(t *testing.T) {
	iommuFault := "[12345.678] nvidia 0000:81:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0003 address=0x80000040 flags=0x0020]\n"
	cases := []struct {
		id     string
		sev    Severity
		host   func(t *testing.T) *host.Host
		log    string
		want   string // in the title or evidence
		silent func(t *testing.T) *host.Host
	}{
		{id: "iommu-page-faults", sev: Error, log: iommuFault, want: "0000:81:00.0"},
		{id: "gpu-lost", sev: Error, log: readFixture(t, "pop-3363.log"), want: "GPU 0000:01:00.0 failed while the host ran"},
		// gpu-burn-1.log's fatal error, at the root port above the sample host's GPU
		// 0000:81:00.0: the host's topology gives the GPU.
		{id: "gpu-lost", sev: Error, log: "[74889.542044] pcieport 0000:80:01.1: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, id=0010(Receiver ID)\n" +
			"[74889.542184] pcieport 0000:80:01.1:    [ 5] Surprise Down Error    (First)\n", want: "GPU 0000:81:00.0 failed while the host ran: it stopped answering on its PCIe link"},
		{id: "aer-errors", sev: Warning, log: readFixture(t, "gpu-burn-1.log"), want: "0000:00:02.0: 1 fatal, 1 corrected"},
		{id: "gpu-quarantined", sev: Error, host: func(t *testing.T) *host.Host { return sample(t, quarantined(t)) }, want: "gpusplit hook release 0000:81:00.0"},
		// No public report found has these, so they are written as the driver and the
		// kernel print them: Xid 92 and 95 like akash-network-support-244.log's real
		// Xid 94 line (NVRM: Xid (PCI:dddd:bb:dd): N, pid=…, name=…, text), and a fatal
		// error reported by the GPU itself as drivers/pci/pcie/aer.c's aer_print_error
		// writes it ("PCIe Bus Error: severity=%s, type=%s, (%s)", then the status and
		// the error bit).
		{id: "gpu-lost", sev: Warning, log: "[ 5000.100000] NVRM: Xid (PCI:0000:81:00): 92, pid=2211, name=python3, High single-bit ECC error rate\n",
			want: "GPU 0000:81:00.0 failed while the host ran: Xid 92, a high rate of single-bit ECC errors"},
		{id: "gpu-lost", sev: Error, log: "[ 5100.200000] NVRM: Xid (PCI:0000:91:00): 95, pid=48213, name=python3, Uncontained: FBHUB. RST: Yes, D-RST: No\n",
			want: "GPU 0000:91:00.0 failed while the host ran: Xid 95, an uncontained memory error"},
		{id: "gpu-lost", sev: Error, log: "[ 5200.300000] nvidia 0000:e1:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)\n" +
			"[ 5200.300010] nvidia 0000:e1:00.0:   device [10de:2bb1] error status/mask=00004000/00000000\n" +
			"[ 5200.300020] nvidia 0000:e1:00.0:    [14] CmpltTO                (First)\n", want: "GPU 0000:e1:00.0 failed while the host ran"},
		{id: "gpu-init-failed", sev: Error, log: readFixture(t, "gpu-operator-1146.log"), want: "RmInitAdapter failed! (0x24:0x72:1568) [state init, status 0x72] (×3)"},
		{id: "vfio-reset", sev: Error, log: readFixture(t, "single-gpu-passthrough-103.log"), want: "depends on group 14 which is not owned"},
		// The sample host's GPU 0000:81:00.0 as vfio-pci reports it: its reset_method and the advice.
		{id: "vfio-reset", sev: Error, log: "[  88.000000] vfio-pci 0000:81:00.0: not ready 65535ms after FLR; giving up\n", want: "0000:81:00.0/reset_method: flr bus"},
		{id: "vfio-bar-reserve", sev: Error, log: readFixture(t, "talos-14356.log"), want: "BAR 0: can't reserve [mem 0x2800000000-0x2fffffffff 64bit pref]"},
		// BOOTFB inside the sample host GPU's BAR1, as /proc/iomem nests it.
		{id: "vfio-bar-reserve", sev: Error, host: func(t *testing.T) *host.Host {
			return sample(t, map[string]string{"proc/iomem": "00000000-00000fff : Reserved\n" +
				"30000000000-3ffffffffff : PCI Bus 0000:80\n" +
				"  30000000000-31fffffffff : PCI Bus 0000:81\n" +
				"    30000000000-31fffffffff : 0000:81:00.0\n" +
				"      30000000000-300007e8fff : BOOTFB\n"})
		}, log: "[  12.000000] vfio-pci 0000:81:00.0: BAR 1: can't reserve [mem 0x30000000000-0x31fffffffff 64bit pref]\n", want: "/proc/iomem: 30000000000-300007e8fff : BOOTFB"},
		{id: "vfio-group-not-viable", sev: Error, log: readFixture(t, "vga-passthrough-15.log"), want: "group 1 is not viable"},
		{id: "vfio-group-not-viable", sev: Error, log: "qemu-system-x86_64: -device vfio-pci,host=0000:81:00.0,id=hostpci0: vfio 0000:81:00.0: group 72 is not viable\n", want: "IOMMU group 72: 0000:81:00.1"},
		{id: "boot-cmdline", sev: Info, log: readFixture(t, "kata-containers-10622.log"), want: "in the log's boot only: root=/dev/mapper/ubuntu--vg-ubuntu--lv splash intel_iommu=on"},
		{id: "boot-cmdline", sev: Info, log: readFixture(t, "kata-containers-10622.log"), want: "/etc/default/grub (and /etc/default/grub.d) asks for amd_iommu=on, which the log's boot lacked"},
		{id: "boot-cmdline", sev: Warning, log: readFixture(t, "amdsev-271.log"), want: "did not know parameters it was given: mem_encrypt=on"},
		// The PCI core's line, as pci.c prints it, for a GPU of the sample host.
		{id: "gpu-init-failed", sev: Error, log: "[ 5.000000] nvidia 0000:81:00.0: Unable to change power state from D3cold to D0, device inaccessible\n", want: "disable_idle_d3=1"},
		{id: "bar-unassigned", sev: Error, log: readFixture(t, "gpu-operator-492.log"), want: "BAR1 is 0M"},
		{id: "driver-mismatch", sev: Error, log: readFixture(t, "nvidia-all-394.log"), want: "the version 595.80"},
		// The client 595.84, the module 595.80: an upgrade whose module is not loaded; and
		// the sample host's module is 580.95.05, not the log's.
		{id: "driver-mismatch", sev: Error, log: readFixture(t, "nvidia-all-394.log"), want: "The libraries are newer than the loaded module"},
		{id: "driver-mismatch", sev: Error, log: readFixture(t, "nvidia-all-394.log"), want: "the log names the module 595.80, but 580.95.05 is loaded now"},
		{id: "driver-mismatch", sev: Error, host: func(t *testing.T) *host.Host {
			return sample(t, map[string]string{
				"usr/lib/x86_64-linux-gnu/libnvidia-ml.so.575.57.08": "elf", "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.95.05": "elf",
				"usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1": "-> libnvidia-ml.so.575.57.08",
			})
		}, want: "libnvidia-ml.so.575.57.08"},
		{id: "driver-mismatch", sev: Error, host: func(t *testing.T) *host.Host {
			return sample(t, map[string]string{
				"usr/lib/x86_64-linux-gnu/libnvidia-ml.so.575.57.08": "elf", "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1": "-> libnvidia-ml.so.575.57.08",
			})
		}, want: "The libraries are older than the loaded module"},
		{id: "sev-snp", sev: Warning, host: func(t *testing.T) *host.Host {
			return sample(t, map[string]string{"sys/module/kvm_amd/parameters/sev_snp": "Y\n"})
		}, want: "sev_snp: Y"},
		{id: "sev-snp", sev: Warning, log: readFixture(t, "amdsev-287.log"), want: "SEV-SNP enabled"},
		{id: "cmdline-not-applied", sev: Warning, host: func(t *testing.T) *host.Host {
			return sample(t, map[string]string{
				"proc/cmdline":       "initrd=\\EFI\\proxmox\\6.17.2-1-pve\\initrd.img-6.17.2-1-pve root=ZFS=rpool/ROOT/pve-1 boot=zfs\n",
				"etc/kernel/cmdline": "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt\n",
			})
		}, want: "proxmox-boot-tool refresh"},
		{id: "cmdline-not-applied", sev: Warning, host: func(t *testing.T) *host.Host {
			return sample(t, map[string]string{"proc/cmdline": "BOOT_IMAGE=/boot/vmlinuz-6.17.2-1-pve root=/dev/mapper/pve-root ro quiet\n"})
		}, want: "iommu=pt"},
		{id: "iommu-off", sev: Warning, host: func(t *testing.T) *host.Host {
			m := fakehost.OracleO4()
			m.IOMMU = false
			return machine(t, m)
		}, want: "/sys/kernel/iommu_groups is empty"},
		{id: "iommu-translated", sev: Warning, host: func(t *testing.T) *host.Host {
			m := fakehost.OracleO4()
			m.IOMMUType = "DMA-FQ"
			return machine(t, m)
		}, want: "type: DMA-FQ"},
		{id: "vm-machine-type", sev: Warning, host: func(t *testing.T) *host.Host {
			return machine(t, fakehost.I440fxGuest4())
		}, want: "i440FX"},
		{id: "link-degraded", sev: Warning, host: func(t *testing.T) *host.Host {
			return sample(t, map[string]string{"sys/devices/pci0000:80/0000:80:01.1/0000:81:00.0/current_link_width": "8\n"})
		}, want: "x8 of x16"},
		{id: "iommu-group-shared", sev: Warning, host: o4WithNIC, want: "also holds"},
		{id: "gpu-held", sev: Warning, host: func(t *testing.T) *host.Host {
			return sample(t, map[string]string{"etc/gpusplit/split.toml": "[[group]]\nname = \"vms\"\nselect = [\"numa:1\"]\ndriver = \"vfio-pci\"\n"})
		}, want: "in container 129"},
		{id: "split-drift", sev: Warning, host: func(t *testing.T) *host.Host {
			return sample(t, map[string]string{"etc/gpusplit/split.toml": "[[group]]\nname = \"vms\"\nselect = [\"numa:1\"]\ndriver = \"vfio-pci\"\n"})
		}, want: "0000:81:00.0: on nvidia, should be on vfio-pci"},
		{id: "numa-unknown", sev: Warning, host: func(t *testing.T) *host.Host {
			return sample(t, map[string]string{"sys/devices/pci0000:e0/0000:e0:01.1/0000:e1:00.0/numa_node": "-1\n"})
		}, want: "0000:e1:00.0/numa_node: -1"},
		{id: "p2p-topology", sev: Warning, host: func(t *testing.T) *host.Host {
			return machine(t, switchWithACS(0x001d))
		}, want: "ReqRedir+ CmpltRedir+"},
		{id: "iommu-param-invalid", sev: Info, host: func(t *testing.T) *host.Host {
			return sample(t, map[string]string{"proc/cmdline": "BOOT_IMAGE=/boot/vmlinuz-6.17.2-1-pve root=/dev/mapper/pve-root ro amd_iommu=on iommu=pt\n"})
		}, want: "/proc/cmdline: amd_iommu=on"},
		// The firmware checks on the sample host, set as a GPU server should be: notes.
		{id: "firmware-platform", sev: Info, want: "ESC8000A-E13"},
		{id: "firmware-numa", sev: Info, want: "node0: CPUs 0-31,64-95"},
		{id: "firmware-iommu", sev: Info, want: "the GPUs: 8 in identity groups"},
		{id: "firmware-above-4g", sev: Info, want: "of bridge 0000:00:01.1"},
		{id: "firmware-rebar", sev: Info, want: "BAR1: 128 GiB, the largest it offers 128 GiB"},
		{id: "firmware-sriov", sev: Info, want: "no sriov_totalvfs, or 0, on 8 GPUs"},
		{id: "firmware-acs", sev: Info, want: "0000:81:00.0: below root port 0000:80:01.1"},
		{id: "firmware-acs", sev: Info, host: func(t *testing.T) *host.Host {
			return machine(t, switchWithACS(0x001d))
		}, want: "the switch ports redirect P2P up to the root complex"},
		{id: "firmware-pcie", sev: Info, want: "max payload 256 of 256 bytes"},
		// A GPU's 1 GiB BAR1 below 4 GiB, where a firmware without Above 4G decoding
		// puts it.
		{id: "firmware-above-4g", sev: Warning, host: func(t *testing.T) *host.Host {
			zero := "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
			return sample(t, map[string]string{"sys/devices/pci0000:80/0000:80:01.1/0000:81:00.0/resource": zero +
				"0x0000000080000000 0x00000000bfffffff 0x000000000014220c\n" + strings.Repeat(zero, 11)})
		}, want: "0000:81:00.0 BAR1 (1 GiB 64-bit prefetchable) at 0x80000000, below 4 GiB"},
	}
	// Every check has a case that makes it fire, here or in TestReferenceVM.
	elsewhere := []string{"grub-override", "vm-flat-topology"}
	for _, c := range Checks {
		if !slices.Contains(elsewhere, c.ID) && !slices.ContainsFunc(cases, func(k struct {
			id     string
			sev    Severity
			host   func(t *testing.T) *host.Host
			log    string
			want   string
			silent func(t *testing.T) *host.Host
		}) bool {
			return k.id == c.ID
		}) {
			t.Errorf("check %s has no case that makes it fire", c.ID)
		}
	}
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			var h *host.Host
			if c.host != nil {
				h = c.host(t)
			} else {
				var err error
				if h, err = samplehost.Open(); err != nil {
					t.Fatal(err)
				}
			}
			r := run(t, h, c.log)
			f := find(r, c.id, c.sev)
			if f == nil {
				t.Fatalf("%s did not fire as %s; found %+v", c.id, c.sev, r.Findings)
			}
			text := f.Title + "\n" + strings.Join(f.Evidence, "\n") + "\n" + f.Remedy
			if !strings.Contains(text, c.want) {
				t.Errorf("%s lacks %q:\n%s", c.id, c.want, text)
			}
			if f.Remedy == "" || len(f.Evidence) == 0 {
				t.Errorf("%s has no remedy or no evidence", c.id)
			}
		})
	}
	// Silent cases beyond the healthy sample host.
	quiet := []struct {
		name string
		host func(t *testing.T) *host.Host
		log  string
		id   string
	}{
		{"a fault on a device that is not a GPU", nil, "[1.0] nvme 0000:12:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0003 address=0x80000040 flags=0x0020]\n", "iommu-page-faults"},
		{"a split in effect", func(t *testing.T) *host.Host {
			return sample(t, map[string]string{"etc/gpusplit/split.toml": "rest = \"keep\"\n[[group]]\nname = \"ct\"\nselect = [\"numa:0\"]\ndriver = \"nvidia\"\n"})
		}, "", "split-drift"},
		{"matching libraries", func(t *testing.T) *host.Host {
			return sample(t, map[string]string{
				"usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.95.05": "elf", "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1": "-> libnvidia-ml.so.580.95.05",
			})
		}, "", "driver-mismatch"},
		{"a switch without ACS redirect", func(t *testing.T) *host.Host { return machine(t, switchWithACS(0x0011)) }, "", "p2p-topology"},
		{"a single-node machine without NUMA information", func(t *testing.T) *host.Host {
			m := fakehost.OracleO4()
			m.Bridges[0].NUMA = -1
			return machine(t, m)
		}, "", "numa-unknown"},
	}
	for _, q := range quiet {
		t.Run("quiet/"+q.name, func(t *testing.T) {
			h, _ := samplehost.Open()
			if q.host != nil {
				h = q.host(t)
			}
			if r := run(t, h, q.log); has(r, q.id) {
				t.Errorf("%s fired on %s", q.id, q.name)
			}
		})
	}
}

// switchWithACS is a host with two GPUs behind one PCIe switch whose downstream ports
// have the ACS control register set to ctl (in config space past 0x100, read as root).
func switchWithACS(ctl uint16) fakehost.Machine {
	m := fakehost.OracleO1()
	for bi := range m.Bridges {
		for di := range m.Bridges[bi].Devices {
			setACS(&m.Bridges[bi].Devices[di], ctl, 0)
		}
	}
	return m
}

// setACS gives the switch's downstream ports (depth 2 below the root port) an ACS capability.
func setACS(d *fakehost.Device, ctl uint16, depth int) {
	if d.Class>>8 == 0x0604 && depth == 2 {
		ext := make([]byte, 8)
		binary.LittleEndian.PutUint32(ext[0:], 0x0d|1<<16) // ACS, version 1, no next capability
		binary.LittleEndian.PutUint16(ext[4:], 0x005f)
		binary.LittleEndian.PutUint16(ext[6:], ctl)
		d.ExtConfig = ext
	}
	for i := range d.Children {
		setACS(&d.Children[i], ctl, depth+1)
	}
}

// A kernel log of 100 MB is read in one pass in bounded memory.
func TestLargeLogBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 100 MB")
	}
	const size = 100 << 20
	line := "[12345.678901] nvidia 0000:81:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0003 address=0x80000040 flags=0x0020]\n"
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	facts, err := CollectLog(&repeat{line: line, left: size})
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if facts.FaultCount != size/len(line) || len(facts.Faults) != maxKept {
		t.Errorf("%d faults counted, %d kept", facts.FaultCount, len(facts.Faults))
	}
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 32<<20 {
		t.Errorf("heap grew by %d MB reading the log", grew>>20)
	}
}

// repeat yields a line over and over, up to left bytes, without holding them.
type repeat struct {
	line string
	left int
	off  int
}

func (r *repeat) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && r.left > 0 {
		c := copy(p[n:], r.line[r.off:])
		c = min(c, r.left)
		n += c
		r.left -= c
		r.off = (r.off + c) % len(r.line)
	}
	return n, nil
}

func TestOnlyAndUnknownCheck(t *testing.T) {
	h, _ := samplehost.Open()
	inv, _ := inventory.Build(h, nil)
	e, err := NewEnv(h, inv, nil, fmt.Errorf("no log"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(e, []string{"p2p-topology"})
	if err != nil || len(r.Ran) != 1 || len(r.Findings) != 1 {
		t.Errorf("--only: %v %+v", err, r)
	}
	var unknown *UnknownCheckError
	if _, err := Run(e, []string{"nope"}); !errors.As(err, &unknown) || unknown.ID != "nope" || err.Error() != `no check "nope"` {
		t.Errorf("unknown check: %v", err)
	}
	// A typo is answered with the nearest ids, in one line, not with all of them.
	for typo, want := range map[string]string{"iommu-of": "(did you mean iommu-off?)", "gpuheld": "(did you mean gpu-held?)", "firmwre": "(did you mean firmware?)"} {
		_, err := Run(e, []string{typo})
		if err == nil || !strings.Contains(err.Error(), want) || len(err.Error()) > 200 {
			t.Errorf("--only %s: %v", typo, err)
		}
	}
	full, _ := Run(e, nil)
	if full.Partial["iommu-page-faults"] == "" {
		t.Error("without a kernel log, the log checks are not marked partial")
	}
}

// The public log excerpts of the reference, as kernel logs of hosts with GPUs at the
// addresses they name, give the findings they are the signatures of.
func TestRealLogExcerpts(t *testing.T) {
	q35 := func(t *testing.T) *host.Host { return machine(t, fakehost.Q35Guest8()) }
	demoHost := func(t *testing.T) *host.Host {
		h, err := samplehost.Open()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	cases := []struct {
		log  string
		host func(t *testing.T) *host.Host
		id   string
		sev  Severity
		want string
	}{
		{"cuda-samples-48.log", q35, "iommu-page-faults", Error, "nvidia 0000:07:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0003 address=0x80000040 flags=0x0020]"},
		// Kernels before 5.5 printed an event over two lines; 0000:05:00.0 is a GPU of
		// the q35 fixture.
		{"apu2-documentation-240.log", q35, "iommu-page-faults", Error, "AMD-Vi: Event logged [IO_PAGE_FAULT device=05:00.0 domain=0x0012 address=0x00000000ff6101b0 flags=0x0070]"},
		{"lxd-14381.log", q35, "bar-unassigned", Error, "NVRM: BAR0 is 0M @ 0x0 (PCI:0000:07:00.0)"},
		{"heymeco-rockchip-pcie-devices-2.log", demoHost, "bar-unassigned", Error, "pci 0000:01:00.0: BAR 1 [mem size 0x10000000 64bit pref]: can't assign; no space"},
		{"heymeco-rockchip-pcie-devices-2.log", demoHost, "link-degraded", Warning, "limited by 8.0 GT/s PCIe x4 link"},
		{"amdsev-287.log", demoHost, "sev-snp", Warning, "kvm_amd: SEV-SNP enabled (ASIDs 1 - 1)"},
		{"amdsev-287.log", demoHost, "sev-snp", Warning, "kernel: ccp 0000:03:00.5: SEV-SNP API:1.55 build:42"},
		{"amdsev-189.log", demoHost, "sev-snp", Warning, "kernel: ccp 0000:42:00.1: SEV-SNP: failed to INIT rc -5, error 0x3"},
		{"amdsev-82.log", demoHost, "sev-snp", Warning, "SEV-SNP:  failed to INIT error 0x13"},
		{"bazzite-2668.log", demoHost, "driver-mismatch", Error, "has the version 570.153.02"},

		// The port's fatal error, the GPU's driver that cannot recover, then Xid 79.
		{"gpu-burn-1.log", demoHost, "gpu-lost", Error, "pcieport 0000:00:02.0:    [ 5] Surprise Down Error    (First)\nkernel: nvidia 0000:02:00.0: device has no AER-aware driver\nkernel: NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus."},
		{"gpu-burn-1.log", demoHost, "aer-errors", Warning, "0000:00:02.0: 1 fatal, 1 corrected in 1m44s"},
		{"returnn-1500.log", demoHost, "gpu-lost", Error, "nvidia 0000:03:00.0: AER: can't recover (no error_detected callback) (×2)"},
		{"pop-3363.log", demoHost, "gpu-lost", Error, "NVRM: GPU 0000:01:00.0: GPU has fallen off the bus."},
		{"nvsentinel-155.log", demoHost, "gpu-lost", Error, "NVRM: The NVIDIA GPU 0000:b3:00.0 NVRM: (PCI ID: 10de:26b5) installed in this system has NVRM: fallen off the bus"},
		{"gpu-operator-1146.log", demoHost, "gpu-lost", Error, "Xid (PCI:0000:07:00): 48"},
		{"nvidia-forum-364958.log", demoHost, "gpu-lost", Error, "154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required) (×2)"},
		{"akash-network-support-244.log", demoHost, "gpu-lost", Warning, "Xid (PCI:0000:00:08): 94"},
		{"pop-3363-aer.log", demoHost, "aer-errors", Info, "0000:00:03.1: 2 corrected"},
		{"nvsentinel-155.log", demoHost, "gpu-init-failed", Error, "NVRM: The NVIDIA probe routine failed for 1 device(s)."},
		{"mbp-2016-linux-60.log", demoHost, "bar-unassigned", Error, "kernel: pcieport 0000:7b:02.0: BAR 15: no space for [mem size 0x00200000 64bit pref]"},
	}
	for _, c := range cases {
		t.Run(c.log+"/"+c.id, func(t *testing.T) {
			r := run(t, c.host(t), readFixture(t, c.log))
			f := find(r, c.id, c.sev)
			if f == nil {
				t.Fatalf("%s did not fire: %+v", c.id, r.Findings)
			}
			if !strings.Contains(strings.Join(f.Evidence, "\n"), c.want) {
				t.Errorf("evidence lacks %q:\n%s", c.want, strings.Join(f.Evidence, "\n"))
			}
		})
	}
}

// cutLog yields its text, then the error of a live log read past its cap.
type cutLog struct{ r io.Reader }

func (c cutLog) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err == io.EOF {
		return n, &host.PathError{Op: "read", Path: host.KernelLogPath, Err: host.ErrLogCut}
	}
	return n, err
}

// A live kernel log cut at its cap is scanned as far as it was read: the findings of
// that part stand, and the log checks say they saw only part of it.
func TestCutLog(t *testing.T) {
	h, _ := samplehost.Open()
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	log := "[   12.345678] nvidia 0000:81:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0003 address=0x80000040 flags=0x0020]\n"
	e, err := NewEnv(h, inv, cutLog{strings.NewReader(log)}, nil)
	if err != nil {
		t.Fatalf("a cut log fails the doctor: %v", err)
	}
	r, err := Run(e, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !has(r, "iommu-page-faults") {
		t.Error("the fault in the part read is not found")
	}
	for _, id := range logChecks {
		if why := r.Partial[id]; !strings.Contains(why, "goes on past 32 MiB") {
			t.Errorf("%s: partial %q, want the cut named", id, why)
		}
	}
}

// o4WithNIC is O4 with a NIC on the root bus, at 0000:00:1e.0, in the first GPU's IOMMU
// group.
func o4WithNIC(t *testing.T) *host.Host {
	m := fakehost.OracleO4()
	group := -1
	for _, b := range m.Bridges {
		for _, d := range b.Devices {
			for _, c := range d.Children {
				if c.Vendor == 0x10de && group < 0 {
					group = c.Group
				}
			}
		}
	}
	m.Bridges[0].Devices = append(m.Bridges[0].Devices, fakehost.Device{Slot: 0x1e, Vendor: 0x8086, Device: 0x1533, Class: 0x020000, Driver: "igb", Group: group})
	return machine(t, m)
}

// Faults count when they are a GPU's: by its driver's name, by the host's inventory
// (a GPU, its functions, one of its slot that sysfs no longer shows, a device of its IOMMU
// group) when the log is the host's, by the log's own enumeration when it is another
// machine's. An NVMe drive's faults never do.
func TestWhoseFaults(t *testing.T) {
	const amd = "AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0003 address=0x80000040 flags=0x0020]"
	o4 := o4WithNIC(t)
	sampleHost, _ := samplehost.Open()
	// Another machine's boot: an NVMe drive at 0000:01:00.0 (a GPU on the sample
	// host), and a GPU at 0000:05:00.0 (nothing there on the sample host).
	other := "[    0.412345] pci 0000:01:00.0: [144d:a80a] type 00 class 0x010802 PCIe Endpoint\n" +
		"[    0.412400] pci 0000:05:00.0: [10de:2684] type 00 class 0x030000 PCIe Legacy Endpoint\n" +
		"[    0.412500] pci 0000:00:01.1: [1022:14ab] type 01 class 0x060400 PCIe Root Port\n"
	for _, c := range []struct {
		name  string
		h     *host.Host
		log   string
		fires bool
	}{
		{"a GPU's fault named by its driver", sampleHost, "nvidia 0000:01:00.0: " + amd, true},
		{"an NVMe drive's fault at a GPU's address", sampleHost, "nvme 0000:01:00.0: " + amd, false},
		{"a fault of the GPU's audio function", sampleHost, "snd_hda_intel 0000:01:00.1: " + amd, true},
		{"a fault of the GPU's audio function, gone from sysfs since", machine(t, optiplex9020()), "snd_hda_intel 0000:01:00.1: " + amd, true},
		{"a fault of a function no GPU's slot has", machine(t, optiplex9020()), "AMD-Vi: Event logged [IO_PAGE_FAULT device=02:00.1 domain=0x0003 address=0x80000040 flags=0x0020]", false},
		{"a fault of a device in a GPU's group", o4, "AMD-Vi: Event logged [IO_PAGE_FAULT device=00:1e.0 domain=0x0003 address=0x80000040 flags=0x0020]", true},
		{"a fault of a device in no GPU's group", o4, "AMD-Vi: Event logged [IO_PAGE_FAULT device=00:1f.0 domain=0x0003 address=0x80000040 flags=0x0020]", false},
		{"another machine's NVMe at a GPU's address here", sampleHost, other + "[  812.000000] AMD-Vi: Event logged [IO_PAGE_FAULT device=01:00.0 domain=0x0003 address=0x80000040 flags=0x0020]\n", false},
		{"another machine's GPU, not here", sampleHost, other + "[  812.000000] AMD-Vi: Event logged [IO_PAGE_FAULT device=05:00.0 domain=0x0003 address=0x80000040 flags=0x0020]\n", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, c.h, c.log+"\n")
			if got := has(r, "iommu-page-faults"); got != c.fires {
				t.Errorf("iommu-page-faults fired: %v, want %v: %+v", got, c.fires, r.Findings)
			}
		})
	}
}

// A link the kernel reports at full width but lower speed is power saving or a slower
// slot (info), not a narrow link (a warning); another device's link is not a GPU's.
func TestLinkLimitWidth(t *testing.T) {
	h, _ := samplehost.Open()
	for _, c := range []struct {
		line    string
		warning bool
		info    bool
	}{
		{"pci 0000:01:00.0: 63.008 Gb/s available PCIe bandwidth, limited by 2.5 GT/s PCIe x16 link at 0000:00:01.1 (capable of 504.112 Gb/s with 32.0 GT/s PCIe x16 link)", false, true},
		{"pci 0000:01:00.0: 126.016 Gb/s available PCIe bandwidth, limited by 32.0 GT/s PCIe x4 link at 0000:00:01.1 (capable of 504.112 Gb/s with 32.0 GT/s PCIe x16 link)", true, false},
		{"nvme 0000:02:00.0: 15.752 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe x2 link at 0000:00:02.1 (capable of 31.504 Gb/s with 8.0 GT/s PCIe x4 link)", false, false},
	} {
		r := run(t, h, c.line+"\n")
		var warn, info bool
		for _, f := range r.Findings {
			if f.ID != "link-degraded" {
				continue
			}
			in := strings.Contains(strings.Join(f.Evidence, "\n"), c.line)
			warn = warn || (in && f.Severity == Warning)
			info = info || (in && f.Severity == Info)
		}
		if warn != c.warning || info != c.info {
			t.Errorf("%s: warning %v, info %v; want %v, %v", c.line, warn, info, c.warning, c.info)
		}
	}
}

// optiplex9020 is the machine of testdata/gpu-wrlinux-dmesg.log with the ids and classes
// its whole dmesg enumerates: the host bridge [8086:0c00], the root port 0000:00:01.0
// [8086:0c01], a GPU [10de:2187] at 0000:01:00.0 with its USB [10de:1aec] and UCSI
// [10de:1aed] functions. Its audio function [10de:1aeb] is gone from sysfs (removed, as
// is done to pass a GPU through without it), and its link runs at 8 GT/s now; the
// subsystem ids and the CPUs are not the log's.
func optiplex9020() fakehost.Machine {
	gpu := func(fn uint8, id uint16, class uint32, driver string) fakehost.Device {
		return fakehost.Device{Func: fn, Vendor: 0x10de, Device: id, Class: class, Driver: driver, Speed: "8.0 GT/s PCIe", Width: 16}
	}
	port := fakehost.Device{Slot: 1, Vendor: 0x8086, Device: 0x0c01, Class: 0x060400, Driver: "pcieport", Speed: "8.0 GT/s PCIe", Width: 16,
		Secondary: 1, Children: []fakehost.Device{gpu(0, 0x2187, 0x030000, "nvidia"), gpu(2, 0x1aec, 0x0c0330, "xhci_hcd"), gpu(3, 0x1aed, 0x0c8000, "")}}
	return fakehost.Machine{
		Nodes: []fakehost.Node{{ID: 0, CPUs: "0-3"}},
		Bridges: []fakehost.HostBridge{{Domain: 0, Bus: 0, NUMA: -1, Devices: []fakehost.Device{
			{Vendor: 0x8086, Device: 0x0c00, Class: 0x060000}, port,
		}}},
	}
}

// The PCI core reports a multi-function device's link once, on function 0, for the link
// all its functions share: a log's link line on 0000:01:00.0 is the GPU's when the log
// shows a GPU's function in that slot, here only its audio function (the enumeration of
// .0, .2 and .3 is cut from gpu-wrlinux-dmesg.log, as from a paste). So it is on the
// sample host, whose 0000:01:00.1 is another device ([10de:22e8]): the log is another
// machine's, but the GPU's link is reported. And on the log's own machine, whose audio
// function is gone from sysfs: that function, of the GPU's slot, does not make the log
// another machine's.
func TestLinkOfAGPUsSlot(t *testing.T) {
	log := readLog(t, filepath.Join("testdata", "gpu-wrlinux-dmesg.log"))
	const want = "kernel: pci 0000:01:00.0: 32.000 Gb/s available PCIe bandwidth, limited by 2.5 GT/s PCIe x16 link at 0000:00:01.0 (capable of 126.016 Gb/s with 8.0 GT/s PCIe x16 link)"
	sampleHost, _ := samplehost.Open()
	for _, c := range []struct {
		name string
		h    *host.Host
		own  bool
	}{
		{"another machine's log", sampleHost, false},
		{"the host's log, its audio function removed", machine(t, optiplex9020()), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			inv, err := inventory.Build(c.h, nil)
			if err != nil {
				t.Fatal(err)
			}
			e, err := NewEnv(c.h, inv, strings.NewReader(log), nil)
			if err != nil {
				t.Fatal(err)
			}
			if e.logHost != c.own {
				t.Errorf("the log taken as the host's: %v, want %v", e.logHost, c.own)
			}
			r, err := Run(e, []string{"link-degraded"})
			if err != nil {
				t.Fatal(err)
			}
			f := find(r, "link-degraded", Info)
			if f == nil || !slices.Contains(f.Evidence, want) {
				t.Errorf("the GPU's link line is not reported: %+v", r.Findings)
			}
		})
	}
}

// A function the host lacks counts for neither machine only in the slot of a host's GPU,
// and only with the GPU's vendor: another vendor's function there, an NVIDIA function in
// a slot where the host has no device, or a function in the slot of a root port, is
// another machine's.
func TestLogFromHostGPUSlot(t *testing.T) {
	inv, err := inventory.Build(machine(t, optiplex9020()), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		log  string
		host bool
	}{
		{readLog(t, filepath.Join("testdata", "gpu-wrlinux-dmesg.log")), true},
		{"pci 0000:01:00.1: [8086:1533] type 00 class 0x020000\n", false},
		{"pci 0000:02:00.1: [10de:1aeb] type 00 class 0x040300\n", false},
		{"pci 0000:00:01.1: [8086:0c05] type 01 class 0x060400\n", false}, // the root port's slot, no GPU's
	} {
		facts, err := CollectLog(strings.NewReader(c.log))
		if err != nil {
			t.Fatal(err)
		}
		if got := logFromHost(facts, inv.Tree); got != c.host {
			t.Errorf("%q: the host's %v, want %v", c.log, got, c.host)
		}
	}
}

// Real logs of failures that are not the checks': each stays silent.
func TestRealLogsSilent(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ log, id string }{
		// An NVMe drive's faults at 0000:01:00.0, a GPU's address on the sample host.
		{"pop-853.log", "iommu-page-faults"},
		{"clearlinux-distribution-392.log", "iommu-page-faults"},
		// Xid 45 and 43/31: an application's, not the GPU's.
		{"open-gpu-kernel-modules-1150.log", "gpu-lost"},
		{"nccl-606.log", "gpu-lost"},
		{"pop-853.log", "aer-errors"},
	} {
		r := run(t, h, readFixture(t, c.log))
		if has(r, c.id) {
			t.Errorf("%s: %s fired: %+v", c.log, c.id, r.Findings)
		}
	}
	// The same Xid 43 and 31 lines beside an Xid 94: only the 94 is reported.
	r := run(t, h, readFixture(t, "akash-network-support-244.log"))
	for _, f := range r.Findings {
		if f.ID == "gpu-lost" && (strings.Contains(f.Title, "0000:00:05.0") || strings.Contains(f.Title, "0000:00:07.0")) {
			t.Errorf("an application's Xid reported: %s", f.Title)
		}
	}
}

// bazzite-2668.log's API mismatch as journalctl -o cat prints it, without stamps or
// indentation: a record a line, joined again so that the module's version is not lost.
func TestMismatchWithoutStamps(t *testing.T) {
	var lines []string
	for _, l := range strings.Split(readFixture(t, "bazzite-2668.log"), "\n") {
		if _, rest, ok := strings.Cut(l, "] "); ok {
			l = rest
		}
		lines = append(lines, strings.TrimSpace(l))
	}
	h, _ := samplehost.Open()
	r := run(t, h, strings.Join(lines, "\n"))
	f := find(r, "driver-mismatch", Error)
	if f == nil {
		t.Fatalf("driver-mismatch did not fire: %+v", r.Findings)
	}
	ev := strings.Join(f.Evidence, "\n")
	for _, want := range []string{"this kernel module has the version 570.144", "the log names the module 570.144, but 580.95.05 is loaded now"} {
		if !strings.Contains(ev, want) {
			t.Errorf("evidence lacks %q:\n%s", want, ev)
		}
	}
}

// A Thunderbolt eGPU's log on the sample host: the hot-plug bridge's window is part of
// the evidence, the remedy names hpmmioprefsize, lines are not repeated, and the title
// does not count the sample host's GPUs, which are not the log's.
func TestBARsOfAnotherMachine(t *testing.T) {
	h, _ := samplehost.Open()
	r := run(t, h, readFixture(t, "mbp-2016-linux-60.log"))
	f := find(r, "bar-unassigned", Error)
	if f == nil {
		t.Fatalf("bar-unassigned did not fire: %+v", r.Findings)
	}
	if strings.Contains(f.Title, "of 8 GPUs") {
		t.Errorf("title counts the sample host's GPUs: %s", f.Title)
	}
	if !strings.Contains(f.Remedy, "hpmmioprefsize=") {
		t.Errorf("remedy lacks hpmmioprefsize: %s", f.Remedy)
	}
	n := 0
	for _, l := range f.Evidence {
		if l == "kernel: pcieport 0000:7b:02.0: BAR 15: no space for [mem size 0x00200000 64bit pref]" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the window's line appears %d times, want once:\n%s", n, strings.Join(f.Evidence, "\n"))
	}
}

// `doctor --only firmware` on the sample host: the group runs every firmware check, each
// a reasoned note of its item, and none warns, since the sample host is set as a GPU
// server should be.
func TestFirmwareSample(t *testing.T) {
	h, _ := samplehost.Open()
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEnv(h, inv, nil, fmt.Errorf("no log"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(e, []string{"firmware"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"firmware-platform": {"platform: ASUSTeK COMPUTER INC. ESC8000A-E13", "firmware American Megatrends Inc. 0402 of 06/12/2025"},
		"firmware-numa":     {"NUMA: 2 nodes on 2 sockets, NPS1", "One node per socket"},
		"firmware-iommu":    {"IOMMU: on", "the GPUs: 8 in identity groups"},
		"firmware-above-4g": {"Above 4G decoding: on", "0000:01:00.0 BAR1 (128 GiB 64-bit prefetchable) at 0x20000000000",
			"the largest 64-bit window above the GPUs: 128 GiB + 32 MiB at 0x20000000000, of bridge 0000:00:01.1"},
		"firmware-rebar": {"Resizable BAR: on", "8 GPUs (0000:01:00.0 … 0000:f1:00.0): BAR1: 128 GiB, the largest it offers 128 GiB"},
		"firmware-sriov": {"SR-IOV: the GPUs offer no virtual functions"},
		"firmware-acs":   {"no switch between the GPUs and their root ports"},
		"firmware-pcie": {"8 GPUs (0000:01:00.0 … 0000:f1:00.0): max payload 256 of 256 bytes, max read request 512, relaxed ordering on, 10-bit tags on, ASPM disabled",
			"the kernel's ASPM policy: [default]"},
	}
	if len(r.Ran) != len(want) {
		t.Errorf("ran %v, want the %d firmware checks", r.Ran, len(want))
	}
	for id, lines := range want {
		f := find(r, id, Info)
		if f == nil {
			t.Errorf("%s: no note in %+v", id, r.Findings)
			continue
		}
		if f.Remedy == "" {
			t.Errorf("%s: no reason given", id)
		}
		text := f.Title + "\n" + strings.Join(f.Evidence, "\n") + "\n" + f.Remedy
		for _, l := range lines {
			if !strings.Contains(text, l) {
				t.Errorf("%s lacks %q:\n%s", id, l, text)
			}
		}
	}
	if r.Worst() != Info {
		t.Errorf("worst %v, want info only", r.Worst())
	}
}

// A GPU whose firmware left BAR1 at 256 MiB of the 128 GiB it offers is a warning; read
// without root, the config-space items are marked partial.
func TestFirmwareRebarOff(t *testing.T) {
	dir := t.TempDir()
	if err := samplehost.Unpack(dir); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "sys/devices/pci0000:80/0000:80:01.1/0000:81:00.0/config")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	off := pci.Config(cfg).ExtCapability(0x15)
	cfg[off+9] = 8 // BAR size 2^(8+20): 256 MiB
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, h, "")
	f := find(r, "firmware-rebar", Warning)
	if f == nil || f.Title != "Resizable BAR is off for 1 GPU: a BAR of 256 MiB or less where the GPU offers more" ||
		!slices.Contains(f.Evidence, "0000:81:00.0: BAR1: 256 MiB, the largest it offers 128 GiB") {
		t.Errorf("no warning for the small BAR1: %+v", r.Findings)
	}
	// 64 bytes, as a reader without root gets them.
	if err := os.WriteFile(cfgPath, cfg[:64], 0o644); err != nil {
		t.Fatal(err)
	}
	h, _ = host.Open(dir)
	r = run(t, h, "")
	for _, id := range []string{"firmware-rebar", "firmware-pcie"} {
		if !strings.Contains(r.Partial[id], "only root can read") {
			t.Errorf("%s: partial %v", id, r.Partial)
		}
	}
	if _, ok := r.Partial["firmware-numa"]; ok {
		t.Errorf("firmware-numa marked partial: %v", r.Partial)
	}
}

// The faults the kernel did not print ("callbacks suppressed") are in the count.
func TestSuppressedFaults(t *testing.T) {
	log := readFixture(t, "cuda-samples-48.log") + "\n[   10.919601] amd_iommu_report_page_fault: 96 callbacks suppressed\n"
	r := run(t, machine(t, fakehost.Q35Guest8()), log)
	f := find(r, "iommu-page-faults", Error)
	if f == nil || !strings.Contains(strings.Join(f.Evidence, "\n"), "96 of them not printed") {
		t.Errorf("the suppressed faults are not counted: %+v", f)
	}
}

// Every real log of internal/kmsg/testdata, read on the sample host: each log check
// fires on the logs that show what it looks for and stays silent on every other.
func TestRealLogsMatrix(t *testing.T) {
	fires := map[string][]string{
		"gpu-lost": {"akash-network-support-244.log", "gpu-burn-1.log", "gpu-operator-1146.log", "nvidia-forum-364958.log", "nvidia-forum-371272.log",
			"nvsentinel-155.log", "open-gpu-kernel-modules-1200.log", "open-gpu-kernel-modules-446.log", "pop-3363.log", "returnn-1500.log", "vllm-40652.log"},
		"gpu-init-failed": {"bumblebee-111.log", "bumblebee-134.log", "gpu-operator-1146.log", "gpu-operator-649.log", "gpu-passthrough-tutorial-39.log",
			"kata-containers-11708.log", "nvidia-exec-45.log", "nvsentinel-155.log", "open-gpu-kernel-modules-789.log", "proxmox-forum-179366.log"},
		"aer-errors":            {"gpu-burn-1.log", "pop-3363-aer.log", "returnn-1486.log", "returnn-1500.log"},
		"iommu-page-faults":     {"cuda-samples-48.log"},
		"vfio-reset":            {"single-gpu-passthrough-103.log", "ultimate-macos-kvm-145.log"},
		"vfio-bar-reserve":      {"talos-14356.log"},
		"vfio-group-not-viable": {"vga-passthrough-15.log"},
		"boot-cmdline": {"amdsev-181.log", "amdsev-253.log", "amdsev-271.log", "i915-sriov-dkms-106.log", "i915ovmfpkg-22.log",
			"intel-gpu-i915-backports-165.log", "kata-containers-10622.log"},
	}
	var ids []string
	for id := range fires {
		ids = append(ids, id)
	}
	logs, err := filepath.Glob(filepath.Join("..", "kmsg", "testdata", "*.log"))
	if err != nil || len(logs) < 60 {
		t.Fatalf("%d logs, %v", len(logs), err)
	}
	h, _ := samplehost.Open()
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range logs {
		name := filepath.Base(l)
		e, err := NewEnv(h, inv, strings.NewReader(readFixture(t, name)), nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Run(e, ids)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			got := slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.ID == id })
			if want := slices.Contains(fires[id], name); got != want {
				t.Errorf("%s: %s fired %v, want %v", name, id, got, want)
			}
		}
	}
}

// NPS2 on the sample host, and a GPU of socket 0 on the socket's second node: the
// firmware report warns that GPUs of one socket are on different nodes.
func TestFirmwareNPSSplitsGPUs(t *testing.T) {
	h := sample(t, map[string]string{
		"sys/devices/system/node/node0/cpulist":                      "0-15,64-79\n",
		"sys/devices/system/node/node2/cpulist":                      "16-31,80-95\n",
		"sys/devices/system/node/node1/cpulist":                      "32-47,96-111\n",
		"sys/devices/system/node/node3/cpulist":                      "48-63,112-127\n",
		"sys/devices/pci0000:10/0000:10:01.1/0000:11:00.0/numa_node": "2\n",
	})
	r := run(t, h, "")
	f := find(r, "firmware-numa", Warning)
	if f == nil || !strings.HasPrefix(f.Title, "NPS2 puts GPUs of one socket on different NUMA nodes") ||
		!strings.Contains(strings.Join(f.Evidence, "\n"), "socket 0: node 0: 0000:01:00.0 0000:61:00.0 0000:71:00.0; node 2: 0000:11:00.0") {
		t.Errorf("no warning of the split socket: %+v", r.Findings)
	}
}
