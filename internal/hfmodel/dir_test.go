package hfmodel

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/safetensors"
)

// secret is what a link out of a model's directory could reach: the start of
// /etc/shadow. Its first 8 bytes, as a safetensors length, are 2609312867587944306.
const secret = "root:$6$Zx9bQw1e$Kq8s0mVt3LrN7yPpF2dH:19000:0:99999:7:::\n"

const smallConfig = `{"num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": 64, "max_position_embeddings": 4096}`

// smallModel writes a model of two layers into dir: config.json and model.safetensors
// with one tensor, its data a hole.
func smallModel(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(smallConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	writeShard(t, filepath.Join(dir, "model.safetensors"), []safetensors.Spec{{Name: "model.layers.0.self_attn.q_proj.weight", DType: "BF16", Shape: []int64{512, 512}}}, false)
}

// writeShard writes a shard of specs at p, with its data as a hole, or its header alone.
func writeShard(t *testing.T, p string, specs []safetensors.Spec, headerOnly bool) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	n, err := safetensors.WriteHeader(f, specs, nil)
	off, _ := f.Seek(0, 1)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !headerOnly {
		if err := os.Truncate(p, off+n); err != nil {
			t.Fatal(err)
		}
	}
}

// TestModelFilesStayInside: every file of a model is read inside its directory. A link
// that leaves it, or an absolute one, is refused with ErrOutside, and nothing of its
// target's bytes shows in the message (gpusplit runs as root on directories users fill;
// the link to /etc/shadow printed its first 8 bytes as a header length). A relative link
// that stays inside is followed.
func TestModelFilesStayInside(t *testing.T) {
	outside := t.TempDir()
	shadow := filepath.Join(outside, "shadow")
	os.WriteFile(shadow, []byte(secret), 0o600)
	outsideConfig := filepath.Join(outside, "config.json")
	os.WriteFile(outsideConfig, []byte(smallConfig), 0o644)
	outsideIndex := filepath.Join(outside, "index.json")
	os.WriteFile(outsideIndex, []byte(`{"weight_map": {"model.layers.0.self_attn.q_proj.weight": "model.safetensors"}}`), 0o644)
	outsideShard := filepath.Join(outside, "shard.safetensors")
	writeShard(t, outsideShard, []safetensors.Spec{{Name: "model.layers.0.self_attn.q_proj.weight", DType: "BF16", Shape: []int64{512, 512}}}, false)

	for _, c := range []struct {
		name  string
		setup func(dir string) error
	}{
		{"config.json to a file outside", func(dir string) error {
			os.Remove(filepath.Join(dir, "config.json"))
			return os.Symlink(outsideConfig, filepath.Join(dir, "config.json"))
		}},
		{"config.json to /etc/shadow's like", func(dir string) error {
			os.Remove(filepath.Join(dir, "config.json"))
			return os.Symlink(shadow, filepath.Join(dir, "config.json"))
		}},
		{"model.safetensors to /etc/shadow's like", func(dir string) error {
			os.Remove(filepath.Join(dir, "model.safetensors"))
			return os.Symlink(shadow, filepath.Join(dir, "model.safetensors"))
		}},
		{"model.safetensors to a shard outside", func(dir string) error {
			os.Remove(filepath.Join(dir, "model.safetensors"))
			return os.Symlink(outsideShard, filepath.Join(dir, "model.safetensors"))
		}},
		{"a relative link that climbs out", func(dir string) error {
			os.Remove(filepath.Join(dir, "model.safetensors"))
			rel, _ := filepath.Rel(dir, outsideShard)
			return os.Symlink(rel, filepath.Join(dir, "model.safetensors"))
		}},
		{"a link inside to a link outside", func(dir string) error {
			os.Remove(filepath.Join(dir, "model.safetensors"))
			if err := os.Symlink(outsideShard, filepath.Join(dir, "hop")); err != nil {
				return err
			}
			return os.Symlink("hop", filepath.Join(dir, "model.safetensors"))
		}},
		{"an absolute link to a file inside", func(dir string) error {
			p := filepath.Join(dir, "model.safetensors")
			if err := os.Rename(p, filepath.Join(dir, "real.bin")); err != nil {
				return err
			}
			return os.Symlink(filepath.Join(dir, "real.bin"), p)
		}},
		{"the index to a file outside", func(dir string) error {
			return os.Symlink(outsideIndex, filepath.Join(dir, "model.safetensors.index.json"))
		}},
		{"hf_quant_config.json to a file outside", func(dir string) error {
			return os.Symlink(outsideConfig, filepath.Join(dir, "hf_quant_config.json"))
		}},
		{"a *.safetensors shard outside, no index", func(dir string) error {
			if err := os.Rename(filepath.Join(dir, "model.safetensors"), filepath.Join(dir, "a.safetensors")); err != nil {
				return err
			}
			return os.Symlink(shadow, filepath.Join(dir, "b.safetensors"))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "model")
			smallModel(t, dir)
			if err := c.setup(dir); err != nil {
				t.Fatal(err)
			}
			_, err := Load(dir)
			if !errors.Is(err, ErrOutside) {
				t.Fatalf("%v, want a refusal of the link", err)
			}
			for _, s := range []string{"2609312867587944306", "root:", "Zx9b", "'r'"} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("%q quotes %q", err, s)
				}
			}
		})
	}

	// Links that stay inside are followed: a shard kept under another name, in a
	// subdirectory.
	dir := filepath.Join(t.TempDir(), "model")
	smallModel(t, dir)
	os.Mkdir(filepath.Join(dir, "blobs"), 0o755)
	os.Rename(filepath.Join(dir, "model.safetensors"), filepath.Join(dir, "blobs", "0a1b"))
	os.Symlink("blobs/0a1b", filepath.Join(dir, "model.safetensors"))
	os.Rename(filepath.Join(dir, "config.json"), filepath.Join(dir, "blobs", "c0f1"))
	os.Symlink("./blobs/../blobs/c0f1", filepath.Join(dir, "config.json"))
	if m, err := Load(dir); err != nil || m.Weights.Total != 512*512*2 {
		t.Errorf("links inside: %v", err)
	}
	// The directory named may itself be a link, anywhere: the user named it.
	link := filepath.Join(t.TempDir(), "llama")
	os.Symlink(dir, link)
	if _, err := Load(link); err != nil {
		t.Errorf("a link to the directory: %v", err)
	}
}

