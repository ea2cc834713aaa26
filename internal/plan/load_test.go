package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/pci"
)

func TestParseChoices(t *testing.T) {
	c, err := ParseChoices([]string{"numa:1", "0000:81:00.0,count:2"})
	if err != nil || len(c) != 2 || len(c[1]) != 2 {
		t.Errorf("%v %v", c, err)
	}
	if _, err := ParseChoices([]string{"numa:1", ""}); !errors.Is(err, ErrNoSelector) {
		t.Errorf("an empty choice: %v", err)
	}
	if _, err := ParseChoices([]string{"bogus:1"}); err == nil || errors.Is(err, ErrNoSelector) {
		t.Errorf("a bad selector: %v", err)
	}
}

func TestFromFileHolding(t *testing.T) {
	const pools = "[[pool]]\nname = \"shared\"\nselect = [\"numa:1\"]\nmapping = \"pro6000-numa1\"\nvms = [131]\n"
	a, _ := pci.ParseAddress("0000:81:00.0")
	asked := 0
	held := func() (map[pci.Address]int, error) { asked++; return map[pci.Address]int{a: 131}, nil }
	d, f, err := FromFile("split.toml", []byte(pools), held)
	if err != nil || f == nil || asked != 1 || d.Holding[a] != 131 {
		t.Fatalf("%+v %v asked %d", d, err, asked)
	}
	if d, _, err := FromFile("split.toml", []byte(pools), nil); err != nil || d.Holding != nil {
		t.Errorf("at rest: %+v %v", d, err)
	}
	broken := func() (map[pci.Address]int, error) { return nil, errors.New("no reservations") }
	if _, _, err := FromFile("split.toml", []byte(pools), broken); err == nil || !strings.HasPrefix(err.Error(), "which VMs hold the pools' GPUs: ") {
		t.Errorf("%v", err)
	}
	asked = 0
	if _, _, err := FromFile("split.toml", []byte("[[group]]\nname = \"g\"\nselect = [\"numa:0\"]\n"), held); err != nil || asked != 0 {
		t.Errorf("no pool, asked %d: %v", asked, err)
	}
}
