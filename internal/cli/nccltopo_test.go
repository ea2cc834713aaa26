package cli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/nccl"
	"github.com/gpusplit/gpusplit/internal/samplehost"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

func TestNCCLTopoDemo(t *testing.T) {
	out, stderr, err := run(t, "--demo", "nccl-topo")
	if err != nil {
		t.Fatal(err)
	}
	x, err := nccl.Parse([]byte(out))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(x.Children) != 2 {
		t.Errorf("%d <cpu>, want 2", len(x.Children))
	}
	if !strings.Contains(stderr, "NCCL_TOPO_FILE") || !strings.Contains(stderr, "NCCL_P2P_DISABLE=1 is not advised") {
		t.Errorf("stderr:\n%s", stderr)
	}
}

// The two ends of the VM case: the manifest written from the sample host, the topology
// written in the guest VM 131 is, to files.
func TestNCCLTopoManifestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, "vm131.json")
	out := mustRun(t, "--demo", "nccl-topo", "--vm", "131", "--file", manifest)
	if !strings.Contains(out, "wrote the manifest of VM 131 to "+manifest) || !strings.Contains(out, "--manifest vm131.json") {
		t.Errorf("stdout:\n%s", out)
	}
	// The host's verdict, which the guest must repeat word for word.
	verdict := "# NCCL_P2P_DISABLE=1 is not advised: the host's iommu-page-faults, sev-snp, iommu-translated found nothing against peer-to-peer; " +
		"without x-nv-gpudirect-clique the guest's NVIDIA driver gives these GPUs no peer access, and NCCL copies through host memory by itself (gpusplit pve p2p-clique --vm 131 sets it)\n"
	if !strings.Contains(out, verdict) {
		t.Errorf("the host's verdict:\n%s", out)
	}
	guestDir := filepath.Join(dir, "guest")
	if _, err := fakehost.ProxmoxQ35Guest(4, []fakehost.Node{{ID: 0, CPUs: "0-63"}}).Open(guestDir); err != nil {
		t.Fatal(err)
	}
	xmlFile := filepath.Join(dir, "topo.xml")
	out = mustRun(t, "--root", guestDir, "nccl-topo", "--manifest", manifest, "--file", xmlFile)
	// The guest sees only a flat tree (its own doctor's p2p-topology would warn); the
	// verdict is the host's, from the manifest.
	if !strings.Contains(out, "export NCCL_TOPO_FILE="+xmlFile) || !strings.Contains(out, verdict) {
		t.Errorf("stdout:\n%s", out)
	}
	data, err := os.ReadFile(xmlFile)
	if err != nil {
		t.Fatal(err)
	}
	x, err := nccl.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	// Before the split VM 131 would get the NUMA-0 GPUs: one <cpu numaid="0"> (the
	// guest's node 0 is not bound to a host node, so the host's number) with the guest's
	// buses 01-04.
	if len(x.Children) != 1 || len(x.Children[0].Children) != 4 {
		t.Fatalf("got:\n%s", data)
	}
	if id, _ := x.Children[0].Get("numaid"); id != "0" {
		t.Errorf("numaid %s", id)
	}
	if b, _ := x.Children[0].Children[3].Get("busid"); b != "0000:04:00.0" {
		t.Errorf("last GPU %s", b)
	}

	// The same guest in JSON.
	js := mustRun(t, "--root", guestDir, "nccl-topo", "--manifest", manifest, "-o", "json")
	var res struct {
		XML        string `json:"xml"`
		P2PDisable bool   `json:"p2p_disable"`
		P2PReasons []struct {
			ID string `json:"id"`
		} `json:"p2p_reasons"`
	}
	if err := json.Unmarshal([]byte(js), &res); err != nil {
		t.Fatal(err)
	}
	if res.XML != string(data) || res.P2PDisable || len(res.P2PReasons) != 1 || res.P2PReasons[0].ID != "clique" {
		t.Errorf("json: %+v", res)
	}
}

