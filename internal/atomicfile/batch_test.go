package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// batchDir holds three files: a and b exist, c is new; b is removed by the batch.
func batchDir(t *testing.T) (dir string, before map[string]string, b *Batch) {
	t.Helper()
	dir = t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), []byte("old a\n"), 0o640)
	os.WriteFile(filepath.Join(dir, "b"), []byte("old b\n"), 0o600)
	return dir, listing(t, dir), &Batch{}
}

func listing(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		fi, _ := e.Info()
		out[e.Name()] = fmt.Sprintf("%s %v", b, fi.Mode())
	}
	return out
}

func stageAll(t *testing.T, dir string, b *Batch) error {
	t.Helper()
	if err := b.Replace(filepath.Join(dir, "a"), []byte("old a\n"), true, []byte("new a\n"), 0o640); err != nil {
		return err
	}
	b.Remove(filepath.Join(dir, "b"), []byte("old b\n"), 0o600)
	return b.Replace(filepath.Join(dir, "c"), nil, false, []byte("new c\n"), 0o644)
}

func TestBatchCommit(t *testing.T) {
	dir, _, b := batchDir(t)
	if err := stageAll(t, dir, b); err != nil {
		t.Fatal(err)
	}
	res, err := b.Commit()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.State != Done {
			t.Errorf("%s: %s", r.Path, r.State)
		}
	}
	want := map[string]string{"a": "new a\n -rw-r-----", "c": "new c\n -rw-r--r--"}
	if got := listing(t, dir); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("files %v, want %v", got, want)
	}
}

// Every staging and every rename failed in turn: the files are as they were, with their
// permissions, and nothing is left beside them.
func TestBatchFaults(t *testing.T) {
	// Two versions staged (b is removed, not staged), three changes.
	for step, steps := range map[string]int{"write": 2, "rename": 3} {
		for k := 1; k <= steps; k++ {
			t.Run(fmt.Sprintf("%s-%d", step, k), func(t *testing.T) {
				dir, before, b := batchDir(t)
				n := 0
				b.Fault = func(s string) error {
					if s == step {
						if n++; n == k {
							return errors.New("injected")
						}
					}
					return nil
				}
				err := stageAll(t, dir, b)
				if err == nil {
					_, err = b.Commit()
				} else {
					b.Abort()
				}
				if err == nil || !strings.Contains(err.Error(), "injected") {
					t.Fatalf("error %v", err)
				}
				var ce *CommitError
				if errors.As(err, &ce) && !ce.Intact() {
					t.Errorf("not intact: %v", err)
				}
				if got := listing(t, dir); fmt.Sprint(got) != fmt.Sprint(before) {
					t.Errorf("files %v, want %v", got, before)
				}
			})
		}
	}
}

// A file that cannot be put back is reported, and the others are still put back.
func TestBatchPutBackFails(t *testing.T) {
	dir, _, b := batchDir(t)
	renames := 0
	b.Fault = func(s string) error {
		if s == "rename" {
			// The third change fails, then the first put back (the removed b's).
			if renames++; renames == 3 || renames == 4 {
				return errors.New("injected")
			}
		}
		return nil
	}
	if err := stageAll(t, dir, b); err != nil {
		t.Fatal(err)
	}
	res, err := b.Commit()
	var ce *CommitError
	if !errors.As(err, &ce) || ce.Intact() || !strings.Contains(err.Error(), "NOT put back: "+filepath.Join(dir, "b")) {
		t.Fatalf("error %v", err)
	}
	if res[0].State != Restored || res[1].State != NotRestored || res[2].State != Untouched {
		t.Errorf("states %v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a")); string(b) != "old a\n" {
		t.Errorf("a is %q", b)
	}
}
