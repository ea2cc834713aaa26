package health

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// record is what a post-stop writes for a GPU whose reset failed.
func record(a pci.Address) Record {
	return Record{
		Device: a, GPU: a.Slot(), Guest: 131, Phase: "post-stop", Driver: "nvidia",
		Time: time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC),
		Evidence: []Evidence{
			{ConfigSpace, a.String() + ": config space reads ffff"},
			{LinkDown, a.String() + ": the PCIe link is down: current_link_width reads 0"},
		},
		Baseline: sampleBaseline,
	}
}

// listed lists the records, failing the test when listing takes longer than a read of
// a few files can.
func listed(t *testing.T, h *host.Host) []Record {
	t.Helper()
	type result struct {
		r   []Record
		err error
	}
	done := make(chan result)
	go func() {
		r, err := List(h)
		done <- result{r, err}
	}()
	select {
	case res := <-done:
		if res.err != nil {
			t.Fatal(res.err)
		}
		if res.r == nil {
			t.Fatal("List returned nil, not an empty list")
		}
		return res.r
	case <-time.After(10 * time.Second):
		t.Fatal("List hangs")
	}
	return nil
}

// A record survives its round trip whole, in a directory 0700 and a file 0600; the
// records are listed in address order; a release removes one, and a second release
// says there is none.
func TestQuarantineRoundTrip(t *testing.T) {
	root, h := sample(t)
	if got := listed(t, h); len(got) != 0 {
		t.Fatalf("the sample host has records: %+v", got)
	}
	second, first := record(pci.Address{Bus: 0x81}), record(pci.Address{Bus: 0x01, Function: 1})
	first.GPU = pci.Address{Bus: 0x01}
	for _, r := range []Record{second, first} {
		if err := Quarantine(h, r); err != nil {
			t.Fatal(err)
		}
	}
	got := listed(t, h)
	if want := []Record{first, second}; !reflect.DeepEqual(got, want) {
		t.Errorf("listed\n%+v\nwant\n%+v", got, want)
	}
	r, err := Read(h, second.Device)
	if err != nil || !reflect.DeepEqual(r, second) {
		t.Errorf("Read = %+v, %v", r, err)
	}
	dir := filepath.Join(root, Dir)
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the directory: %v, %v; want mode 0700", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "0000:81:00.0.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the record: %v, %v; want mode 0600", fi.Mode(), err)
	}
	// A second quarantine of a device replaces its record.
	second.Guest = 140
	if err := Quarantine(h, second); err != nil {
		t.Fatal(err)
	}
	if r, _ := Read(h, second.Device); r.Guest != 140 {
		t.Errorf("the record was not replaced: %+v", r)
	}
	if err := Release(h, second.Device); err != nil {
		t.Fatal(err)
	}
	if got := listed(t, h); len(got) != 1 || got[0].Device != first.Device {
		t.Errorf("after the release: %+v", got)
	}
	if err := Release(h, second.Device); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "0000:81:00.0 is not quarantined") {
		t.Errorf("a second release: %v", err)
	}
	if _, err := Read(h, second.Device); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read of a released device: %v", err)
	}
	// Evidence nil is written as [], and read back as [].
	bare := Record{Device: pci.Address{Bus: 0x91}}
	if err := Quarantine(h, bare); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "0000:91:00.0.json")); !strings.Contains(string(b), `"evidence": []`) {
		t.Errorf("no evidence is not []:\n%s", b)
	}
}

