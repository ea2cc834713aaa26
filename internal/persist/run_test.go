package persist

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
)

// steps records what install or remove told its caller, one line a step.
func steps(out *[]string) func(Step) {
	return func(s Step) {
		switch {
		case s.Warnings != nil:
			*out = append(*out, "warn "+strings.Join(s.Warnings, "; "))
		case s.Change != nil:
			*out = append(*out, s.Change.Action+" "+s.Change.Path)
		case s.Runs != "":
			*out = append(*out, "runs "+s.Runs)
		case s.Command != nil:
			*out = append(*out, fmt.Sprintf("command %s ran=%v", s.Command.Command, s.Command.Ran))
		}
	}
}

// Install says the binary's notes before the first write, then each file, then the
// binary, then the commands, which under another root it does not run; remove disables
// the unit before the files go and reloads after. A dry run or a stop writes nothing
// and tells of nothing.
func TestInstallBootAndUninstall(t *testing.T) {
	h, err := host.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, files := demoFiles(t)
	bf := &Boot{Files: files, Binary: Binary{Path: DefaultBinary, Resolved: DefaultBinary, Notes: []string{"a note"}}, Checked: true}

	var told []string
	doc, err := bf.InstallBoot(h, files, true, steps(&told))
	if err != nil || len(told) != 0 || len(Installed(h)) != 0 || !doc.DryRun || len(doc.Files) != len(files) {
		t.Fatalf("dry run: %v, told %q, %d files installed, %+v", err, told, len(Installed(h)), doc)
	}

	refused := *bf
	refused.Refused = &BinaryError{DefaultBinary, []string{"not root's"}}
	for _, dry := range []bool{true, false} {
		doc, err := refused.InstallBoot(h, files, dry, steps(&told))
		if err == nil || !strings.Contains(err.Error(), "nothing was written") || !strings.Contains(err.Error(), "not root's") || len(told) != 0 || len(Installed(h)) != 0 || len(doc.Problems) != 1 {
			t.Fatalf("a refused binary, dry run %v: %v, told %q, %+v", dry, err, told, doc)
		}
	}

	doc, err = bf.InstallBoot(h, files, false, steps(&told))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"warn a note"}
	for _, f := range files {
		want = append(want, "written "+f.Path)
	}
	want = append(want, "runs "+DefaultBinary, "command systemctl daemon-reload ran=false", "command systemctl enable gpusplit.service ran=false", "command udevadm control --reload ran=false")
	if strings.Join(told, "\n") != strings.Join(want, "\n") {
		t.Errorf("install told:\n%s\nwant:\n%s", strings.Join(told, "\n"), strings.Join(want, "\n"))
	}
	if len(doc.Changes) != len(files) || len(doc.Commands) != 3 || len(Installed(h)) != len(files) {
		t.Errorf("install: %+v", doc)
	}

	told = nil
	doc, err = Uninstall(h, steps(&told))
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"command systemctl disable gpusplit.service ran=false"}
	for _, p := range Paths {
		want = append(want, "removed "+p)
	}
	want = append(want, "command systemctl daemon-reload ran=false", "command udevadm control --reload ran=false")
	if strings.Join(told, "\n") != strings.Join(want, "\n") {
		t.Errorf("remove told:\n%s\nwant:\n%s", strings.Join(told, "\n"), strings.Join(want, "\n"))
	}
	if len(doc.Commands) != 3 || len(Installed(h)) != 0 || len(doc.Notes) == 0 || !strings.Contains(doc.Notes[0], "is kept") {
		t.Errorf("remove: %+v", doc)
	}
}
