package snapshot

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/gpusplit/gpusplit/internal/health"
	"github.com/gpusplit/gpusplit/internal/hook"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/samplehost"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

// members lists an archive: path → contents, or "-> target" for a link, "/" for a directory.
// testFiles are the configuration files as gpusplit snapshot passes them.
var testFiles = Files{
	SplitConfig: plan.DefaultConfig,
	Mapping:     pve.MappingPath,
	Members:     pve.MembersPath,
	Storage:     pve.StoragePath,
	Whole:       []string{pve.HAResourcesPath, pve.HARulesPath, pve.HAGroupsPath, pve.ReplicationPath},
}

func members(t *testing.T, archive []byte) map[string]string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		switch hdr.Typeflag {
		case tar.TypeSymlink:
			out[hdr.Name] = "-> " + hdr.Linkname
		case tar.TypeDir:
			out[strings.TrimSuffix(hdr.Name, "/")] = "/"
		default:
			b, _ := io.ReadAll(tr)
			out[hdr.Name] = string(b)
		}
	}
}

// entry is a member of an archive: its type, and a link's target or a file's contents.
type entry struct {
	typ  byte // tar.TypeReg, TypeSymlink, TypeDir
	link string
	body string
}

func (e entry) String() string {
	switch e.typ {
	case tar.TypeSymlink:
		return "a link to " + e.link
	case tar.TypeDir:
		return "a directory"
	case tar.TypeReg:
		return fmt.Sprintf("a file of %d bytes %q", len(e.body), e.body[:min(len(e.body), 40)])
	}
	return fmt.Sprintf("a member of type %q", e.typ)
}

// entries lists an archive by name, each member with its type.
func entries(t *testing.T, archive []byte) map[string]entry {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string]entry{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		if _, dup := out[name]; dup {
			t.Errorf("%s is twice in the archive", name)
		}
		e := entry{typ: hdr.Typeflag, link: hdr.Linkname}
		if e.typ == tar.TypeRegA {
			e.typ = tar.TypeReg
		}
		if e.typ == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			e.body = string(b)
		}
		out[name] = e
	}
}

