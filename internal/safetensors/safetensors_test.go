package safetensors

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// upstream is the file of safetensors' own test_deserialization (safetensors/src/tensor.rs
// @ 24b0b2857fef49be734b9ab72ce97c09bb25f5b9): a 60-byte header ('<') for one I32 [2, 2]
// tensor, then its 16 bytes.
const upstream = "<\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"

func TestReadUpstreamFile(t *testing.T) {
	h, err := Read(strings.NewReader(upstream))
	if err != nil {
		t.Fatal(err)
	}
	if h.Length != 60 || len(h.Tensors) != 1 || h.DataBytes != 16 || h.FileBytes() != int64(len(upstream)) {
		t.Fatalf("header %+v", h)
	}
	tn := h.Tensors[0]
	// 2 × 2 elements of 32 bits are 16 bytes.
	if tn.Name != "test" || tn.DType != "I32" || tn.Bytes() != 2*2*32/8 {
		t.Errorf("tensor %+v", tn)
	}
}

// header builds a file's first bytes from a JSON text, its length announced as n (the
// text's own length when n < 0).
func header(json string, n int64) string {
	if n < 0 {
		n = int64(len(json))
	}
	var p [8]byte
	binary.LittleEndian.PutUint64(p[:], uint64(n))
	return string(p[:]) + json
}

func TestReadRefuses(t *testing.T) {
	for _, c := range []struct {
		name, file, want string
	}{
		{"empty", "", "shorter than the 8-byte header length"},
		{"length over the format's cap", header("{}", MaxHeaderBytes+1), "more than the 100000000 the format allows"},
		{"truncated header", header(`{"a":{}}`, 100), "ends inside its 100-byte header"},
		{"not an object", header(`["x"]`, -1), "does not start with '{'"},
		{"repeated key", header(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, -1), `"a" is listed twice`},
		{"missing field", header(`{"a":{"dtype":"U8","shape":[1]}}`, -1), "lacks dtype, shape or data_offsets"},
		{"size against dtype", header(`{"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,3]}}`, -1), "takes 6 bytes, but data_offsets give 3"},
		{"half a byte of F4", header(`{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}`, -1), "not a whole number of bytes"},
		{"a hole", header(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, -1), "a hole in the data buffer: bytes 0 to 1"},
		{"overlap", header(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, -1), "overlaps"},
		{"metadata not strings", header(`{"__metadata__":{"n":1}}`, -1), "__metadata__ is not a map of strings"},
		{"garbage after the object", header(`{}xx`, -1), "something other than spaces follows"},
		{"negative dimension", header(`{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}`, -1), "negative dimension"},
		{"shape that overflows int64", header(`{"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, -1), "takes 18446744073709551616 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(c.file))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
}

func TestReadAccepts(t *testing.T) {
	for _, c := range []struct {
		name, json string
		data       int64
		warn       string
	}{
		{"padded with spaces", `{"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}}   `, 3, ""},
		{"empty tensor and scalar", `{"e":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}`, 4, ""},
		// Two F4 elements share a byte: 6 elements are 3 bytes.
		{"F4", `{"a":{"dtype":"F4","shape":[2,3],"data_offsets":[0,3]}}`, 3, ""},
		{"metadata", `{"__metadata__":{"format":"pt"},"a":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}}`, 2, ""},
		{"out of order", `{"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 2, ""},
		{"unknown dtype", `{"a":{"dtype":"F3_NEW","shape":[8],"data_offsets":[0,3]}}`, 3, "F3_NEW, which gpusplit does not know"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := Read(strings.NewReader(header(c.json, -1)))
			if err != nil {
				t.Fatal(err)
			}
			if h.DataBytes != c.data {
				t.Errorf("data %d, want %d", h.DataBytes, c.data)
			}
			if got := strings.Join(h.Warnings, "; "); (c.warn == "") != (got == "") || !strings.Contains(got, c.warn) {
				t.Errorf("warnings %q, want %q", got, c.warn)
			}
		})
	}
}

// TestWriteHeaderRoundTrip checks the writer against the reader and against the
// reference writer's rule: the header padded with spaces to a multiple of 8 bytes.
func TestWriteHeaderRoundTrip(t *testing.T) {
	specs := []Spec{
		{"model.layers.0.mlp.experts.down_proj.weight", "U8", []int64{512, 4096, 512}},
		{"model.layers.0.mlp.experts.down_proj.weight_scale", "F8_E4M3", []int64{512, 4096, 64}},
		{"model.layers.0.mlp.experts.down_proj.weight_scale_2", "F32", []int64{512}},
		{"scalar", "F32", nil},
	}
	var b bytes.Buffer
	data, err := WriteHeader(&b, specs, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	// 512·4096·512 bytes of packed FP4, 512·4096·64 one-byte scales, 512 and 1 floats.
	want := int64(512*4096*512 + 512*4096*64 + 512*4 + 4)
	if data != want {
		t.Fatalf("data %d, want %d", data, want)
	}
	if (b.Len()-8)%8 != 0 {
		t.Errorf("header of %d bytes is not padded to 8", b.Len()-8)
	}
	h, err := Read(&b)
	if err != nil {
		t.Fatal(err)
	}
	if h.DataBytes != want || len(h.Tensors) != 4 || h.Metadata["format"] != "pt" {
		t.Errorf("read back %+v", h)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, truncate int64) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		data, err := WriteHeader(f, []Spec{{"w", "BF16", []int64{1024, 1024}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		off, _ := f.Seek(0, 1)
		f.Close()
		switch {
		case truncate > 0:
			err = os.Truncate(p, off+data-truncate)
		case truncate == 0:
			// The data as a hole: the file has its full length and no blocks.
			err = os.Truncate(p, off+data)
		}
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	full := write("full.safetensors", 0)
	f, err := ReadFile(full)
	if err != nil || f.Extent != Complete || f.Header.DataBytes != 1024*1024*2 {
		t.Fatalf("%+v, %v", f, err)
	}
	headerOnly := write("header.safetensors", -1)
	if f, err := ReadFile(headerOnly); err != nil || f.Extent != HeaderOnly {
		t.Fatalf("header only: %+v, %v", f, err)
	}
	if _, err := ReadFile(write("partial.safetensors", 100)); err == nil || !strings.Contains(err.Error(), "partial download") {
		t.Errorf("partial: %v", err)
	}
	long := write("long.safetensors", 0)
	if err := os.Truncate(long, 8+1000000+2*1024*1024); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(long); err == nil || !strings.Contains(err.Error(), "more than its header describes") {
		t.Errorf("long: %v", err)
	}
	fifo := filepath.Join(dir, "fifo.safetensors")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	if _, err := ReadFile(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("fifo: %v", err)
	}
}

// FuzzRead feeds the header reader any bytes: it must return a header whose ranges
// tile its buffer, or an error, never panic or hang.
func FuzzRead(f *testing.F) {
	f.Add([]byte(upstream))
	f.Add([]byte(header(`{"a":{"dtype":"F4","shape":[2,3],"data_offsets":[0,3]}}`, -1)))
	f.Add([]byte(header(`{"__metadata__":{"format":"pt"},"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, -1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		var sum int64
		for _, tn := range h.Tensors {
			if tn.Bytes() < 0 {
				t.Fatalf("tensor %q of %d bytes", tn.Name, tn.Bytes())
			}
			sum += tn.Bytes()
		}
		if sum != h.DataBytes {
			t.Fatalf("tensors add up to %d, the buffer is %d", sum, h.DataBytes)
		}
	})
}
