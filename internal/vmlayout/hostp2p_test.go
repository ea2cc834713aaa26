package vmlayout

import (
	"errors"
	"testing"

	"github.com/gpusplit/gpusplit/internal/pci"
)

func TestNewHostP2P(t *testing.T) {
	at := func(s string) pci.Address {
		a, err := pci.ParseAddress(s)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	m := &Manifest{VMID: 131, Devices: []Device{
		{HostAddress: at("0000:81:00.0"), Class: "0x030000"},
		{HostAddress: at("0000:81:00.1"), Class: "0x040300"},
		{HostAddress: at("0000:91:00.0"), Class: "0x030200"},
	}}
	checks := []string{"sev-snp"}
	hp, err := NewHostP2P(checks, nil, m, nil, "")
	if err != nil || hp.Findings == nil || hp.Measured != nil || hp.MeasuredFile != "" {
		t.Fatalf("no result: %+v %v", hp, err)
	}
	saved := []byte(`{"pairs":[{"src":"0000:81:00.0","dst":"0000:91:00.0","verdict":"ok"},{"src":"0000:81:00.0","dst":"0000:e1:00.0"},{"src":"0000:91:00.0","dst":"0000:91:00.0"}]}`)
	hp, err = NewHostP2P(checks, nil, m, saved, "p2p.json")
	if err != nil || len(hp.Measured) != 1 || hp.Measured[0].Verdict != "ok" || hp.MeasuredFile != "p2p.json" {
		t.Errorf("the VM's pair alone: %+v %v", hp, err)
	}
	var bad *NotP2PResultError
	for _, data := range []string{"", "{}", "[1]"} {
		if _, err := NewHostP2P(checks, nil, m, []byte(data), "x.json"); !errors.As(err, &bad) {
			t.Errorf("%q: %v", data, err)
		}
	}
	if _, err := NewHostP2P(checks, nil, m, []byte(`{"pairs":[{"src":"0000:81:00.0","dst":"0000:e1:00.0"}]}`), "x.json"); !errors.Is(err, ErrNoPairs) {
		t.Errorf("no pair of the VM's: %v", err)
	}
}
