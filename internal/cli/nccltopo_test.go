package cli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/nccl"
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
	guestDir := filepath.Join(dir, "guest")
	if _, err := fakehost.ProxmoxQ35Guest(4, []fakehost.Node{{ID: 0, CPUs: "0-63"}}).Open(guestDir); err != nil {
		t.Fatal(err)
	}
	xmlFile := filepath.Join(dir, "topo.xml")
	out = mustRun(t, "--root", guestDir, "nccl-topo", "--manifest", manifest, "--file", xmlFile)
	if !strings.Contains(out, "export NCCL_TOPO_FILE="+xmlFile) || !strings.Contains(out, "export NCCL_P2P_DISABLE=1") || !strings.Contains(out, "p2p-topology") {
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
	if res.XML != string(data) || !res.P2PDisable || len(res.P2PReasons) != 1 || res.P2PReasons[0].ID != "p2p-topology" {
		t.Errorf("json: %+v", res)
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
		{[]string{"--demo", "nccl-topo", "--manifest", "/nonexistent.json"}, "--manifest: open /nonexistent.json"},
		{[]string{"--demo", "nccl-topo", "--manifest", "nccltopo_test.go"}, "not a gpusplit VM manifest"},
		{[]string{"--demo", "nccl-topo", "--file", "/nonexistent/dir/topo.xml"}, "nothing was written there"},
	} {
		_, _, err := run(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
}
