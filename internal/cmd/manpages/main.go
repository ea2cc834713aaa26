// Command manpages writes gpusplit's man pages, one per command, from the commands
// themselves: their help, flags and examples, and the exit statuses and files that
// internal/cli declares for each. scripts/build-deb runs it; the pages are built, never
// kept in the repository, so they cannot fall behind the commands.
//
//	go run ./internal/cmd/manpages [-version V] [-date YYYY-MM-DD] DIR
//
// It writes DIR/gpusplit.1, DIR/gpusplit-topo.1, … and DIR/gpusplit-cuda.1, uncompressed.
// Without -date the date is SOURCE_DATE_EPOCH's, so that a rebuild gives the same pages,
// or else today's.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gpusplit/gpusplit/internal/cli"
)

func main() {
	version := flag.String("version", "", "the version the pages name (default: the one gpusplit reports)")
	date := flag.String("date", "", "the date the pages carry, YYYY-MM-DD (default: SOURCE_DATE_EPOCH's, or today)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: manpages [-version V] [-date YYYY-MM-DD] DIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	n, err := write(flag.Arg(0), *version, *date)
	if err != nil {
		fmt.Fprintf(os.Stderr, "manpages: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("manpages: %d pages in %s\n", n, flag.Arg(0))
}

// write writes every page into dir and returns how many it wrote.
func write(dir, version, date string) (int, error) {
	root := cli.New(io.Discard, io.Discard)
	if version == "" {
		version = root.Version
	}
	if date == "" {
		t := time.Now()
		if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
			sec, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number of seconds", s)
			}
			t = time.Unix(sec, 0)
		}
		date = t.UTC().Format(time.DateOnly)
	} else if _, err := time.Parse(time.DateOnly, date); err != nil {
		return 0, fmt.Errorf("-date %q: give the date as YYYY-MM-DD", date)
	}
	m := Meta{Date: date, Version: version}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	pages := map[string]string{"gpusplit-cuda": CUDAPage(m)}
	for _, c := range Commands(root) {
		pages[PageName(c)] = Page(c, m)
	}
	for name, text := range pages {
		if err := os.WriteFile(filepath.Join(dir, name+".1"), []byte(text), 0o644); err != nil {
			return 0, err
		}
	}
	return len(pages), nil
}
