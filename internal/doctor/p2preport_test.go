package doctor

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/p2p"
	"github.com/gpusplit/gpusplit/internal/samplehost"
	"github.com/gpusplit/gpusplit/internal/testutils/p2ptest"
)

// doctor -o json names the host first, then what the checks found.
func TestReportNamesHost(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, h, "")
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"host":` + string(must(json.Marshal(h.Root()))) + `,"findings":[`; r.Host != h.Root() || !strings.HasPrefix(string(b), want) {
		t.Errorf("host %q; JSON %.80s, want it to start %s", r.Host, b, want)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// p2p's report carries the copies' report, the doctor's findings and the error that
// ended the run, in its JSON and its text.
func TestP2PReport(t *testing.T) {
	rep, err := p2p.Run(p2ptest.New(2), p2p.Options{Sizes: []int64{4 << 10}, IntegrityOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	findings := []Finding{{ID: "iommu-page-faults", Title: "the IOMMU faulted"}}
	r := NewP2PReport(rep, findings, errors.New("stopped"))
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Pairs  []json.RawMessage     `json:"pairs"`
		Doctor []struct{ ID string } `json:"doctor"`
		Error  string                `json:"error"`
	}
	if err := json.Unmarshal(b, &back); err != nil || len(back.Pairs) != 4 || len(back.Doctor) != 1 || back.Doctor[0].ID != "iommu-page-faults" || back.Error != "stopped" {
		t.Errorf("JSON: %v %s", err, b)
	}
	if b, _ := json.Marshal(NewP2PReport(rep, nil, nil)); strings.Contains(string(b), `"error"`) {
		t.Errorf("a run to the end has an error: %s", b)
	}
	var text strings.Builder
	r.WriteText(&text)
	var own strings.Builder
	rep.WriteText(&own)
	if text.String() != own.String()+"  the doctor: iommu-page-faults: the IOMMU faulted\n" {
		t.Errorf("text:\n%s", text.String())
	}
}