// The host's evidence decides in the guest too: SEV-SNP on the host (its kernel log),
// or a saved p2p run that found corruption between two of the VM's GPUs, make both ends
// advise NCCL_P2P_DISABLE=1 with the same reasons.
func TestNCCLTopoVerdictFromHost(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		p2p   string
		want  []string
	}{
		{"SEV-SNP", map[string]string{"dev/kmsg": "6,100,1000,-;SEV-SNP: RMP table physical range [0x0000000088700000 - 0x00000000a8efffff]\n" +
			"6,101,1001,-;ccp 0000:42:00.1: SEV-SNP API:1.55 build:24\n6,102,1002,-;kvm_amd: SEV-SNP enabled (ASIDs 1 - 1006)\n"},
			"", []string{"export NCCL_P2P_DISABLE=1   # advised, from the host's evidence in the manifest:", "#   host sev-snp: "}},
		{"a corrupt pair", nil, `{"pairs": [{"src": "0000:01:00.0", "dst": "0000:11:00.0", "verdict": "corrupt", "why": "peer copy of 64 MiB: 4096 of 67108864 bytes wrong"},` +
			`{"src": "0000:01:00.0", "dst": "0000:81:00.0", "verdict": "corrupt", "why": "not a GPU of this VM"}]}`,
			[]string{"export NCCL_P2P_DISABLE=1   # advised", "#   host p2p: 0000:01:00.0 -> 0000:11:00.0: peer copy of 64 MiB: 4096 of 67108864 bytes wrong\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			root := filepath.Join(dir, "host")
			if err := samplehost.Unpack(root); err != nil {
				t.Fatal(err)
			}
			for p, body := range c.files {
				os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
				if err := os.WriteFile(filepath.Join(root, p), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			args := []string{"--root", root, "nccl-topo", "--vm", "131", "--file", filepath.Join(dir, "m.json")}
			if c.p2p != "" {
				os.WriteFile(filepath.Join(dir, "p2p.json"), []byte(c.p2p), 0o644)
				args = append(args, "--p2p", filepath.Join(dir, "p2p.json"))
			}
			hostOut := mustRun(t, args...)
			guestDir := filepath.Join(dir, "guest")
			if _, err := fakehost.ProxmoxQ35Guest(4, []fakehost.Node{{ID: 0, CPUs: "0-63"}}).Open(guestDir); err != nil {
				t.Fatal(err)
			}
			guestOut := mustRun(t, "--root", guestDir, "nccl-topo", "--manifest", filepath.Join(dir, "m.json"), "--file", filepath.Join(dir, "t.xml"))
			advice := func(out string) string { return out[strings.Index(out, "export NCCL_P2P_DISABLE"):] }
			for _, w := range c.want {
				if !strings.Contains(hostOut, w) {
					t.Errorf("host lacks %q:\n%s", w, hostOut)
				}
			}
			if !strings.Contains(hostOut, "export NCCL_P2P_DISABLE") || advice(hostOut) != advice(guestOut) {
				t.Errorf("the two ends differ:\nhost:\n%s\nguest:\n%s", hostOut, guestOut)
			}
			if strings.Contains(hostOut, "not a GPU of this VM") {
				t.Errorf("a pair of other GPUs counted:\n%s", hostOut)
			}
		})
	}
}

func TestNCCLTopoCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.xml")
	bad := filepath.Join(dir, "bad.xml")
	os.WriteFile(good, []byte(mustRun(t, "--demo", "nccl-topo", "--with-gpus")), 0o644)
	os.WriteFile(bad, []byte("<?xml version=\"1.0\"?>\n<system version=\"1\"/>\n"), 0o644)
	out := mustRun(t, "nccl-topo", "--check", good)
	if !strings.Contains(out, "NCCL reads it: 21 elements") || !strings.Contains(out, "8 <gpu>") {
		t.Errorf("check good:\n%s", out)
	}
	_, _, err := run(t, "nccl-topo", "--check", bad)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 1 || !strings.Contains(err.Error(), "line 1, column 1: an XML declaration") {
		t.Errorf("check bad: %v", err)
	}
}

func TestNCCLTopoBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--demo", "nccl-topo", "--vm", "131", "--manifest", "x.json"}, "use one of them"},
		{[]string{"--demo", "nccl-topo", "--check", "x.xml", "--with-gpus"}, "takes no other option"},
		{[]string{"--demo", "nccl-topo", "--vm", "120"}, "VM 120 is on node kpro5"},
		{[]string{"--demo", "nccl-topo", "--manifest", "/nonexistent.json"}, "--manifest: lstat /nonexistent.json: no such file or directory"},
		{[]string{"--demo", "nccl-topo", "--manifest", "nccltopo_test.go"}, "not a gpusplit VM manifest"},
		{[]string{"--demo", "nccl-topo", "--file", "/nonexistent/dir/topo.xml"}, "nothing was written there"},
	} {
		_, _, err := run(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
}
