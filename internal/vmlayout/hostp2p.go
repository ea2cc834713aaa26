package vmlayout

import (
	"encoding/json"
	"errors"
)

// NotP2PResultError is a file given as a saved p2p result that is not one: Err is why it
// could not be read as one, nil when it reads but holds no pairs.
type NotP2PResultError struct{ Err error }

func (e *NotP2PResultError) Error() string {
	return "not a gpusplit p2p result: " + errString(e.Err)
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// ErrNoPairs is a saved p2p result that measured no pair of the VM's GPUs.
var ErrNoPairs = errors.New("the p2p result measured no pair of the VM's GPUs")

// NewHostP2P is the host's evidence on peer-to-peer for the VM of manifest m: the
// findings of the doctor's checks, and, where saved holds a p2p result read from file
// (p2p --save), the pairs of the VM's GPUs it measured. file "" is no result.
func NewHostP2P(checks []string, findings []P2PFinding, m *Manifest, saved []byte, file string) (*HostP2P, error) {
	hp := &HostP2P{Checks: checks, Findings: append([]P2PFinding{}, findings...)}
	if file == "" {
		return hp, nil
	}
	var result struct {
		Pairs []P2PPair `json:"pairs"`
	}
	if err := json.Unmarshal(saved, &result); err != nil || result.Pairs == nil {
		return nil, &NotP2PResultError{Err: err}
	}
	mine := map[string]bool{}
	for _, d := range m.Devices {
		if d.IsGPU() {
			mine[d.HostAddress.String()] = true
		}
	}
	for _, p := range result.Pairs {
		if mine[p.Src] && mine[p.Dst] && p.Src != p.Dst {
			hp.Measured = append(hp.Measured, p)
		}
	}
	if len(hp.Measured) == 0 {
		return nil, ErrNoPairs
	}
	hp.MeasuredFile = file
	return hp, nil
}
