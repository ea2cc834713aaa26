package safetensors

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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
		{"length over the format's cap", header("{}", MaxHeaderBytes+1), "exceeds 100000000, the most the format allows"},
		{"length under an object's", header("{}", 1), "is under 2"},
		{"truncated header", header(`{"a":{}}`, 100), "ends inside the header its first 8 bytes announce"},
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
		{"shape of many dimensions", header(`{"a":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1,2],"data_offsets":[0,1]}}`, -1), "U8 of 10 dimensions takes 2 bytes"},
		{"offset past int64", header(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1e30]}}`, -1), `tensor "a": its data_offsets is not whole numbers that fit 64 bits`},
		{"shape of the wrong type", header(`{"a":{"dtype":"U8","shape":"1","data_offsets":[0,1]}}`, -1), `its shape is not a list of whole numbers`},
		{"entry not an object", header(`{"a":[1]}`, -1), `tensor "a": not an object of dtype, shape and data_offsets`},
		{"JSON that does not parse", header(`{"a" 1}`, -1), "not valid JSON (at byte 5 of the header)"},
		{"too many unknown dtypes", header(unknownDTypes(MaxUnknownDTypes+1), -1), "more than 16 dtypes gpusplit does not know"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(c.file))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
}

// unknownDTypes is a header of n one-byte tensors, each of a dtype of its own that
// nobody knows.
func unknownDTypes(n int) string {
	var parts []string
	for i := 0; i < n; i++ {
		parts = append(parts, fmt.Sprintf(`"t%d":{"dtype":"X%d","shape":[1],"data_offsets":[%d,%d]}`, i, i, i, i+1))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// TestReadQuotesNothingUnchecked: a file that is not a safetensors file (here the start
// of a password file, as a link could point a root gpusplit at) is refused without a
// byte of it in the message: not its first 8 bytes read as a length, not the character
// where its JSON breaks. Names of the header are quoted once it parsed up to them, cut
// short and escaped.
func TestReadQuotesNothingUnchecked(t *testing.T) {
	shadow := "root:$6$Zx9bQw1e$Kq8s0mVt3LrN7yPpF2dH:19000:0:99999:7:::\n"
	for _, c := range []struct {
		name, file string
		secrets    []string
	}{
		// The first 8 bytes as a little-endian length: 2609312867587944306.
		{"a password file", shadow, []string{"2609312867587944306", "root", "Zx9b"}},
		// A length the cap lets through, then what is not JSON: 'r' must not be quoted.
		{"a small length, then text", "\x30\x00\x00\x00\x00\x00\x00\x00" + shadow, []string{"'r'", "48", "root"}},
		{"a length past the file", "\x00\x10\x00\x00\x00\x00\x00\x00{\"k\":1}", []string{"4096"}},
		{"broken JSON", header(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}, s3cret}`, -1), []string{"s3cret", "'s'"}},
		{"a number too large", header(`{"a":{"dtype":"U8","shape":[31415926535897932384626],"data_offsets":[0,1]}}`, -1), []string{"31415926535897932384626", "3.14159"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(c.file))
			if err == nil {
				t.Fatal("read")
			}
			for _, s := range c.secrets {
				if strings.Contains(err.Error(), s) {
					t.Errorf("%q quotes %q", err, s)
				}
			}
		})
	}
	// A name of 100,000 bytes ending in an escape sequence (JSON-escaped, so the JSON
	// parses).
	long := strings.Repeat("n", 100000) + "\\u001b[2J"
	_, err := Read(strings.NewReader(header(`{"`+long+`":{"dtype":"U8","shape":[2],"data_offsets":[0,1]}}`, -1)))
	if err == nil || len(err.Error()) > 400 || strings.Contains(err.Error(), "\x1b") {
		t.Errorf("a long name: %d bytes of message: %.300q", len(err.Error()), err)
	}
}

