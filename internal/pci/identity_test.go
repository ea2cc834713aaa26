package pci_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/pci"
)

// identityFiles are the attributes a device's ids, class and revision are read from.
var identityFiles = []string{"vendor", "device", "class", "subsystem_vendor", "subsystem_device", "revision"}

// A device whose identity attributes are missing is read from uevent, modalias or
// config, the first that has each; the server's files are the kernel's formats
// (pci_uevent, modalias_show and the config header), so a device read that way is the
// device read from its attributes, field for field.
func TestScanIdentityFallbacks(t *testing.T) {
	const gpu = "0000:03:00.0"    // 10de:2bb1, sub 10de:204b, class 030000, rev a1
	const bridge = "0000:02:00.0" // a switch port: a type 1 header, sub 1000:100b
	want := render(scanDir(t, writeMachine(t, server())), "ROOT")

	// same: every device reads as from the complete tree.
	same := func(t *testing.T, tree *pci.Tree, root string) {
		t.Helper()
		if got := render(tree, root); got != want {
			t.Errorf("scan differs from the complete tree's:\n%s\nwant:\n%s", got, want)
		}
	}
	tests := []struct {
		name   string
		dev    string
		remove []string          // files removed from the device's directory
		write  map[string]string // files written there
		check  func(t *testing.T, tree *pci.Tree, root string)
	}{
		{
			name:   "every identity file missing: uevent, then config for the revision",
			dev:    gpu,
			remove: identityFiles,
			check:  same,
		},
		{
			name:   "vendor and device missing: from uevent, class from its file",
			dev:    gpu,
			remove: []string{"vendor", "device"},
			write:  map[string]string{"uevent": "DRIVER=nvidia\nPCI_CLASS=30000\nPCI_ID=10DE:2BB1\nPCI_SLOT_NAME=0000:03:00.0\n"},
			check:  same,
		},
		{
			name:   "uevent missing too: modalias",
			dev:    gpu,
			remove: append([]string{"uevent"}, identityFiles...),
			check:  same,
		},
		{
			name:   "uevent and modalias missing: config space",
			dev:    gpu,
			remove: append([]string{"uevent", "modalias"}, identityFiles...),
			check:  same,
		},
		{
			name:   "a modalias with the programming interface in lower case, as older kernels print it",
			dev:    gpu,
			remove: append([]string{"uevent", "config"}, identityFiles...),
			write:  map[string]string{"modalias": "pci:v000010DEd00002BB1sv000010DEsd0000204Bbc03sc00i00\n"},
			check: func(t *testing.T, tree *pci.Tree, root string) {
				d := lookup(t, tree, gpu)
				if d.ID() != "10de:2bb1" || d.SubsystemID() != "10de:204b" || d.Class != 0x030000 || d.Revision != 0 {
					t.Errorf("read %s sub %s class %06x rev %02x", d.ID(), d.SubsystemID(), d.Class, d.Revision)
				}
			},
		},
		{
			name:   "a uevent of another device is not believed: modalias",
			dev:    gpu,
			remove: identityFiles,
			write:  map[string]string{"uevent": "PCI_CLASS=20000\nPCI_ID=15B3:1021\nPCI_SUBSYS_ID=15B3:0023\nPCI_SLOT_NAME=0000:81:00.0\n"},
			check:  same,
		},
		{
			// The order of the files: uevent first, though modalias says otherwise.
			name:   "uevent before modalias",
			dev:    gpu,
			remove: identityFiles,
			write:  map[string]string{"modalias": "pci:v000010DEd00002BB5sv000010DEsd0000204Bbc03sc02i00\n"},
			check:  same,
		},
		{
			name:   "a uevent with garbage ids: modalias",
			dev:    gpu,
			remove: identityFiles,
			write:  map[string]string{"uevent": "PCI_CLASS=30000\nPCI_ID=10DE:2BB1Z\nPCI_SLOT_NAME=0000:03:00.0\n"},
			check:  same,
		},
		{
			// Config space's type 1 header has bus numbers where an endpoint has its
			// subsystem ids: those are not read from it.
			name:   "a bridge from config space alone",
			dev:    bridge,
			remove: append([]string{"uevent", "modalias"}, identityFiles...),
			check: func(t *testing.T, tree *pci.Tree, root string) {
				d := lookup(t, tree, bridge)
				if d.ID() != "1000:c030" || d.SubsystemID() != "0000:0000" || d.Class != 0x060400 || d.Revision != 0xb0 {
					t.Errorf("read %s sub %s class %06x rev %02x; want 1000:c030 sub 0000:0000 class 060400 rev b0",
						d.ID(), d.SubsystemID(), d.Class, d.Revision)
				}
				if len(d.Parents) != 2 || !d.IsBridge() {
					t.Errorf("parents %v, bridge %v", d.Parents, d.IsBridge())
				}
			},
		},
		{
			name:   "no file of the ids at all",
			dev:    gpu,
			remove: append([]string{"uevent", "modalias", "config"}, identityFiles...),
			check: func(t *testing.T, tree *pci.Tree, root string) {
				checkLeftOut(t, tree, gpu, "no vendor, device or class file", "uevent is missing", "modalias is missing", "config is missing")
				if n := countWarnings(tree, gpu); n != 1 {
					t.Errorf("%d warnings name %s, want 1:\n%s", n, gpu, strings.Join(tree.Warnings, "\n"))
				}
			},
		},
		{
			// What an SR-IOV virtual function's header holds, and a read from a
			// function that is gone.
			name:   "config space reads vendor ffff",
			dev:    gpu,
			remove: append([]string{"uevent", "modalias"}, identityFiles...),
			write:  map[string]string{"config": "\xff\xff\xff\xff" + strings.Repeat("\x00", 60)},
			check: func(t *testing.T, tree *pci.Tree, root string) {
				checkLeftOut(t, tree, gpu, "config: vendor reads ffff")
			},
		},
		{
			name:   "config space too short, modalias garbage",
			dev:    gpu,
			remove: append([]string{"uevent"}, identityFiles...),
			write:  map[string]string{"config": "\xde\x10\xb1\x2b", "modalias": "pci:v000010DEd2BB1\n"},
			check: func(t *testing.T, tree *pci.Tree, root string) {
				checkLeftOut(t, tree, gpu, "modalias:", "not a PCI modalias", "config: 4 bytes, too few")
			},
		},
		{
			// A file that is there but unreadable is an error, as it always was: the
			// other files are for a tree that lacks the attribute, not one that lies.
			name:   "vendor missing, class garbage",
			dev:    gpu,
			remove: []string{"vendor"},
			write:  map[string]string{"class": "0x03zz00\n"},
			check: func(t *testing.T, tree *pci.Tree, root string) {
				checkLeftOut(t, tree, gpu, "class", "0x03zz00")
			},
		},
		{
			name:   "vendor missing, revision garbage: the revision is warned about, the rest read",
			dev:    gpu,
			remove: []string{"vendor"},
			write:  map[string]string{"revision": "0xa1a1\n"},
			check: func(t *testing.T, tree *pci.Tree, root string) {
				d := lookup(t, tree, gpu)
				if d.ID() != "10de:2bb1" || d.Revision != 0 {
					t.Errorf("read %s rev %02x; want 10de:2bb1 rev 00", d.ID(), d.Revision)
				}
				if !hasWarning(tree, gpu, "revision", "0xa1a1") {
					t.Errorf("no warning naming %s and revision:\n%s", gpu, strings.Join(tree.Warnings, "\n"))
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeMachine(t, server())
			dev := deviceDir(t, root, tt.dev)
			for _, f := range tt.remove {
				remove(t, dev+"/"+f)
			}
			for f, body := range tt.write {
				writeFile(t, dev+"/"+f, body)
			}
			tt.check(t, scanDir(t, root), root)
		})
	}
}

func countWarnings(tree *pci.Tree, addr string) int {
	n := 0
	for _, w := range tree.Warnings {
		if strings.Contains(w, addr) {
			n++
		}
	}
	return n
}

// power9GPUs are the six GPU functions of an IBM POWER9 AC922 (PowerNV 8335-GTW) as
// hwloc keeps them in its test suite (open-mpi/hwloc, tests/hwloc/linux/
// nvidiagpunumanodes.tar.bz2): in /sys/bus/pci/devices, each a plain directory (not the
// kernel's link) holding only class and local_cpus, with these values.
var power9GPUs = []struct{ addr, localCPUs, cpus string }{
	{"0004:05:00.0", "0000,00000000,00000000,00000000,00000000,0000ffff", "0-15"},
	{"0004:06:00.0", "0000,00000000,00000000,00000000,00000000,0000ffff", "0-15"},
	{"0006:00:00.0", "0000,00000000,00000000,00000000,00000000,0000ffff", "0-15"},
	{"0007:00:00.0", "0000,00000000,000000ff,ff000000,00000000,00000000", "88-103"},
	{"0035:04:00.0", "0000,00000000,000000ff,ff000000,00000000,00000000", "88-103"},
	{"0035:05:00.0", "0000,00000000,000000ff,ff000000,00000000,00000000", "88-103"},
}

// writePOWER9 lays out the capture's PCI devices, with extra files in each.
func writePOWER9(t *testing.T, extra func(addr string) map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for _, g := range power9GPUs {
		dir := filepath.Join(root, "sys/bus/pci/devices", g.addr)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir+"/class", "0x030000\n")
		writeFile(t, dir+"/local_cpus", g.localCPUs+"\n")
		for f, body := range extra(g.addr) {
			writeFile(t, dir+"/"+f, body)
		}
	}
	return root
}

