package persist

import (
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
)

// An install under another root prints each file written, the binary the unit runs
// and each command it did not run; the binary's notes and a failed command are
// warnings, apart; quiet (JSON) prints the warnings alone. The check of a remove lists
// the files that go, or says none is installed.
func TestStepWriterAndRemoval(t *testing.T) {
	h, err := host.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, files := demoFiles(t)
	bf := &Boot{Files: files, Binary: Binary{Path: DefaultBinary, Resolved: DefaultBinary, Notes: []string{"a note"}}, Checked: true}
	var removal strings.Builder
	doc := RemoveCheck(h)
	doc.WriteRemoval(&removal)
	if removal.String() != "none of persist's files is installed: nothing to remove.\n" {
		t.Errorf("nothing installed: %q", removal.String())
	}

	var out, errs strings.Builder
	if _, err := bf.InstallBoot(h, files, false, StepWriter(&out, &errs, "/r", false)); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, f := range files {
		want.WriteString("written    " + f.Path + "\n")
	}
	want.WriteString("The unit runs " + DefaultBinary + ".\n" +
		"not run under --root /r: systemctl daemon-reload\nnot run under --root /r: systemctl enable gpusplit.service\nnot run under --root /r: udevadm control --reload\n")
	if out.String() != want.String() || errs.String() != "warning: a note\n" {
		t.Errorf("install printed:\n%s\nwarned:\n%s\nwant:\n%s", out.String(), errs.String(), want.String())
	}

	out.Reset()
	errs.Reset()
	quiet := StepWriter(&out, &errs, "/r", true)
	quiet(Step{Warnings: []string{"w"}})
	quiet(Step{Change: &Change{Action: "written", Path: "/p"}})
	quiet(Step{Command: &Command{Command: "systemctl enable gpusplit.service", Ran: true, Error: "exit status 1"}})
	quiet(Step{Command: &Command{Command: "udevadm control --reload"}})
	if out.String() != "" || errs.String() != "warning: w\nwarning: systemctl enable gpusplit.service: exit status 1\n" {
		t.Errorf("quiet printed %q, warned %q", out.String(), errs.String())
	}

	removal.Reset()
	doc = RemoveCheck(h)
	doc.WriteRemoval(&removal)
	want.Reset()
	for _, f := range doc.Files {
		want.WriteString("remove     " + f.Path + "\n")
	}
	if len(doc.Files) != len(files) || removal.String() != want.String() {
		t.Errorf("the check of a remove:\n%s", removal.String())
	}
}
