package drivers

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

const release = "6.8.12-4-pve"

// modulesDep is shaped like a Proxmox kernel's: paths relative to the release's
// directory, compressed modules, a DKMS module under updates/, a file spelled with '-'.
const modulesDep = `kernel/drivers/vfio/pci/vfio-pci.ko: kernel/drivers/vfio/pci/vfio-pci-core.ko kernel/drivers/vfio/vfio.ko
kernel/drivers/gpu/drm/nouveau/nouveau.ko.zst: kernel/drivers/gpu/drm/drm_kms_helper.ko
kernel/drivers/net/ethernet/intel/e1000e/e1000e.ko.zst:
kernel/drivers/misc/foo-bar.ko.xz:
updates/dkms/nvidia.ko:
`

const modulesBuiltin = `kernel/drivers/ata/ahci.ko
kernel/drivers/pci/pci-stub.ko
`

// machine is a host as the kernel shows it: the drivers registered now with their
// module links (fakehost lays them out as /sys/bus/pci/drivers/NAME/module ->
// ../../../../module/MODULE), the release, and its module lists.
func machine(files map[string]string) fakehost.Machine {
	return fakehost.Machine{
		Nodes:   []fakehost.Node{{ID: 0, CPUs: "0-3"}},
		Drivers: []string{"vfio-pci", "nvidia", "snd_hda_intel", "xhci_hcd", "mlx5_core", "pcieport"},
		Files:   files,
	}
}

func standard() map[string]string {
	return map[string]string{
		"/proc/sys/kernel/osrelease":                   release + "\n",
		"/lib/modules/" + release + "/modules.dep":     modulesDep,
		"/lib/modules/" + release + "/modules.builtin": modulesBuiltin,
	}
}

func openDir(t testing.TB, files map[string]string) *host.Host {
	t.Helper()
	h, err := machine(files).Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func openArchive(t testing.TB, files map[string]string) *host.Host {
	t.Helper()
	tree, err := machine(files).Build()
	if err != nil {
		t.Fatal(err)
	}
	b, err := tree.Archive()
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.OpenArchive("host.tar.gz", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		// want are the parts of the error, none for nil.
		want []string
	}{
		{"vfio-pci", nil},  // registered
		{"mlx5_core", nil}, // registered, not known
		{"nouveau", nil},   // known, not registered
		{"amdgpu", nil},    // known, in no list
		{"e1000e", nil},    // a module of the kernel (.ko.zst)
		{"foo_bar", nil},   // module file foo-bar.ko.xz
		{"foo-bar", nil},   //
		{"ahci", nil},      // built in
		{"vfio_pci", []string{`driver "vfio_pci" is not a driver name: did you mean vfio-pci?`, "the module is vfio_pci, its driver registers as vfio-pci"}},
		{"VFIO-PCI", []string{"did you mean vfio-pci?", "case-sensitive"}},
		{"xhci_pci", []string{"did you mean xhci_hcd?", "the module is xhci_pci"}},
		{"xhci-hcd", []string{"did you mean xhci_hcd?"}},
		{"snd-hda-intel", []string{"did you mean snd_hda_intel?", "registers as snd_hda_intel"}},
		{"i2c-nvidia-gpu", []string{"did you mean nvidia-gpu?", "the module is i2c_nvidia_gpu"}},
		{"nvidia_gpu", []string{"did you mean nvidia-gpu?"}},
		{"mlx5-core", []string{"did you mean mlx5_core?"}},
		{"nvidai", []string{`no driver "nvidai" on this host (not in /sys/bus/pci/drivers, no module of that name for kernel 6.8.12-4-pve under /lib/modules): did you mean nvidia?`}},
		{"vfio-pic", []string{"did you mean vfio-pci?"}},
		{"zzqqxx", []string{`no driver "zzqqxx"`, "install its module"}},
		{"", []string{"empty"}},
		{"a/b", []string{`"a/b" is not a driver name`, "'/'"}},
		{"../../x", []string{"'/'"}},
		{".", []string{`"." is not a driver name`}},
		{"..", []string{`".." is not a driver name`}},
		{"vfio-pci\n", []string{`"vfio-pci\n" is not a driver name`, "white space"}},
		{"vfio pci", []string{"white space"}},
		{"nv\x00idia", []string{"control character"}},
		{"nv\x7fidia", []string{"control character"}},
		{"\xff", []string{"not UTF-8"}},
		{strings.Repeat("a", 65), []string{"longer than 64 bytes"}},
	}
	hosts := map[string]*host.Host{"dir": openDir(t, standard()), "archive": openArchive(t, standard())}
	for kind, h := range hosts {
		for _, tt := range tests {
			err := Check(h, tt.name)
			if len(tt.want) == 0 {
				if err != nil {
					t.Errorf("%s: Check(%q) = %v, want nil", kind, tt.name, err)
				}
				continue
			}
			if err == nil {
				t.Errorf("%s: Check(%q) = nil, want an error with %q", kind, tt.name, tt.want)
				continue
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: Check(%q) = %q, want it to hold %q", kind, tt.name, err, w)
				}
			}
		}
	}
}

