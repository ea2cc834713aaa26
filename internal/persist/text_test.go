package persist

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

func TestInstallStopsAndWords(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	bf := &Boot{Binary: Binary{Path: "/usr/bin/gpusplit", Resolved: "/usr/bin/gpusplit", Notes: []string{"n"}}, Refused: errors.New("not root's")}
	stops := bf.InstallStops(h)
	if len(stops) != 2 || !errors.Is(stops[0], host.ErrReadOnly) {
		t.Fatalf("a snapshot and a refused binary: %v", stops)
	}
	doc := bf.InstallReport(h, nil, true, stops)
	if len(doc.Problems) != 2 || doc.Changes == nil || doc.Commands == nil || doc.Notes == nil || doc.Binary == nil {
		t.Errorf("%+v", doc)
	}
	bf.Checked = true
	if got := bf.DescribeBinary(); got != "The unit would run /usr/bin/gpusplit, which install refuses: not root's\nnote: n\n" {
		t.Errorf("%q", got)
	}
	bf.Checked, bf.Binary.Resolved = false, "/opt/gpusplit"
	var b strings.Builder
	bf.WriteDryRun(&b, []File{{Path: "/etc/x", Content: "y"}})
	if want := "==> /etc/x <==\ny\nThe unit runs /usr/bin/gpusplit (-> /opt/gpusplit) (not checked: a snapshot holds no binaries).\nnote: n\n"; b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
