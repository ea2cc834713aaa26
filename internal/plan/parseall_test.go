package plan

import (
	"errors"
	"strings"
	"testing"
)

// Every problem of a split.toml comes in one run, each with its line and column: a file
// fixed one error per run took as many runs as it had mistakes.
func TestParseFileReportsEveryProblem(t *testing.T) {
	const file = `rest = "elsewhere"
colour = "blue"

[[group]]
name = "inference"
select = ["numa:0", "bogus:1"]
containers = [12]

[[group]]
name = "inference"
select = ["numa:1"]
driver = "vfio-pci"
concurrency = -1
vm = [131]
`
	_, err := ParseFile("split.toml", []byte(file))
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{
		`split.toml:2:1: unknown key "colour"`,
		`split.toml:14:1: unknown key "group.vm"`,
		`split.toml:1:1: rest = "elsewhere"`,
		`split.toml:6:21: group "inference": `,
		`split.toml:7:15: group "inference": 12 is not a Proxmox container id`,
		`split.toml:5:8: a group and a group are both named "inference"`,
		`split.toml:13:15: group "inference": concurrency = -1`,
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Errorf("%d problems, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if i >= len(lines) || !strings.HasPrefix(lines[i], w) {
			t.Errorf("problem %d: want %s…\n%v", i+1, w, err)
		}
	}
}

// A file that breaks its rules is still checked against the host: the mistakes of the
// file and the names the host lacks come in the same run, and what ParseFile already
// named (a selector that does not parse, an id out of range) is not named twice.
func TestInvalidFileIsStillChecked(t *testing.T) {
	const file = `colour = "blue"

[[group]]
name = "vms"
select = ["numa:7", "bogus:1"]
driver = "vfio-pci"
vms = [132, 12]
`
	_, err := ParseFile("split.toml", []byte(file))
	var invalid *InvalidFileError
	if !errors.As(err, &invalid) || invalid.File == nil {
		t.Fatalf("ParseFile: %v (%T), want an InvalidFileError with the file", err, err)
	}
	n := names{drivers: map[string]bool{"vfio-pci": true}, vms: map[int]bool{131: true}}
	got := errors.Join(err, invalid.File.Check(demo(t), n)).Error()
	want := []string{
		`split.toml:1:1: unknown key "colour"`,
		`split.toml:5:21: group "vms": `,
		`split.toml:7:13: group "vms": 12 is not a Proxmox VM id`,
		`split.toml:5:11: group "vms": selector numa:7 matches no GPU`,
		`split.toml:7:8: group "vms": no VM 132`,
	}
	lines := strings.Split(got, "\n")
	if len(lines) != len(want) {
		t.Errorf("%d problems, want %d:\n%s", len(lines), len(want), got)
	}
	for i, w := range want {
		if i >= len(lines) || !strings.HasPrefix(lines[i], w) {
			t.Errorf("problem %d: want %s…\n%s", i+1, w, got)
		}
	}
}
