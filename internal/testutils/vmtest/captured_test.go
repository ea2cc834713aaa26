package vmtest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/cli"
	"github.com/gpusplit/gpusplit/internal/host"
)

// The snapshots captured in the guests are fixtures: without QEMU, gpusplit run on each
// with --root must agree with that kernel's view (read from the snapshot's own links and
// attributes) and with the relations its description implies, as it did in the guest.
func TestCapturedTopologies(t *testing.T) {
	for _, topo := range Topologies() {
		t.Run(topo.Name, func(t *testing.T) {
			dir := filepath.Join("..", "..", "..", "testdata", "vm")
			archive := filepath.Join(dir, topo.Name+".tar.gz")
			macs, err := os.ReadFile(filepath.Join(dir, topo.Name+".macs"))
			if err != nil {
				t.Fatal(err)
			}
			h, err := host.Open(archive)
			if err != nil {
				t.Fatal(err)
			}
			res := &Result{Files: map[string][]byte{"macs": macs}, Status: map[string]int{}}
			for name, args := range map[string][]string{
				"inventory": {"--root", archive, "--devices", E1000E, "inventory", "-o", "json"},
				"topo":      {"--root", archive, "--devices", E1000E, "topo", "-o", "json"},
			} {
				var out, errOut bytes.Buffer
				cmd := cli.New(&out, &errOut)
				cmd.SetArgs(args)
				if err := cmd.Execute(); err != nil {
					t.Fatalf("gpusplit %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
				}
				res.Files[name] = out.Bytes()
			}
			res.Files["kernel"] = []byte(kernelListing(t, h))
			checkGuest(t, topo, expected[topo.Name], res)
		})
	}
}

// kernelListing lists /sys/bus/pci/devices of a snapshot as the guest's shell loop does:
// address, numa_node, IOMMU group, driver, real path.
func kernelListing(t *testing.T, h *host.Host) string {
	t.Helper()
	names, err := h.ReadDir("/sys/bus/pci/devices")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, n := range names {
		d := "/sys/bus/pci/devices/" + n
		numa, _ := h.ReadString(d + "/numa_node")
		group, _ := h.Readlink(d + "/iommu_group")
		driver, _ := h.Readlink(d + "/driver")
		real, err := h.Realpath(d)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s %s %s %s\n", n, numa, base(group), base(driver), real)
	}
	return b.String()
}

func base(link string) string {
	if link == "" {
		return ""
	}
	return filepath.Base(link)
}
