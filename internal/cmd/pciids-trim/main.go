// Command pciids-trim cuts a full pci.ids file from pciutils down to the vendors
// gpusplit cares about, keeping the whole class list. Its output is the
// embedded fallback database of package pciids.
//
// Usage, from the module root:
//
//	go run ./internal/cmd/pciids-trim -in /path/to/pci.ids -out internal/pciids/pci.ids [-commit <pciids commit>]
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// detail says how much of a vendor's entry is kept.
type detail int

const (
	devices    detail = iota + 1 // vendor and device lines
	subsystems                   // vendor, device and subsystem lines
)

// vendor is one kept vendor.
type vendor struct {
	id   string // 4 lower-case hex digits, as in pci.ids
	keep detail
}

// keep lists the vendors of the embedded database, in the order the header
// names them.
var keep = []vendor{
	{"10de", subsystems}, // NVIDIA
	{"1002", devices},    // AMD/ATI
	{"1022", devices},    // AMD
	{"8086", devices},    // Intel
	{"1a03", subsystems}, // ASPEED
	{"15b3", subsystems}, // Mellanox
	{"1000", subsystems}, // Broadcom / LSI
	{"10b5", subsystems}, // PLX
	{"1b36", subsystems}, // Red Hat (QEMU)
	{"1af4", subsystems}, // Red Hat (virtio)
	{"144d", subsystems}, // Samsung
	{"1344", subsystems}, // Micron
	{"14e4", subsystems}, // Broadcom
	{"1d0f", subsystems}, // Amazon
	{"1414", subsystems}, // Microsoft
}

func main() {
	in := flag.String("in", "", "full upstream pci.ids to read (required)")
	out := flag.String("out", "", "trimmed file to write (required)")
	commit := flag.String("commit", "", "pciutils/pciids commit the input comes from, recorded in the header (optional)")
	flag.Parse()
	if *in == "" || *out == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*in, *out, *commit); err != nil {
		fmt.Fprintln(os.Stderr, "trim:", err)
		os.Exit(1)
	}
}

func run(in, out, commit string) error {
	src, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := trim(&buf, bytes.NewReader(src), keep, commit); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// trim copies the parts of the pci.ids file r that vendors selects to w,
// behind a header made of the upstream header comment and a note on what
// was kept. Upstream comments other than the header are dropped.
func trim(w io.Writer, r io.Reader, vendors []vendor, commit string) error {
	want := make(map[string]detail, len(vendors))
	for _, v := range vendors {
		want[v.id] = v.keep
	}

	var (
		header   []string // leading comment block, up to the first non-comment line
		inHeader = true
		version  string
		body     []string
		names    = make(map[string]string) // kept vendor id -> name
		cur      detail                    // detail of the current vendor, 0 when dropped
		classes  bool                      // inside the class list
		nClass   int
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if inHeader {
			if strings.HasPrefix(line, "#") {
				header = append(header, line)
				if v, ok := strings.CutPrefix(strings.TrimSpace(strings.TrimPrefix(line, "#")), "Version:"); ok {
					version = strings.TrimSpace(v)
				}
				continue
			}
			inHeader = false
		}
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimLeft(line, " \t"), "#") {
			continue
		}
		switch {
		case strings.HasPrefix(line, "C "):
			classes = true
			cur = 0
			nClass++
			body = append(body, line)
		case !strings.HasPrefix(line, "\t"):
			// Vendor line (or something unknown at the top level).
			classes = false
			cur = 0
			if len(line) >= 4 {
				if d, ok := want[line[:4]]; ok {
					cur = d
					names[line[:4]] = strings.TrimSpace(line[4:])
					body = append(body, line)
				}
			}
		case classes:
			body = append(body, line)
		case strings.HasPrefix(line, "\t\t"):
			if cur >= subsystems {
				body = append(body, line)
			}
		default:
			if cur >= devices {
				body = append(body, line)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if version == "" {
		return errors.New("no \"Version:\" line in the header comment")
	}
	if nClass == 0 {
		return errors.New("no class list (\"C\" lines)")
	}
	var missing []string
	for _, v := range vendors {
		if _, ok := names[v.id]; !ok {
			missing = append(missing, v.id)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("vendors not found: %s", strings.Join(missing, ", "))
	}

	bw := bufio.NewWriter(w)
	for _, l := range header {
		fmt.Fprintln(bw, l)
	}
	if len(header) == 0 || strings.TrimSpace(header[len(header)-1]) != "#" {
		fmt.Fprintln(bw, "#")
	}
	fmt.Fprintln(bw, "#	TRIMMED COPY for gpusplit, cut from the upstream file above")
	if commit != "" {
		fmt.Fprintf(bw, "#	(Version %s, pciutils/pciids commit %s).\n", version, commit)
	} else {
		fmt.Fprintf(bw, "#	(Version %s).\n", version)
	}
	fmt.Fprintln(bw, "#	The licence terms above apply unchanged to this copy: GPL-2.0-or-later")
	fmt.Fprintln(bw, "#	or BSD-3-Clause. It keeps only the vendors listed below and the whole")
	fmt.Fprintln(bw, "#	class list; upstream comments are dropped.")
	fmt.Fprintln(bw, "#	Regenerate, from the module root, with:")
	fmt.Fprintln(bw, "#	  go run ./internal/cmd/pciids-trim -in pci.ids -out internal/pciids/pci.ids")
	fmt.Fprintln(bw, "#")
	fmt.Fprintln(bw, "#	Kept vendors:")
	for _, v := range vendors {
		what := "devices and subsystems"
		if v.keep == devices {
			what = "devices only"
		}
		fmt.Fprintf(bw, "#	  %s  %s (%s)\n", v.id, names[v.id], what)
	}
	fmt.Fprintln(bw, "#")
	fmt.Fprintln(bw)
	for _, l := range body {
		fmt.Fprintln(bw, l)
	}
	return bw.Flush()
}