// A length of exactly MaxName is a name; the cut is at the limit, not before it.
func TestMaxName(t *testing.T) {
	name := strings.Repeat("a", MaxName)
	if err := Valid(name); err != nil {
		t.Errorf("Valid(%d bytes) = %v", MaxName, err)
	}
	if err := Valid(name + "a"); err == nil {
		t.Errorf("Valid(%d bytes) = nil", MaxName+1)
	}
}

// Without the release or the module lists, what the host registered and the known
// drivers still pass, a module of the kernel cannot, and the error says why.
func TestCheckWithoutModules(t *testing.T) {
	tests := []struct {
		desc  string
		files map[string]string
		name  string
		want  string // "" for nil
	}{
		{"no release", nil, "nouveau", ""},
		{"no release", nil, "vfio-pci", ""},
		{"no release", nil, "e1000e", `no driver "e1000e" on this host (not in /sys/bus/pci/drivers, and no /proc/sys/kernel/osrelease to say which kernel's modules to search)`},
		{"no release", nil, "vfio_pci", "did you mean vfio-pci?"},
		{"release climbs out", map[string]string{"/proc/sys/kernel/osrelease": "../../etc\n"}, "e1000e", `holds "../../etc", not a kernel release`},
		{"no lists", map[string]string{"/proc/sys/kernel/osrelease": release + "\n"}, "e1000e", "(no /lib/modules/6.8.12-4-pve/modules.dep)"},
		{"only builtin", map[string]string{"/proc/sys/kernel/osrelease": release + "\n", "/lib/modules/" + release + "/modules.builtin": modulesBuiltin}, "ahci", ""},
		{"only builtin", map[string]string{"/proc/sys/kernel/osrelease": release + "\n", "/lib/modules/" + release + "/modules.builtin": modulesBuiltin}, "e1000e", "no module of that name for kernel 6.8.12-4-pve under /lib/modules): install its module"},
	}
	for _, tt := range tests {
		err := Check(openDir(t, tt.files), tt.name)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: Check(%q) = %v, want nil", tt.desc, tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: Check(%q) = %v, want %q", tt.desc, tt.name, err, tt.want)
		}
	}
}

// A module list that is not a regular file is not read: a FIFO would block, a device
// would never end.
func TestModuleListNotRegular(t *testing.T) {
	h := openDir(t, map[string]string{"/proc/sys/kernel/osrelease": release + "\n"})
	dir := filepath.Join(h.Root(), "lib/modules", release)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "modules.dep"), 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	err := Check(h, "e1000e")
	if err == nil || !strings.Contains(err.Error(), "modules.dep is not a regular file") {
		t.Errorf("Check with a FIFO for modules.dep = %v", err)
	}
}

func TestLoadable(t *testing.T) {
	h := openDir(t, standard())
	tests := []struct {
		driver, module string
		ok             bool
	}{
		{"vfio-pci", "vfio_pci", true},
		{"nouveau", "nouveau", true},
		{"ahci", "ahci", true},
		{"xhci_hcd", "xhci_pci", false}, // the list holds no xhci-pci.ko
		{"amdgpu", "amdgpu", false},
		{"../nvidia", "../nvidia", false},
	}
	for _, tt := range tests {
		module, ok := Loadable(h, tt.driver)
		if module != tt.module || ok != tt.ok {
			t.Errorf("Loadable(%q) = %q, %v; want %q, %v", tt.driver, module, ok, tt.module, tt.ok)
		}
	}
}

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		d    int
	}{
		{"nvidia", "nvidia", 0}, {"nvidai", "nvidia", 1}, {"nvida", "nvidia", 1},
		{"vfio", "vfio-pci", 4}, {"", "ab", 2}, {"amdgup", "amdgpu", 1},
	}
	for _, tt := range tests {
		if d := distance(tt.a, tt.b); d != tt.d {
			t.Errorf("distance(%q, %q) = %d, want %d", tt.a, tt.b, d, tt.d)
		}
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{"vfio-pci", "vfio_pci", "nvidai", "", "..", "a/b", "xhci_pci", "VFIO-PCI", "nv\x00", strings.Repeat("x", 70)} {
		f.Add(s)
	}
	h := openDir(f, standard())
	f.Fuzz(func(t *testing.T, name string) {
		err := Check(h, name)
		if err == nil && Valid(name) != nil {
			t.Fatalf("Check(%q) = nil for a name Valid refuses", name)
		}
		if err == nil && strings.ContainsAny(name, "/ \n\t") {
			t.Fatalf("Check(%q) = nil", name)
		}
	})
}

// docs/split.toml lists the drivers accepted without looking at the host.
func TestKnownDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/split.toml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(strings.ReplaceAll(string(doc), "#", "")), " ")
	if want := strings.Join(Known(), ", "); !strings.Contains(text, want) {
		t.Errorf("docs/split.toml does not list the known drivers %q", want)
	}
}
