// Package pveperl runs Proxmox VE's own Perl modules on what gpusplit wrote, so that a
// test can check that Proxmox reads it back as meant: pve-guest-common's
// PVE::Mapping::PCI parses and writes pci.cfg and checks a mapping against sysfs
// (assert_valid), and qemu-server's PVE::QemuServer::PCI parses a hostpciN value
// (parse_hostpci), on a fixture host's sysfs.
//
// The modules are Proxmox's (AGPL-3+) and are not part of this repository: they are
// taken where a Proxmox VE node installs them (/usr/share/perl5), or from the source
// trees GPUSPLIT_PVE_PERL names, a list of directories separated by ':' that each hold
// PVE/… (the src/ directories of pve-common, pve-guest-common and qemu-server). Where
// neither has them, the tests that need them are skipped, saying what they need.
// readback.pl is the script the tests run, and stub/ stands in for what needs a running
// cluster or NVIDIA's library; docs/testing.md says how to run them.
package pveperl

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Env is the environment GPUSPLIT_PVE_PERL is read from.
const Env = "GPUSPLIT_PVE_PERL"

// installed is where a Proxmox VE node has the modules.
const installed = "/usr/share/perl5"

// needed are the modules the script loads, by file.
var needed = []string{"PVE/SectionConfig.pm", "PVE/JSONSchema.pm", "PVE/SysFSTools.pm", "PVE/Mapping/PCI.pm", "PVE/QemuServer/PCI.pm"}

// Host is a fixture host for Proxmox's modules: Root holds its /sys, Etc stands for
// /etc/pve, Node is the node's name.
type Host struct {
	Root, Etc, Node string
	libs            []string
}

// Open finds Proxmox's modules, skipping the test where there are none.
func Open(t testing.TB, root, etc, node string) *Host {
	t.Helper()
	return &Host{Root: root, Etc: etc, Node: node, libs: Need(t)}
}

// Need returns where Proxmox's modules are, skipping the test where they are not: a
// test calls it first, before the work whose result they read.
func Need(t testing.TB) []string {
	t.Helper()
	libs := filepath.SplitList(os.Getenv(Env))
	if len(libs) == 0 {
		libs = []string{installed}
	}
	var missing []string
	for _, m := range needed {
		found := false
		for _, l := range libs {
			if _, err := os.Stat(filepath.Join(l, m)); err == nil {
				found = true
			}
		}
		if !found {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		t.Skipf("Proxmox VE's Perl modules are not here (%s not under %s): run on a Proxmox VE node, or set %s to the src/ directories of pve-common, pve-guest-common and qemu-server (docs/testing.md)", strings.Join(missing, ", "), strings.Join(libs, ":"), Env)
	}
	if _, err := exec.LookPath("perl"); err != nil {
		t.Fatalf("perl is not installed, and Proxmox's modules are: %v", err)
	}
	return libs
}

// dir is this package's directory, where readback.pl and stub/ are.
func dir(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot tell where package pveperl is")
	}
	return filepath.Dir(file)
}

// run runs readback.pl with args and decodes what it prints into out.
func (h *Host) run(t testing.TB, out any, args ...string) {
	t.Helper()
	d := dir(t)
	cmdArgs := []string{"-I" + filepath.Join(d, "stub")}
	for _, l := range h.libs {
		cmdArgs = append(cmdArgs, "-I"+l)
	}
	cmdArgs = append(cmdArgs, filepath.Join(d, "readback.pl"))
	cmd := exec.Command("perl", append(cmdArgs, args...)...)
	cmd.Env = append(os.Environ(), "PVE_ROOT="+h.Root, "PVE_ETC="+h.Etc, "PVE_NODE="+h.Node)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("readback.pl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("readback.pl %s printed %q: %v\n%s", strings.Join(args, " "), stdout.String(), err, stderr.String())
	}
}

// Mapping is pci.cfg as PVE::Mapping::PCI reads it.
type Mapping struct {
	// Written is the file as Proxmox writes it back (SectionConfig's write_config).
	Written string `json:"written"`
	// Errors are what the parser refused ("context: error").
	Errors []string `json:"errors"`
	// IDs are the mappings; a section Proxmox skipped is nil.
	IDs map[string]map[string]any `json:"ids"`
}

// ReadMapping parses text as pci.cfg and writes it back, with Proxmox's code.
func (h *Host) ReadMapping(t testing.TB, text string) Mapping {
	t.Helper()
	f := filepath.Join(t.TempDir(), "pci.cfg")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var m Mapping
	h.run(t, &m, "mapping", f)
	return m
}

// Assert runs assert_valid on each entry of this node of a mapping of Etc's pci.cfg,
// with the mapping's flags: by path, the error ("" where it passes).
func (h *Host) Assert(t testing.TB, mapping string) map[string]string {
	t.Helper()
	var res struct {
		Entries []struct {
			Path  string `json:"path"`
			Error string `json:"error"`
		} `json:"entries"`
	}
	h.run(t, &res, "assert", mapping)
	out := map[string]string{}
	for _, e := range res.Entries {
		out[e.Path] = e.Error
	}
	return out
}

// Hostpci is a hostpciN value as qemu-server reads it.
type Hostpci struct {
	// Raw is the property string as the schema parses it.
	Raw map[string]any `json:"raw"`
	// Parsed is parse_hostpci's result, but its ids.
	Parsed map[string]any `json:"parsed"`
	// IDs are the functions of each choice, in qemu-server's order.
	IDs [][]string `json:"ids"`
}

// ReadHostpci runs parse_hostpci on value, with Etc's mappings and Root's sysfs.
func (h *Host) ReadHostpci(t testing.TB, value string) Hostpci {
	t.Helper()
	var v Hostpci
	h.run(t, &v, "hostpci", value)
	return v
}
