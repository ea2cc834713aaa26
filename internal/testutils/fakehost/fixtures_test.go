package fakehost

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
)

var update = flag.Bool("update", false, "rewrite the fixture archives under testdata/hosts from their descriptions")

// hostsDir is testdata/hosts at the repository root.
const hostsDir = "../../../testdata/hosts"

// The committed archives must be what the descriptions in fixtures.go build, so that the
// descriptions stay their readable source. Regenerate with:
//
//	go test ./internal/testutils/fakehost -run TestFixtureArchives -update
func TestFixtureArchives(t *testing.T) {
	for _, f := range Fixtures() {
		t.Run(f.Name, func(t *testing.T) {
			tree, err := f.Machine().Build()
			if err != nil {
				t.Fatal(err)
			}
			want, err := tree.Archive()
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(hostsDir, f.Name+".tar.gz")
			if *update {
				if err := os.MkdirAll(hostsDir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, want, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			got, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v; run: go test ./internal/testutils/fakehost -run TestFixtureArchives -update", err)
			}
			// Compare the tar streams: gzip's bytes may differ between Go releases.
			if !bytes.Equal(untar(t, want), untar(t, got)) {
				t.Fatalf("%s is out of date with its description; run: go test ./internal/testutils/fakehost -run TestFixtureArchives -update", file)
			}
		})
	}
}

func untar(t *testing.T, gz []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tar.NewReader(bytes.NewReader(b)).Next(); err != nil {
		t.Fatal(err)
	}
	return b
}

// Every fixture scans cleanly, with the GPUs, NUMA nodes and IOMMU groups its doc
// comment describes.
func TestFixturesScan(t *testing.T) {
	type want struct {
		gpus      []string // addresses, in order
		numa      int      // every GPU's numa_node
		cpus      string   // the first GPU's local_cpulist
		iommu     bool
		linkSpeed string // every GPU's current link speed; "" for conventional PCI
		rootPorts int    // distinct root ports above the GPUs (0: on the root bus)
		probed    int    // GPUs the nvidia driver drives; 0: all of them
	}
	cases := map[string]want{
		"q35-guest-8gpu": {
			gpus: []string{"0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0", "0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"},
			numa: -1, cpus: "0-31", linkSpeed: speedGen5, rootPorts: 8,
		},
		"q35-guest-8gpu-bar-failure": {
			gpus: []string{"0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0", "0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"},
			numa: -1, cpus: "0-31", linkSpeed: speedGen5, rootPorts: 8, probed: 2,
		},
		"q35-guest-vm131": {
			gpus: []string{"0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0"},
			numa: -1, cpus: "0-63", linkSpeed: speedGen5, rootPorts: 4,
		},
		"i440fx-guest-4gpu": {
			gpus: []string{"0000:00:10.0", "0000:00:11.0", "0000:00:12.0", "0000:00:13.0"},
			numa: -1, cpus: "0-15", linkSpeed: "", rootPorts: 0,
		},
		"oracle-o1-8x4090-2socket": {
			gpus: []string{"0000:34:00.0", "0000:35:00.0", "0000:36:00.0", "0000:37:00.0", "0000:b4:00.0", "0000:b5:00.0", "0000:b6:00.0", "0000:b7:00.0"},
			numa: -2, cpus: "0-27,56-83", linkSpeed: speedGen4, rootPorts: 2,
		},
		"oracle-o2-epyc-5gpu": {
			gpus: []string{"0000:01:00.0", "0000:41:00.0", "0000:81:00.0", "0000:e1:00.0", "0000:e2:00.0"},
			numa: 0, cpus: "0-63", iommu: true, linkSpeed: speedGen4, rootPorts: 5,
		},
		"oracle-o4-2x5090-trpro": {
			gpus: []string{"0000:41:00.0", "0000:42:00.0"},
			numa: 0, cpus: "0-63", iommu: true, linkSpeed: speedGen4, rootPorts: 2,
		},
	}
	for _, f := range Fixtures() {
		t.Run(f.Name, func(t *testing.T) {
			w, ok := cases[f.Name]
			if !ok {
				t.Fatalf("no expectations for fixture %s", f.Name)
			}
			tree, err := f.Machine().Build()
			if err != nil {
				t.Fatal(err)
			}
			ar, err := tree.Archive()
			if err != nil {
				t.Fatal(err)
			}
			h, err := host.OpenArchive(f.Name, bytes.NewReader(ar))
			if err != nil {
				t.Fatal(err)
			}
			pt, err := pci.Scan(h, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(pt.Warnings) > 0 {
				t.Errorf("scan warnings: %q", pt.Warnings)
			}
			gpus, err := pci.GPUs(pt, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			ports := map[pci.Address]bool{}
			for _, g := range gpus {
				got = append(got, g.Address.String())
				if w.numa != -2 && g.NUMANode != w.numa {
					t.Errorf("%s: numa_node %d, want %d", g.Address, g.NUMANode, w.numa)
				}
				if g.Link.Speed != w.linkSpeed {
					t.Errorf("%s: link speed %q, want %q", g.Address, g.Link.Speed, w.linkSpeed)
				}
				if (g.IOMMUGroup >= 0) != w.iommu {
					t.Errorf("%s: IOMMU group %d; want one: %v", g.Address, g.IOMMUGroup, w.iommu)
				}
				if len(g.Functions) != 1 || g.Functions[0].Class != 0x040300 {
					t.Errorf("%s: companion functions %v, want the HDMI audio function", g.Address, g.Functions)
				} else if w.iommu && g.Functions[0].IOMMUGroup != g.IOMMUGroup {
					t.Errorf("%s: audio function in group %d, GPU in %d", g.Address, g.Functions[0].IOMMUGroup, g.IOMMUGroup)
				}
				if rp, ok := g.RootPort(); ok {
					ports[rp] = true
				}
			}
			// The nvidia driver drives the GPUs (all, or the first w.probed), and has an
			// information file for each.
			for i, g := range gpus {
				drives := w.probed == 0 || i < w.probed
				if (g.Driver == "nvidia") != drives {
					t.Errorf("%s: driver %q, want nvidia: %v", g.Address, g.Driver, drives)
				}
				if h.Exists("/proc/driver/nvidia/gpus/"+g.Address.String()+"/information") != drives {
					t.Errorf("%s: nvidia information file present: %v", g.Address, !drives)
				}
			}
			if !slices.Equal(got, w.gpus) {
				t.Errorf("GPUs %q, want %q", got, w.gpus)
			}
			if len(ports) != w.rootPorts {
				t.Errorf("%d root ports above the GPUs, want %d", len(ports), w.rootPorts)
			}
			if len(gpus) > 0 && gpus[0].LocalCPUs.String() != w.cpus {
				t.Errorf("local CPUs %q, want %q", gpus[0].LocalCPUs, w.cpus)
			}
		})
	}
}
