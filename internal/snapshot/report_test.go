package snapshot

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	r := NewReport("s.tar.gz", &Summary{Root: "/", Files: 2, Bytes: 20 << 10, ArchiveBytes: 300,
		Redacted: []Redaction{{File: "/etc/pve/qemu-server/131.conf", Replaced: map[string]int{"args": 2, "description": 1}}},
		Refused:  []string{"a: fifo", "b: too big"}})
	data, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(data), `"archive":"s.tar.gz"`) || !strings.Contains(string(data), `"unreadable":[]`) || !strings.Contains(string(data), `"files_left_out":[]`) {
		t.Errorf("%s %v", data, err)
	}
	var text, warn strings.Builder
	r.WriteText(&text)
	r.WriteWarnings(&warn)
	want := "captured /: 2 files, 0 links, 0 directories, 20 KiB of contents, 300 bytes compressed, into s.tar.gz\n" +
		"left out of 1 captured files (keys and counts; the values are nowhere in the archive):\n" +
		"  /etc/pve/qemu-server/131.conf: replaced: args ×2, description\n"
	if text.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", text.String(), want)
	}
	if warn.String() != "warning: 2 files left out for what they are: a: fifo; b: too big\n" {
		t.Errorf("warnings: %q", warn.String())
	}
}