// TestHuggingFaceCache: a snapshot of the Hugging Face cache keeps each file as a link
// to ../../blobs/HASH; it loads, the repository's directory being the one its links
// stay inside, and a link out of the repository is refused all the same.
func TestHuggingFaceCache(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "models--meta-llama--Llama-Tiny")
	snap := filepath.Join(repo, "snapshots", "5f0b02c75b57c5855da9ae460ce51323ea669d8a")
	blobs := filepath.Join(repo, "blobs")
	smallModel(t, blobs)
	os.MkdirAll(snap, 0o755)
	os.Rename(filepath.Join(blobs, "config.json"), filepath.Join(blobs, "0c1f"))
	os.Rename(filepath.Join(blobs, "model.safetensors"), filepath.Join(blobs, "9ab2"))
	os.Symlink("../../blobs/0c1f", filepath.Join(snap, "config.json"))
	os.Symlink("../../blobs/9ab2", filepath.Join(snap, "model.safetensors"))
	m, err := Load(snap)
	if err != nil || m.Weights.Total != 512*512*2 || m.Layers != 2 {
		t.Fatalf("%+v, %v", m, err)
	}
	if m.Dir != snap {
		t.Errorf("dir %s", m.Dir)
	}
	outside := filepath.Join(t.TempDir(), "shadow")
	os.WriteFile(outside, []byte(secret), 0o600)
	rel, _ := filepath.Rel(snap, outside)
	os.Remove(filepath.Join(snap, "model.safetensors"))
	os.Symlink(rel, filepath.Join(snap, "model.safetensors"))
	if _, err := Load(snap); !errors.Is(err, ErrOutside) {
		t.Errorf("a link out of the repository: %v", err)
	}
}