func TestScanPOWER9Capture(t *testing.T) {
	t.Run("as captured: no ids anywhere, one warning per device", func(t *testing.T) {
		tree := scanDir(t, writePOWER9(t, func(string) map[string]string { return nil }))
		if len(tree.Devices) != 0 {
			t.Errorf("devices %v, want none: nothing says what they are", addrsOf(tree.Devices))
		}
		if len(tree.Warnings) != len(power9GPUs) {
			t.Errorf("%d warnings, want one per device:\n%s", len(tree.Warnings), strings.Join(tree.Warnings, "\n"))
		}
		for _, g := range power9GPUs {
			if !hasWarning(tree, g.addr+":", "no vendor or device file", "uevent is missing", "modalias is missing", "config is missing", "device skipped") {
				t.Errorf("no warning naming %s and what is missing:\n%s", g.addr, strings.Join(tree.Warnings, "\n"))
			}
		}
	})

	// The capture keeps no uevent; this is what pci_uevent writes for a Tesla V100 SXM2
	// 16GB (10de:1db1, as the 16 GiB of GPU memory in its numa_status suggests; the
	// subsystem id is illustrative), with the capture's class.
	t.Run("with the kernel's uevent", func(t *testing.T) {
		root := writePOWER9(t, func(addr string) map[string]string {
			return map[string]string{"uevent": "DRIVER=nvidia\nPCI_CLASS=30000\nPCI_ID=10DE:1DB1\nPCI_SUBSYS_ID=10DE:1212\n" +
				"PCI_SLOT_NAME=" + addr + "\nMODALIAS=pci:v000010DEd00001DB1sv000010DEsd00001212bc03sc00i00\n"}
		})
		tree := scanDir(t, root)
		if len(tree.Devices) != len(power9GPUs) {
			t.Fatalf("devices %v, want the %d GPUs:\n%s", addrsOf(tree.Devices), len(power9GPUs), strings.Join(tree.Warnings, "\n"))
		}
		for _, g := range power9GPUs {
			d := lookup(t, tree, g.addr)
			if d.ID() != "10de:1db1" || d.SubsystemID() != "10de:1212" || d.Class != 0x030000 || !d.IsDisplay() {
				t.Errorf("%s read as %s sub %s class %06x", g.addr, d.ID(), d.SubsystemID(), d.Class)
			}
			// The CPU affinity hwloc reads from the same masks.
			if d.LocalCPUs.String() != g.cpus {
				t.Errorf("%s: LocalCPUs = %q, want %s from local_cpus", g.addr, d.LocalCPUs, g.cpus)
			}
		}
		// Without the kernel's links there is no path to the host bridge; each device
		// is put under its own bus, as hwloc does with this tree. That is the only
		// thing said of them.
		for _, w := range tree.Warnings {
			if !strings.Contains(w, "placed directly under host bridge") {
				t.Errorf("unexpected warning: %s", w)
			}
		}
	})
}