// A record that cannot be read is listed, damaged, with its device: still quarantined.
// A FIFO and an oversized file are refused without hanging; a record that names
// another device is damaged too; names that are not ADDR.json are passed over.
func TestListDamaged(t *testing.T) {
	root, h := sample(t)
	for _, a := range []pci.Address{{Bus: 0x11}, {Bus: 0xe1}} {
		if err := Quarantine(h, record(a)); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(root, Dir)
	put := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	put("0000:01:00.0.json", "{not json")
	if err := syscall.Mkfifo(filepath.Join(dir, "0000:61:00.0.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	put("0000:71:00.0.json", strings.Repeat(" ", 2<<20)+"{}") // past host.Host's cap
	put("0000:81:00.0.json", `{"device": "0000:81:00.0", "phase": "`+strings.Repeat("x", 100<<10)+`"}`)
	put("0000:91:00.0.json", `{"device": "0000:e1:00.0"}`)
	put(".0000:e1:00.0.json.tmp123", "{")
	// Other spellings of an address than sysfs's: not a record, not the same twice.
	put("0000:E1:00.0.json", "{")
	put("e1:00.0.json", "{")
	put("notes.json", "{")
	put("0000:f1:00.0.txt", "{")

	got := listed(t, h)
	want := map[string]string{
		"0000:01:00.0": "is not a record",
		"0000:11:00.0": "",
		"0000:61:00.0": "a FIFO",
		"0000:71:00.0": "larger than",
		"0000:81:00.0": "more than a record gpusplit writes",
		"0000:91:00.0": "is the record of 0000:e1:00.0",
		"0000:e1:00.0": "",
	}
	if len(got) != len(want) {
		t.Errorf("listed %d records, want %d: %+v", len(got), len(want), got)
	}
	for i, r := range got {
		w, ok := want[r.Device.String()]
		switch {
		case !ok:
			t.Errorf("listed %s", r.Device)
		case w == "" && r.Damaged != "":
			t.Errorf("%s damaged: %s", r.Device, r.Damaged)
		case w != "" && !strings.Contains(r.Damaged, w):
			t.Errorf("%s: damaged %q, want %q", r.Device, r.Damaged, w)
		case w != "" && (r.GPU != r.Device || r.Evidence == nil):
			t.Errorf("%s: a damaged record %+v", r.Device, r)
		}
		if i > 0 && got[i-1].Device.Compare(r.Device) >= 0 {
			t.Errorf("not in address order: %s after %s", r.Device, got[i-1].Device)
		}
	}
	if err := Quarantine(h, got[0]); err == nil {
		t.Error("a damaged record was written back")
	}
}

// The records' directory: one of this user's with looser permissions is made 0700;
// another user's, a link, or a file in its place is refused, and nothing is written.
func TestRecordDir(t *testing.T) {
	r := record(pci.Address{Bus: 0x01})
	t.Run("loose permissions", func(t *testing.T) {
		root, h := sample(t)
		dir := filepath.Join(root, Dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o777)
		if err := Quarantine(h, r); err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
			t.Errorf("the directory is %v, want 0700", fi.Mode())
		}
	})
	t.Run("another owner", func(t *testing.T) {
		root, h := sample(t)
		dir := filepath.Join(root, Dir)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatalf("this test needs root to give the directory to another user: %v", err)
		}
		err := Quarantine(h, r)
		if err == nil || !strings.Contains(err.Error(), "belongs to uid") {
			t.Fatalf("a directory of another user: %v", err)
		}
		if _, err := os.Stat(filepath.Join(root, RecordPath(r.Device))); err == nil {
			t.Error("a record was written in it")
		}
	})
	t.Run("a link", func(t *testing.T) {
		root, h := sample(t)
		elsewhere := t.TempDir()
		os.MkdirAll(filepath.Join(root, "run/gpusplit"), 0o755)
		if err := os.Symlink(elsewhere, filepath.Join(root, Dir)); err != nil {
			t.Fatal(err)
		}
		if err := Quarantine(h, r); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Errorf("a link in the directory's place: %v", err)
		}
		if names, _ := os.ReadDir(elsewhere); len(names) > 0 {
			t.Errorf("written through the link: %v", names)
		}
	})
	t.Run("a file", func(t *testing.T) {
		root, h := sample(t)
		os.MkdirAll(filepath.Join(root, "run/gpusplit"), 0o755)
		if err := os.WriteFile(filepath.Join(root, Dir), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Quarantine(h, r); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Errorf("a file in the directory's place: %v", err)
		}
	})
	t.Run("a snapshot", func(t *testing.T) {
		h, err := samplehost.Open()
		if err != nil {
			t.Fatal(err)
		}
		if err := Quarantine(h, r); !errors.Is(err, host.ErrReadOnly) {
			t.Errorf("a snapshot: %v", err)
		}
		if err := Release(h, r.Device); !errors.Is(err, host.ErrReadOnly) {
			t.Errorf("a release on a snapshot: %v", err)
		}
		if got := listed(t, h); len(got) != 0 {
			t.Errorf("the snapshot has records: %+v", got)
		}
	})
}

// A release removes the record's name, never what a link there points to.
func TestReleaseLink(t *testing.T) {
	root, h := sample(t)
	if err := Quarantine(h, record(pci.Address{Bus: 0x11})); err != nil {
		t.Fatal(err)
	}
	// A link as the host sees it: its absolute target lies inside the root.
	target := filepath.Join(root, "etc/precious")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(target) })
	link := filepath.Join(root, RecordPath(pci.Address{Bus: 0x01}))
	if err := os.Symlink("/etc/precious", link); err != nil {
		t.Fatal(err)
	}
	if err := Release(h, pci.Address{Bus: 0x01}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(link); err == nil {
		t.Error("the link is still there")
	}
	if _, err := os.Stat(target); err != nil {
		t.Errorf("the link's target was removed: %v", err)
	}
}