// TestModelFilesRegular: a FIFO, a directory or a device in place of a model's file is
// refused at once, never opened for a read that would block; config.json and the index
// are read up to their caps and no further.
func TestModelFilesRegular(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(dir string) error
		want  string
	}{
		{"config.json a FIFO", func(dir string) error {
			os.Remove(filepath.Join(dir, "config.json"))
			return syscall.Mkfifo(filepath.Join(dir, "config.json"), 0o600)
		}, "it is a FIFO"},
		{"model.safetensors a FIFO", func(dir string) error {
			os.Remove(filepath.Join(dir, "model.safetensors"))
			return syscall.Mkfifo(filepath.Join(dir, "model.safetensors"), 0o600)
		}, "it is a FIFO"},
		{"a link inside to a FIFO", func(dir string) error {
			os.Remove(filepath.Join(dir, "model.safetensors"))
			if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o600); err != nil {
				return err
			}
			return os.Symlink("pipe", filepath.Join(dir, "model.safetensors"))
		}, "it is a FIFO"},
		{"the index a directory", func(dir string) error {
			return os.Mkdir(filepath.Join(dir, "model.safetensors.index.json"), 0o755)
		}, "it is a directory"},
		{"config.json over its cap", func(dir string) error {
			return os.Truncate(filepath.Join(dir, "config.json"), MaxConfigBytes+1)
		}, "larger than 16 MiB, the most gpusplit reads of a model's config.json"},
		{"the index over its cap", func(dir string) error {
			p := filepath.Join(dir, "model.safetensors.index.json")
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				return err
			}
			return os.Truncate(p, MaxIndexBytes+1)
		}, "larger than 128 MiB, the most gpusplit reads of a safetensors index"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			smallModel(t, dir)
			if err := c.setup(dir); err != nil {
				t.Skip(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := Load(dir)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%v, want %q", err, c.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the read blocks")
			}
		})
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		dir := t.TempDir()
		smallModel(t, dir)
		os.Remove(filepath.Join(dir, "model.safetensors"))
		// A device inside the directory: only root can make one, so a link to one
		// stands in for it here, refused as a link out; regular() is checked below.
		os.Symlink("/dev/zero", filepath.Join(dir, "model.safetensors"))
		if _, err := Load(dir); !errors.Is(err, ErrOutside) {
			t.Errorf("/dev/zero: %v", err)
		}
		st, _ := os.Stat("/dev/zero")
		if err := regular(st); !errors.Is(err, host.ErrNotRegular) || !strings.Contains(err.Error(), "not a regular file: it is a device") {
			t.Errorf("/dev/zero: %v", err)
		}
	}
}

// TestWeightsBound: header-only shards may claim any size; their sum is refused past
// MaxWeightBytes instead of wrapping past int64 (17 shards of 2^59 bytes made the
// total negative, and a negative weight fits anywhere).
func TestWeightsBound(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(smallConfig), 0o644)
	for i, name := range strings.Split("abcdefghijklmnopq", "") {
		writeShard(t, filepath.Join(dir, name+".safetensors"), []safetensors.Spec{{Name: "model.layers." + string(rune('0'+i%2)) + ".mlp." + name + ".weight", DType: "U8", Shape: []int64{1 << 29, 1 << 30}}}, true)
	}
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), "add up to more than 70368744177664 bytes (64 TiB)") {
		t.Fatalf("%v", err)
	}
	// At the bound, it loads.
	dir = t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(smallConfig), 0o644)
	writeShard(t, filepath.Join(dir, "model.safetensors"), []safetensors.Spec{{Name: "model.layers.0.mlp.w", DType: "U8", Shape: []int64{1 << 23, 1 << 23}}}, true)
	if m, err := Load(dir); err != nil || m.Weights.Total != MaxWeightBytes {
		t.Errorf("%v", err)
	}
	// One byte more, in another shard, is refused.
	writeShard(t, filepath.Join(dir, "model-2.safetensors"), []safetensors.Spec{{Name: "model.layers.1.mlp.w", DType: "U8", Shape: []int64{1}}}, true)
	os.Rename(filepath.Join(dir, "model.safetensors"), filepath.Join(dir, "model-1.safetensors"))
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "add up to more than 70368744177664 bytes") {
		t.Errorf("a byte past the bound: %v", err)
	}
}

// TestUnknownDTypesNoted: tensors of dtypes gpusplit does not know are counted and said
// once per dtype over all the shards, not once per tensor.
func TestUnknownDTypesNoted(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(smallConfig), 0o644)
	for _, name := range []string{"a", "b"} {
		p := filepath.Join(dir, name+".safetensors")
		raw := `{"model.layers.0.` + name + `1":{"dtype":"F3_NEW","shape":[8],"data_offsets":[0,3]},"model.layers.0.` + name + `2":{"dtype":"F3_NEW","shape":[8],"data_offsets":[3,6]}}`
		var prefix [8]byte
		prefix[0] = byte(len(raw))
		os.WriteFile(p, append(append(prefix[:], raw...), make([]byte, 6)...), 0o644)
	}
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	for _, n := range m.Notes {
		if strings.Contains(n, "F3_NEW") {
			said = append(said, n)
		}
	}
	if len(said) != 1 || said[0] != `4 tensors of dtype "F3_NEW", which gpusplit does not know: counted by their offsets, 12 bytes` {
		t.Errorf("%q", said)
	}
}
