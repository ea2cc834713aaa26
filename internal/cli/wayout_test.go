package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The errors of issue 31 ("Errors without the way out"): each says what to do in at most
// two lines, with the details under -v or in the JSON.

// runExit runs gpusplit as main does, and returns the exit code and standard error.
func runExit(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := execute(New(&out, &errOut), args, &errOut)
	return code, out.String(), errOut.String()
}

// wayOut fails the test when msg, an error as printed, runs past two lines.
func wayOut(t *testing.T, what, msg string) {
	t.Helper()
	if n := strings.Count(strings.TrimSuffix(msg, "\n"), "\n") + 1; n > 2 {
		t.Errorf("%s: %d lines, at most 2:\n%s", what, n, msg)
	}
}

// A rollback refused for a journal of another boot says so in two lines with the way
// out; -v adds each field with the journal's value, the host's and why; -o json has
// them among the problems.
func TestRollbackRefusalIsShort(t *testing.T) {
	dir, _ := applied(t)
	writeFile(t, dir, "proc/sys/kernel/random/boot_id", "77e0d1c2-0000-4000-8000-000000000001\n")
	detail := "boot id: the journal has 0b2f6c1e-5d7a-4c43-9f1e-2a8d3b6e7c10, the host 77e0d1c2-0000-4000-8000-000000000001"

	code, _, stderr := runExit(t, "--root", dir, "rollback", "--yes")
	if code != 1 || !strings.Contains(stderr, "(boot id)") || !strings.Contains(stderr, "--force") || !strings.Contains(stderr, "-v") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	wayOut(t, "the refusal", stderr)
	if len(stderr) > 300 || strings.Contains(stderr, detail) {
		t.Errorf("the refusal carries its details without -v (%d characters):\n%s", len(stderr), stderr)
	}

	code, _, stderr = runExit(t, "-v", "--root", dir, "rollback", "--yes")
	if code != 1 || !strings.Contains(stderr, "  "+detail) || !strings.Contains(stderr, "the host has rebooted since that apply") {
		t.Errorf("-v: exit %d:\n%s", code, stderr)
	}

	code, out, _ := runExit(t, "--root", dir, "rollback", "--yes", "-o", "json")
	var doc struct{ Problems []string }
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 1 || len(doc.Problems) != 1 || !strings.HasPrefix(doc.Problems[0], detail) {
		t.Errorf("-o json: exit %d, %v: %s", code, err, out)
	}
}

// Nothing applied is nothing to roll back, which is no failure: exit 0, in text and in
// JSON (applied null).
func TestRollbackWithoutJournal(t *testing.T) {
	freshDemo(t)
	code, out, stderr := runExit(t, "--demo", "rollback", "--yes")
	// Standard error holds the demo's notices alone.
	if code != 0 || !strings.Contains(out, "nothing to roll back") || strings.Contains(stderr, "gpusplit:") {
		t.Errorf("exit %d:\n%s%s", code, out, stderr)
	}
	code, out, _ = runExit(t, "--demo", "rollback", "--dry-run", "-o", "json")
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 || doc["applied"] != nil || doc["journal_devices"] != 0.0 {
		t.Errorf("-o json: exit %d, %v: %s", code, err, out)
	}
}