// sameMembers checks that a re-snapshot holds the members of the snapshot it was taken
// of, no more and no fewer, each of the same type with the same link target or the same
// contents.
func sameMembers(t *testing.T, what string, first, second []byte) {
	t.Helper()
	a, b := entries(t, first), entries(t, second)
	if len(a) == 0 {
		t.Fatalf("%s: the snapshot is empty", what)
	}
	var problems []string
	for _, p := range slices.Sorted(maps.Keys(a)) {
		switch e, ok := b[p]; {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s is missing from the re-snapshot (%s)", p, a[p]))
		case e != a[p]:
			problems = append(problems, fmt.Sprintf("%s is %s in the snapshot, %s in the re-snapshot", p, a[p], e))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(b)) {
		if _, ok := a[p]; !ok {
			problems = append(problems, fmt.Sprintf("%s is only in the re-snapshot (%s)", p, b[p]))
		}
	}
	if len(problems) > 0 {
		t.Errorf("%s: %d of %d members differ between the snapshot and the snapshot of it:\n%s",
			what, len(problems), len(a), strings.Join(problems[:min(len(problems), 20)], "\n"))
	}
}

func snap(t *testing.T, h *host.Host) ([]byte, *Summary) {
	t.Helper()
	var buf bytes.Buffer
	s, err := Capture(h, &buf, testFiles)
	if err != nil {
		t.Fatal(err)
	}
	if s.ArchiveBytes != int64(buf.Len()) {
		t.Errorf("summary says %d archive bytes, wrote %d", s.ArchiveBytes, buf.Len())
	}
	return buf.Bytes(), s
}

// A snapshot of a snapshot is the same snapshot: what is captured is what --root reads.
func TestCaptureRoundTrip(t *testing.T) {
	demo, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	first, sum := snap(t, demo)
	again, err := host.OpenArchive("first", bytes.NewReader(first))
	if err != nil {
		t.Fatal(err)
	}
	second, _ := snap(t, again)
	sameMembers(t, "the sample host", first, second)
	a := members(t, first)
	if sum.Files == 0 || sum.Links == 0 || sum.Bytes == 0 || len(sum.Unreadable) != 0 {
		t.Errorf("summary %+v", sum)
	}
	// What the commands read is there, as it was.
	for _, p := range []string{
		"sys/bus/pci/devices/0000:e1:00.0",
		"sys/devices/pci0000:e0/0000:e0:01.1/0000:e1:00.0/numa_node",
		"sys/devices/pci0000:e0/0000:e0:01.1/0000:e1:00.0/iommu_group",
		"sys/kernel/iommu_groups/101/devices/0000:e1:00.1",
		"sys/devices/pci0000:80/0000:80:03.1/0000:82:00.0/infiniband/mlx5_0",
		"proc/driver/nvidia/gpus/0000:e1:00.0/information",
		"proc/cmdline",
		"etc/pve/mapping/pci.cfg",
		"etc/pve/nodes/kpro6/lxc/129.conf",
		"etc/pve/nodes/kpro6/qemu-server/131.conf",
		"etc/pve/qemu-server",
		"etc/default/grub",
		"sys/bus/pci/drivers/vfio-pci/bind",
	} {
		if _, ok := a[p]; !ok {
			t.Errorf("the snapshot lacks %s", p)
		}
	}
	if a["sys/devices/pci0000:e0/0000:e0:01.1/0000:e1:00.0/iommu_group"] != "-> ../../../../kernel/iommu_groups/101" {
		t.Errorf("iommu_group link kept as %q", a["sys/devices/pci0000:e0/0000:e0:01.1/0000:e1:00.0/iommu_group"])
	}
}

// Keys, other Proxmox files, process arguments and environments stay out.
func TestCaptureLeavesOutSecrets(t *testing.T) {
	m := fakehost.Machine{
		Nodes: []fakehost.Node{{ID: 0, CPUs: "0-3"}},
		Bridges: []fakehost.HostBridge{{NUMA: -1, Devices: []fakehost.Device{
			{Slot: 2, Vendor: 0x10de, Device: 0x2bb1, Class: 0x030000, Driver: "nvidia", Model: "NVIDIA RTX PRO 6000"},
		}}},
		NvidiaVersion: "580.95.05",
		Processes: []fakehost.Process{
			{PID: 77, Comm: "python3", Cmdline: []string{"/usr/bin/python3", "serve.py", "--api-key=hunter2"}, Cgroup: "/lxc/129/ns", Files: []string{"/dev/nvidia0"}},
			{PID: 78, Comm: "sshd", Cmdline: []string{"sshd", "-D"}, Cgroup: "/system.slice/ssh.service", Files: []string{"/dev/pts/0"}},
		},
		Files: map[string]string{
			"etc/pve/priv/authkey.key":      "-----BEGIN PRIVATE KEY-----\n",
			"etc/pve/priv/lock/x":           "",
			"etc/pve/user.cfg":              "user:root@pam:1:0:::::\n",
			"etc/pve/corosync.conf":         "totem {}\n",
			"etc/pve/mapping/pci.cfg":       "m1\n\tmap id=10de:2bb1,node=n,path=0000:00:02.0\n\n",
			"etc/pve/nodes/n/lxc/129.conf":  "arch: amd64\n",
			"etc/pve/nodes/n/lxc/notes.txt": "secret\n",
			"etc/shadow":                    "root:$6$x\n",
			"proc/77/environ":               "HF_TOKEN=hf_secret\x00",
			"dev/kmsg":                      "6,1,0,-;Linux version 6.17.2-1-pve\n",
		},
	}
	h, err := m.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	archive, _ := snap(t, h)
	got := members(t, archive)
	for p, v := range got {
		for _, secret := range []string{"PRIVATE KEY", "hunter2", "hf_secret", "root@pam", "totem", "$6$", "sshd"} {
			if strings.Contains(v, secret) || strings.Contains(p, "priv") {
				t.Errorf("the snapshot holds %s (%q)", p, secret)
			}
		}
	}
	for p, want := range map[string]string{
		"proc/77/cmdline":              "python3\x00",
		"proc/77/fd/3":                 "-> /dev/nvidia0",
		"proc/77/cgroup":               "0::/lxc/129/ns\n",
		"etc/pve/nodes/n/lxc/129.conf": "arch: amd64\n",
		"dev/kmsg":                     "6,1,0,-;Linux version 6.17.2-1-pve\n",
	} {
		if got[p] != want {
			t.Errorf("%s = %q, want %q", p, got[p], want)
		}
	}
	for _, p := range []string{"proc/78/comm", "etc/pve/nodes/n/lxc/notes.txt", "proc/77/environ"} {
		if _, ok := got[p]; ok {
			t.Errorf("the snapshot holds %s", p)
		}
	}
}

func TestCaptureNotAHost(t *testing.T) {
	h, err := host.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, err = Capture(h, io.Discard, testFiles)
	if err == nil || !strings.Contains(err.Error(), "/sys/bus/pci/devices") {
		t.Fatalf("got %v, want an error naming /sys/bus/pci/devices", err)
	}
}

// The captures taken inside QEMU guests read back with --root.
func TestCapturedGuestsOpen(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/vm/*.tar.gz")
	if len(files) == 0 {
		t.Fatal("no captured snapshots in testdata/vm")
	}
	for _, f := range files {
		h, err := host.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := snap(t, h)
		sameMembers(t, f, b, again)
	}
}

// A file left out for what it is (a FIFO where /proc/cmdline belongs, a pci.cfg over
// its cap) is listed as refused, with the reason, not as wanting root; the archive is
// still written.
func TestCaptureRefused(t *testing.T) {
	root := t.TempDir()
	if err := samplehost.Unpack(root); err != nil {
		t.Fatal(err)
	}
	cmdline := filepath.Join(root, "proc/cmdline")
	os.Remove(cmdline)
	if err := syscall.Mkfifo(cmdline, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/pve/mapping/pci.cfg"), bytes.Repeat([]byte("#\n"), 1<<20), 0o640); err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := Capture(h, io.Discard, testFiles)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(sum.Refused, "\n")
	for _, want := range []string{"/proc/cmdline: not a regular file", "/etc/pve/mapping/pci.cfg: "} {
		if !strings.Contains(all, want) {
			t.Errorf("refused %q lacks %q", sum.Refused, want)
		}
	}
	if len(sum.Unreadable) != 0 {
		t.Errorf("unreadable %q: nothing here needs root", sum.Unreadable)
	}
}

// A snapshot holds no more than its reader takes: files past the archive's caps are
// left out and listed, and what is written opens. Guest configs count as reduced.
func TestCaptureFull(t *testing.T) {
	root := t.TempDir()
	if err := samplehost.Unpack(root); err != nil {
		t.Fatal(err)
	}
	params := filepath.Join(root, "sys/module/nvidia/parameters")
	if err := os.MkdirAll(params, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 80 {
		f, err := os.Create(filepath.Join(params, fmt.Sprintf("p%02d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(1 << 20); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	// 1 MiB of lines gpusplit does not read: 1 MiB read, a few bytes kept.
	conf := filepath.Join(root, "etc/pve/nodes/kpro6/qemu-server/131.conf")
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, bytes.Repeat([]byte("#padding padding padding\n"), (1<<20-len(b))/25)...)
	if err := os.WriteFile(conf, b, 0o640); err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sum, err := Capture(h, &out, testFiles)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(sum.Refused, "\n")
	if !strings.Contains(all, "/sys/module/nvidia/parameters/p6") || !strings.Contains(all, "left out: the snapshot would hold more than 262144 entries or their names and contents more than 64 MiB") ||
		!strings.Contains(all, "more entries left out: the snapshot was full") {
		t.Errorf("refused:\n%s", all)
	}
	if sum.Bytes > host.MaxArchiveBytes || sum.Bytes < host.MaxArchiveBytes-(2<<20) {
		t.Errorf("%d bytes captured, want just under %d", sum.Bytes, host.MaxArchiveBytes)
	}
	back, err := host.OpenArchive("snapshot", bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatalf("the snapshot does not open: %v", err)
	}
	if _, err := back.ReadFile("/etc/pve/nodes/kpro6/qemu-server/131.conf"); err != nil {
		t.Errorf("the guest config was left out: %v", err)
	}
}

// A snapshot of the sample host shows the cluster as the host does: pve cluster finds
// the same problems on it, from .members without the nodes' addresses, the HA and
// replication files, and guest configs that keep template; storage.cfg keeps where
// snippets go and nothing else.
func TestSnapshotKeepsTheCluster(t *testing.T) {
	demo, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	data, _ := snap(t, demo)
	snapHost, err := host.OpenArchive("snap", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	want, err := pve.ReadCluster(demo)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pve.ReadCluster(snapHost)
	if err != nil {
		t.Fatal(err)
	}
	kinds := func(c *pve.Cluster) []string {
		var out []string
		for _, p := range c.Problems {
			out = append(out, p.Kind+": "+p.Message)
		}
		return out
	}
	if !slices.Equal(kinds(got), kinds(want)) || len(want.Problems) == 0 {
		t.Errorf("problems on the snapshot:\n%s\non the host:\n%s", strings.Join(kinds(got), "\n"), strings.Join(kinds(want), "\n"))
	}
	members, err := snapHost.ReadString(pve.MembersPath)
	if err != nil || strings.Contains(members, `"ip"`) || !strings.Contains(members, `"kpro7"`) {
		t.Errorf(".members in the snapshot: %v\n%s", err, members)
	}
	storage := "dir: local\n\tpath /var/lib/vz\n\tcontent iso,vztmpl,backup,snippets\n\npbs: backup\n\tserver 10.0.0.9\n\tusername root@pam\n\tfingerprint aa:bb\n\tdatastore main\n\tcontent backup\n"
	b, r := reduceStorage(pve.StoragePath, []byte(storage))
	if want := "dir: local\n\tpath /var/lib/vz\n\tcontent iso,vztmpl,backup,snippets\n\npbs: backup\n\tcontent backup\n"; string(b) != want || r.LeftOut["username"] != 1 || r.LeftOut["fingerprint"] != 1 {
		t.Errorf("storage.cfg reduced to\n%q\nwant\n%q (%+v)", b, want, r)
	}
}

// The GPUs a VM's stop quarantined travel with a snapshot, so that doctor and status
// read from it name them.
func TestCaptureKeepsTheQuarantine(t *testing.T) {
	root := t.TempDir()
	if err := samplehost.Unpack(root); err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := pci.ParseAddress("0000:81:00.0")
	rec := health.Record{Device: a, GPU: a, Guest: 131, Phase: "post-stop", Driver: "nvidia", Evidence: []health.Evidence{{Check: health.ConfigSpace, Text: "0000:81:00.0: config space reads ffff"}}}
	if err := health.Quarantine(h, rec); err != nil {
		t.Fatal(err)
	}
	archive, _ := snap(t, h)
	if _, ok := members(t, archive)["run/gpusplit/quarantine/0000:81:00.0.json"]; !ok {
		t.Fatal("the snapshot lacks the quarantine record")
	}
	back, err := host.OpenArchive("snap", bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := health.List(back)
	if err != nil || len(recs) != 1 || recs[0].Device != a || recs[0].Guest != 131 {
		t.Errorf("read back from the snapshot: %v %+v", err, recs)
	}
}

// A device's AER counters travel with a snapshot, so that metrics and doctor read from
// it count the same errors.
func TestCaptureKeepsAERCounters(t *testing.T) {
	root := t.TempDir()
	if err := samplehost.Unpack(root); err != nil {
		t.Fatal(err)
	}
	dir := "sys/devices/pci0000:80/0000:80:01.1/0000:81:00.0/"
	counters := map[string]string{
		"aer_dev_correctable": "RxErr 3\nBadTLP 0\nTOTAL_ERR_COR 3\n",
		"aer_dev_nonfatal":    "CmpltTO 1\nTOTAL_ERR_NONFATAL 1\n",
		"aer_dev_fatal":       "SDES 0\nTOTAL_ERR_FATAL 0\n",
	}
	for f, body := range counters {
		if err := os.WriteFile(filepath.Join(root, dir+f), []byte(body), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	archive, _ := snap(t, h)
	m := members(t, archive)
	for f, body := range counters {
		if m[dir+f] != body {
			t.Errorf("the snapshot holds %s as %q, want %q", dir+f, m[dir+f], body)
		}
	}
}

// The hooks' hand-off records travel with a snapshot, so that metrics read from it
// report the same hand-offs.
func TestCaptureKeepsTheHandOffs(t *testing.T) {
	root := t.TempDir()
	if err := samplehost.Unpack(root); err != nil {
		t.Fatal(err)
	}
	// The records of a simulated host's hooks, as the demo's copy has them.
	if err := os.WriteFile(filepath.Join(root, host.SimulationRecord), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hook.Run(context.Background(), hook.Config{H: h}, 129, hook.PreStart); err != nil {
		t.Fatal(err)
	}
	archive, _ := snap(t, h)
	back, err := host.OpenArchive("snap", bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	recs, damaged, err := hook.HandOffs(back)
	if err != nil || damaged != 0 || len(recs) != 1 || recs[0].Guest != 129 || recs[0].Result != hook.ResultOK {
		t.Errorf("read back from the snapshot: %v %+v", err, recs)
	}
}