// TestReadShortFileAllocatesLittle: a file of a few bytes that announces a 100 MB
// header costs a few bytes, not 100 MB (the fuzzer feeds thousands of them).
func TestReadShortFileAllocatesLittle(t *testing.T) {
	file := header(`{"a":`, MaxHeaderBytes)
	allocs := testing.AllocsPerRun(1, func() { Read(strings.NewReader(file)) })
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	Read(strings.NewReader(file))
	runtime.ReadMemStats(&after)
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<20 {
		t.Errorf("%d bytes allocated (%v allocations) for a %d-byte file", grown, allocs, len(file))
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
		{"unknown dtype", `{"a":{"dtype":"F3_NEW","shape":[8],"data_offsets":[0,3]}}`, 3, `1 tensor of dtype "F3_NEW", which gpusplit does not know: counted at their 3 bytes`},
		{"unknown dtype, said once", `{"a":{"dtype":"F3_NEW","shape":[8],"data_offsets":[0,3]},"b":{"dtype":"F3_NEW","shape":[8],"data_offsets":[3,6]}}`, 6, `2 tensors of dtype "F3_NEW", which gpusplit does not know: counted at their 6 bytes`},
		{"as many unknown dtypes as allowed", unknownDTypes(MaxUnknownDTypes), MaxUnknownDTypes, `dtype "X9"`},
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

// readPath opens p as a caller would, without blocking on a FIFO, and reads its header.
func readPath(p string) (*File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadFile(f, p)
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
	f, err := readPath(full)
	if err != nil || f.Extent != Complete || f.Header.DataBytes != 1024*1024*2 {
		t.Fatalf("%+v, %v", f, err)
	}
	headerOnly := write("header.safetensors", -1)
	if f, err := readPath(headerOnly); err != nil || f.Extent != HeaderOnly {
		t.Fatalf("header only: %+v, %v", f, err)
	}
	if _, err := readPath(write("partial.safetensors", 100)); err == nil || !strings.Contains(err.Error(), "partial download") {
		t.Errorf("partial: %v", err)
	}
	long := write("long.safetensors", 0)
	if err := os.Truncate(long, 8+1000000+2*1024*1024); err != nil {
		t.Fatal(err)
	}
	if _, err := readPath(long); err == nil || !strings.Contains(err.Error(), "more than its header describes") {
		t.Errorf("long: %v", err)
	}
	fifo := filepath.Join(dir, "fifo.safetensors")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	if _, err := readPath(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("fifo: %v", err)
	}
}

// FuzzRead feeds the header reader any bytes: it must return a header whose ranges
// tile its buffer, or an error that quotes no unchecked byte (not the length of a file
// whose length is refused) and stays short, never panic or hang. The seeds hold the
// bounds: a length at the cap and past it, offsets and shapes at int64's edge, the
// most unknown dtypes and one more.
func FuzzRead(f *testing.F) {
	f.Add([]byte(upstream))
	f.Add([]byte(header(`{"a":{"dtype":"F4","shape":[2,3],"data_offsets":[0,3]}}`, -1)))
	f.Add([]byte(header(`{"__metadata__":{"format":"pt"},"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, -1)))
	f.Add([]byte(header(`{"a":{}}`, MaxHeaderBytes)))
	f.Add([]byte(header(`{"a":{}}`, MaxHeaderBytes+1)))
	f.Add([]byte("\xff\xff\xff\xff\xff\xff\xff\xff{}"))
	f.Add([]byte(header(`{"a":{"dtype":"U8","shape":[9223372036854775807],"data_offsets":[0,9223372036854775807]}}`, -1)))
	f.Add([]byte(header(`{"a":{"dtype":"F64","shape":[1152921504606846976],"data_offsets":[0,9223372036854775807]}}`, -1)))
	f.Add([]byte(header(`{"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, -1)))
	f.Add([]byte(header(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[9223372036854775806,9223372036854775807]},"b":{"dtype":"X","shape":[1],"data_offsets":[0,9223372036854775806]}}`, -1)))
	f.Add([]byte(header(unknownDTypes(MaxUnknownDTypes), -1)))
	f.Add([]byte(header(unknownDTypes(MaxUnknownDTypes+1), -1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := Read(bytes.NewReader(data))
		if err != nil {
			if len(err.Error()) > 1024 {
				t.Fatalf("a message of %d bytes", len(err.Error()))
			}
			if len(data) >= 8 {
				if n := binary.LittleEndian.Uint64(data); n > MaxHeaderBytes && strings.Contains(err.Error(), strconv.FormatUint(n, 10)) {
					t.Fatalf("%q quotes the refused length", err)
				}
			}
			return
		}
		var sum int64
		for _, tn := range h.Tensors {
			if tn.Bytes() < 0 {
				t.Fatalf("tensor %q of %d bytes", tn.Name, tn.Bytes())
			}
			sum += tn.Bytes()
		}
		if sum != h.DataBytes || sum < 0 {
			t.Fatalf("tensors add up to %d, the buffer is %d", sum, h.DataBytes)
		}
		if len(h.Warnings) > MaxUnknownDTypes {
			t.Fatalf("%d warnings", len(h.Warnings))
		}
	})
}
