package inventory

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

func sriovInventory(t *testing.T) *Inventory {
	t.Helper()
	h, err := fakehost.SRIOVHost().Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	inv, err := Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.GPUs) != 3 || len(inv.Warnings) > 0 {
		t.Fatalf("%d GPUs (the VFs are not GPUs), warnings %v", len(inv.GPUs), inv.Warnings)
	}
	return inv
}

// A GPU's virtual functions come from its virtfnN links, in N's order, each with the
// vGPU manager's type and the types it can take; a GPU that can have VFs and has none
// enabled has none, and says how many it could.
func TestVirtualFunctions(t *testing.T) {
	inv := sriovInventory(t)
	g := inv.GPUs[1]
	if g.Address.String() != "0000:81:00.0" || g.TotalVFs != 32 || g.NumVFs != 4 || len(g.VFs) != 4 {
		t.Fatalf("%s: %d of %d VFs, %d read", g.Address, g.NumVFs, g.TotalVFs, len(g.VFs))
	}
	var got []string
	for _, vf := range g.VFs {
		got = append(got, vf.Address.String())
	}
	if strings.Join(got, " ") != "0000:81:00.4 0000:81:00.5 0000:81:00.6 0000:81:00.7" {
		t.Errorf("VFs %v", got)
	}
	vf := g.VFs[0]
	if !vf.VGPU || vf.VGPUType != 1234 || len(vf.Creatable) != 2 || vf.Creatable[1] != (VGPUType{1235, "NVIDIA RTX PRO 6000 Blackwell DC-48Q"}) {
		t.Errorf("VF %s: %+v", vf.Address, vf)
	}
	if g.VFs[1].VGPUType != 0 || !g.VFs[1].VGPU {
		t.Errorf("VF %s: %+v", g.VFs[1].Address, g.VFs[1])
	}
	if c := inv.GPUs[2]; c.TotalVFs != 32 || c.NumVFs != 0 || c.VFs != nil {
		t.Errorf("%s: %d of %d, %v", c.Address, c.NumVFs, c.TotalVFs, c.VFs)
	}
	if n := inv.GPUs[0]; n.TotalVFs != 0 || n.VFs != nil {
		t.Errorf("%s has SR-IOV", n.Address)
	}
}

// The JSON has sriov for each GPU that has the capability, null for one without; the
// text has a row for the enabled VFs under their GPU, within 100 columns, and the long
// form a line each.
func TestVirtualFunctionsShown(t *testing.T) {
	inv := sriovInventory(t)
	data, err := json.Marshal(inv.Report(2))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		GPUs []struct {
			SRIOV *struct {
				TotalVFs int `json:"total_vfs"`
				NumVFs   int `json:"num_vfs"`
				VFs      []struct {
					Address   string `json:"address"`
					VGPU      bool   `json:"vgpu"`
					VGPUType  *int   `json:"vgpu_type"`
					Creatable []struct {
						ID   int    `json:"id"`
						Name string `json:"name"`
					} `json:"creatable_vgpu_types"`
					Holders []struct {
						Kind string `json:"kind"`
						VM   *int   `json:"vm"`
					} `json:"holders"`
				} `json:"vfs"`
			} `json:"sriov"`
		} `json:"gpus"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.GPUs[0].SRIOV != nil {
		t.Error("a GPU without SR-IOV has sriov")
	}
	s := doc.GPUs[1].SRIOV
	if s == nil || s.TotalVFs != 32 || s.NumVFs != 4 || len(s.VFs) != 4 || s.VFs[0].Address != "0000:81:00.4" || s.VFs[0].VGPUType == nil || *s.VFs[0].VGPUType != 1234 || len(s.VFs[0].Creatable) != 2 || s.VFs[0].Creatable[0].Name != "NVIDIA RTX PRO 6000 Blackwell DC-24Q" {
		t.Fatalf("sriov %s", data)
	}
	if h := s.VFs[0].Holders; len(h) != 1 || h[0].Kind != "vm" || h[0].VM == nil || *h[0].VM != 140 {
		t.Errorf("VF 0000:81:00.4 holders %+v", h)
	}
	if c := doc.GPUs[2].SRIOV; c == nil || c.NumVFs != 0 || c.VFs == nil || len(c.VFs) != 0 {
		t.Errorf("a GPU without VFs enabled: %+v", c)
	}

	var b bytes.Buffer
	if err := inv.WriteTable(&b, 2, 100); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if len([]rune(line)) > 100 {
			t.Errorf("line of %d columns: %q", len([]rune(line)), line)
		}
	}
	t.Log("\n" + b.String())
	if !strings.Contains(b.String(), "└ 4 of 32 VFs") || !strings.Contains(b.String(), "vGPU: 1 of 4 in use") || !strings.Contains(b.String(), "VM 140") {
		t.Errorf("table:\n%s", b.String())
	}
	b.Reset()
	if err := inv.WriteLong(&b, 2); err != nil {
		t.Fatal(err)
	}
	long := regexp.MustCompile(` +`).ReplaceAllString(b.String(), " ")
	for _, want := range []string{
		"sr-iov 4 of 32 virtual functions enabled",
		"vf 0000:81:00.4 ((none)), vGPU type 1234 (NVIDIA RTX PRO 6000 Blackwell DC-24Q), can take 1234, 1235",
		"vf 0000:81:00.5 ((none)), no vGPU, can take 1234, 1235",
		"sr-iov 0 of 32 virtual functions enabled",
		"held by 4 SR-IOV virtual functions (given to VM 140 (hostpci0, running) with 0000:81:00.4; VM 141 (hostpci0, mapping vgpu) with 0000:81:00.5 or 0000:81:00.6)",
	} {
		if !strings.Contains(long, want) {
			t.Errorf("long form lacks %q:\n%s", want, b.String())
		}
	}
}

// The manager's list: a header, "<id> : <name>" lines; anything else is an error that
// keeps what came before it.
func TestParseVGPUTypes(t *testing.T) {
	got, err := ParseVGPUTypes("ID    : vGPU Name\n1428 : NVIDIA H200X-141C\n1414 : NVIDIA H200X-1-18C\n\n")
	if err != nil || len(got) != 2 || got[0] != (VGPUType{1428, "NVIDIA H200X-141C"}) || got[1].ID != 1414 {
		t.Errorf("%+v %v", got, err)
	}
	if got, err := ParseVGPUTypes("1428 : A\nnot a type\n1 : B\n"); err == nil || len(got) != 1 {
		t.Errorf("garbage: %+v %v", got, err)
	}
}
