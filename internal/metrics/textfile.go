package metrics

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpusplit/gpusplit/internal/atomicfile"
)

// TextfileName is the file WriteTextfile writes in node_exporter's textfile directory:
// the collector reads every *.prom file there.
const TextfileName = "gpusplit.prom"

// DefaultTextfileDir is where Debian's node_exporter (prometheus-node-exporter) reads
// textfiles, its --collector.textfile.directory.
const DefaultTextfileDir = "/var/lib/prometheus/node-exporter"

// WriteTextfile writes the set to dir/gpusplit.prom, replacing the file atomically:
// node_exporter, which reads it at every scrape, sees the last collection or the one
// before, never half of one. The temporary file is hidden (.gpusplit.prom.tmp…), which
// the collector, reading *.prom alone, passes over. It returns the file's path, which
// the set keeps too (Textfile).
func WriteTextfile(dir string, s *Set) (string, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("%w; it is node_exporter's --collector.textfile.directory (Debian's: %s)", err, DefaultTextfileDir)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory; name node_exporter's --collector.textfile.directory (Debian's: %s)", dir, DefaultTextfileDir)
	}
	var b bytes.Buffer
	if err := s.WriteText(&b); err != nil {
		return "", err
	}
	p := filepath.Join(dir, TextfileName)
	// node_exporter runs as its own user: the file is for every user to read.
	if err := atomicfile.Write(p, b.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("writing %s: %w", p, err)
	}
	s.Textfile = p
	return p, nil
}
