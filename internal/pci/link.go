package pci

import (
	"fmt"
	"strconv"
	"strings"
)

// Link is a device's PCIe link: what it trained to and what it can do.
type Link struct {
	Speed    string `json:"speed"`     // current_link_speed, as sysfs writes it: "32.0 GT/s PCIe"; "" when not PCIe
	Width    int    `json:"width"`     // current_link_width: lanes; 0 when unknown
	MaxSpeed string `json:"max_speed"` // max_link_speed, as sysfs writes it
	MaxWidth int    `json:"max_width"` // max_link_width
	Gen      int    `json:"gen"`       // PCIe generation of Speed; 0 when unknown
	MaxGen   int    `json:"max_gen"`   // PCIe generation of MaxSpeed
}

// generations maps GT/s per lane to the PCIe generation.
var generations = []struct {
	gts float64
	gen int
}{{2.5, 1}, {5, 2}, {8, 3}, {16, 4}, {32, 5}, {64, 6}, {128, 7}}

// ParseLinkSpeed reads a link speed as sysfs writes it: "16.0 GT/s PCIe" (kernel 5.7 and
// later), "16 GT/s" or "8 GT/s" (older), and returns the transfer rate per lane and the
// PCIe generation. "Unknown" and "Unknown speed" (a link that is down) give an error.
func ParseLinkSpeed(s string) (gts float64, gen int, err error) {
	s = strings.TrimSpace(s)
	num, rest, ok := strings.Cut(s, " GT/s")
	if !ok || (rest != "" && rest != " PCIe") {
		return 0, 0, fmt.Errorf("link speed %q is not \"N GT/s\"", s)
	}
	gts, err = strconv.ParseFloat(num, 64)
	if err != nil || gts <= 0 || strings.ContainsAny(num, "eE+-xXpPnN_") {
		return 0, 0, fmt.Errorf("link speed %q is not \"N GT/s\"", s)
	}
	for _, g := range generations {
		if g.gts == gts {
			return gts, g.gen, nil
		}
	}
	return gts, 0, nil
}

// String prints the link compactly: "Gen5 x16" or "Gen1 x16 (max Gen5 x16)".
func (l Link) String() string {
	cur := linkText(l.Gen, l.Speed, l.Width)
	max := linkText(l.MaxGen, l.MaxSpeed, l.MaxWidth)
	switch {
	case cur == "" && max == "":
		return ""
	case cur == max || max == "":
		return cur
	case cur == "":
		return "down (max " + max + ")"
	}
	return cur + " (max " + max + ")"
}

func linkText(gen int, speed string, width int) string {
	if speed == "" && width == 0 {
		return ""
	}
	s := "?"
	if gen > 0 {
		s = fmt.Sprintf("Gen%d", gen)
	} else if speed != "" {
		s = speed
	}
	if width > 0 {
		s += fmt.Sprintf(" x%d", width)
	}
	return s
}