// doctor --kernel-log refuses a file that holds no kernel log record.
func TestDoctorRefusesJunkLog(t *testing.T) {
	freshDemo(t)
	log := filepath.Join(t.TempDir(), "junk.log")
	if err := os.WriteFile(log, []byte("hello\nnot a kernel log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runExit(t, "--demo", "doctor", "--kernel-log", log)
	if code != 1 || out != "" || !strings.Contains(stderr, "gpusplit: --kernel-log "+log+" holds no kernel log record") || !strings.Contains(stderr, "journalctl -k") {
		t.Errorf("exit %d:\n%s%s", code, out, stderr)
	}
	wayOut(t, "--kernel-log junk", stderr)
	code, _, stderr = runExit(t, "--demo", "doctor", "--only", "iommu-of")
	if code != 1 || !strings.HasSuffix(stderr, "(did you mean iommu-off?); gpusplit doctor --help lists the checks and groups\n") {
		t.Errorf("--only iommu-of: exit %d: %s", code, stderr)
	}
	wayOut(t, "--only iommu-of", stderr)
}

// A help topic is text: help -o json refuses in one line and exits 1, with nothing on
// standard output that a script could take for a document.
func TestHelpRefusesJSON(t *testing.T) {
	for _, args := range [][]string{{"help", "selectors", "-o", "json"}, {"-o", "json", "help", "doctor"}, {"help", "-o", "json"}} {
		code, out, stderr := runExit(t, args...)
		if code != 1 || out != "" || !strings.Contains(stderr, "help has no JSON") {
			t.Errorf("%v: exit %d, %q, %s", args, code, out, stderr)
		}
		wayOut(t, strings.Join(args, " "), stderr)
	}
	if code, out, _ := runExit(t, "help", "selectors"); code != 0 || !strings.Contains(out, "Selectors choose devices") {
		t.Errorf("help selectors: exit %d\n%s", code, out)
	}
}

// A missing or unknown guest is answered with the guests of this node.
func TestGuestErrorsListTheGuests(t *testing.T) {
	freshDemo(t) // a command that writes makes the scratch copy
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"pve", "vm-layout"}, "--vm names the VM to lay out; this node's VMs: 131 (train01)"},
		{[]string{"pve", "vm-layout", "--vm", "999", "--dry-run"}, "no VM 999 on this node (/etc/pve/qemu-server/999.conf does not exist); this node's VMs: 131 (train01)"},
		{[]string{"pve", "p2p-clique"}, "this node's VMs: 131 (train01)"},
		{[]string{"pve", "hook", "show", "--ct", "999"}, "no container 999 on this node (/etc/pve/lxc/999.conf does not exist); this node's containers: 129 (infer01)"},
		{[]string{"pve", "hook", "install"}, "--vm ID or --ct ID names the guest; this node's VMs: 131 (train01); this node's containers: 129 (infer01)"},
	} {
		code, out, stderr := runExit(t, append([]string{"--demo"}, c.args...)...)
		// The demo's notices of its scratch copy are not the error.
		var lines []string
		for l := range strings.Lines(stderr) {
			if !strings.HasPrefix(l, "demo: ") {
				lines = append(lines, l)
			}
		}
		stderr = strings.Join(lines, "")
		if code != 1 || out != "" || stderr != "gpusplit: "+c.want+"\n" && !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q\n%s\nwant %s", c.args, code, out, stderr, c.want)
		}
		wayOut(t, strings.Join(c.args, " "), stderr)
	}
}

// One malformed map line no longer hides every mapping: pve mappings lists the others
// and names the line, in the table and in the JSON, with exit status 0.
func TestMappingsListPastABadLine(t *testing.T) {
	root, _ := pveRoot(t)
	edit(t, root, "etc/pve/mapping/pci.cfg", func(s string) string {
		return strings.Replace(s, "path=0000:c1:00.0", "path=0000:C1:00.0", 1)
	})
	code, out, stderr := runExit(t, "--root", root, "pve", "mappings")
	if code != 0 || strings.Count(out, "RTX PRO 6000") != 8 || !strings.Contains(out, "a6000-ws  kpro5  0000:41:00.0") {
		t.Fatalf("exit %d:\n%s%s", code, out, stderr)
	}
	if !strings.Contains(out, "1 line not listed") || !strings.Contains(out, "problem: /etc/pve/mapping/pci.cfg:3: mapping \"a6000-ws\"") || strings.Contains(out, "0000:C1:00.0  ") {
		t.Errorf("the bad line is not named:\n%s", out)
	}
	code, out, _ = runExit(t, "--root", root, "pve", "mappings", "-o", "json")
	var doc struct {
		Entries  []json.RawMessage
		Problems []string
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 || len(doc.Entries) != 14 || len(doc.Problems) != 1 || !strings.HasPrefix(doc.Problems[0], "/etc/pve/mapping/pci.cfg:3: ") {
		t.Errorf("-o json: exit %d, %v, %d entries, problems %v", code, err, len(doc.Entries), doc.Problems)
	}
}
