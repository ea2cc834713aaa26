package plan

import (
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
