// Package safetensors reads the headers of safetensors files: the name, dtype, shape and
// byte range of every tensor, never the tensors themselves. A model's weights take the
// bytes its headers say, whatever the quantisation (FP8 with its scales, NVFP4, MXFP4,
// AWQ and GPTQ packs), because packed data and scales are tensors of their own.
//
// The format (github.com/huggingface/safetensors, README "Format", and
// safetensors/src/tensor.rs, which this package follows for its checks): 8 bytes of an
// unsigned little-endian length N, then N bytes of a JSON object (starting with '{',
// possibly padded with spaces), then the data buffer. Each key but __metadata__ names a
// tensor: {"dtype", "shape", "data_offsets": [BEGIN, END]}, offsets relative to the start
// of the buffer; the tensors cover the buffer from 0 without holes or overlaps.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxHeaderBytes is the largest header read, the reference implementation's
// MAX_HEADER_SIZE: a larger length is refused before anything more is read.
const MaxHeaderBytes = 100_000_000

// Bits returns the width in bits of one element of dtype, and whether dtype is known:
// the widths of safetensors' dtypes (tensor.rs, Dtype::bitsize). F4 and the F6 kinds
// are MX element types, several to a byte.
func Bits(dtype string) (int64, bool) {
	b, ok := bits[dtype]
	return b, ok
}

var bits = map[string]int64{
	"BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
	"F4":      4,
	"F6_E2M3": 6, "F6_E3M2": 6,
	"I16": 16, "U16": 16, "F16": 16, "BF16": 16,
	"I32": 32, "U32": 32, "F32": 32,
	"I64": 64, "U64": 64, "F64": 64, "C64": 64,
}

// Tensor is one entry of a header.
type Tensor struct {
	Name  string
	DType string
	Shape []int64
	// Begin and End are the tensor's bytes in the data buffer, End one past the last.
	Begin, End int64
}

// Bytes is what the tensor takes: END − BEGIN, which the checks made equal to its
// elements times its dtype's width.
func (t Tensor) Bytes() int64 { return t.End - t.Begin }

// Header is what a file's header says.
type Header struct {
	// Length is N, the header's length after its 8-byte prefix.
	Length int64
	// Tensors in the order the header lists them.
	Tensors  []Tensor
	Metadata map[string]string
	// DataBytes is the length of the data buffer: the largest END.
	DataBytes int64
	// Warnings are what the header holds that is allowed but unusual: a dtype this
	// package does not know, sized by its offsets alone (one warning per dtype).
	Warnings []string
}

// FileBytes is the size of a complete file with this header.
func (h *Header) FileBytes() int64 { return 8 + h.Length + h.DataBytes }

// entry is a tensor as JSON writes it; the fields are pointers so that a missing one is
// told from a zero.
type entry struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// Read reads a header from r, the start of a file: the 8-byte length, then the JSON it
// announces, never more. Every check of the reference reader on the header is made:
// the JSON is an object starting with '{', no key repeats, each dtype's width times the
// shape's elements is a whole number of bytes equal to the tensor's range, and the
// ranges cover the buffer from 0 without holes or overlaps.
//
// The file may be anything (a link's target, a damaged copy), so what its errors say of
// it is never its bytes until they have shown themselves a header: not the length, whose
// 8 bytes could as well be the start of a password file, nor the text of JSON that does
// not parse. Tensor names and figures are quoted once the JSON has parsed up to them.
func Read(r io.Reader) (*Header, error) {
	var prefix [8]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errors.New("shorter than the 8-byte header length: not a safetensors file")
		}
		return nil, err
	}
	n := binary.LittleEndian.Uint64(prefix[:])
	if n > MaxHeaderBytes {
		return nil, fmt.Errorf("its header length (the first 8 bytes) exceeds %d, the most the format allows: not a safetensors file, or a damaged one", MaxHeaderBytes)
	}
	if n < 2 {
		return nil, errors.New("its header length (the first 8 bytes) is under 2, too short for a JSON object: not a safetensors file")
	}
	// Read as it comes rather than allocated at once: a short file announcing 100 MB
	// costs its own bytes.
	raw, err := io.ReadAll(io.LimitReader(r, int64(n)))
	if err != nil {
		return nil, err
	}
	if uint64(len(raw)) < n {
		return nil, errors.New("ends inside the header its first 8 bytes announce: a truncated file, or not a safetensors file")
	}
	h, err := parse(raw)
	if err != nil {
		return nil, err
	}
	h.Length = int64(n)
	return h, nil
}

// MaxUnknownDTypes is how many dtypes this package does not know a header may use: a
// newer writer may add one or two; dozens are not a checkpoint.
const MaxUnknownDTypes = 16

// parse decodes the header JSON one tensor at a time, so that a 100 MB header costs its
// tensors, not a generic map of it.
func parse(raw []byte) (*Header, error) {
	if raw[0] != '{' {
		return nil, errors.New("the header does not start with '{': not a safetensors file")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("header: %s", jsonProblem(err, ""))
	}
	h := &Header{Metadata: map[string]string{}}
	seen := map[string]bool{}
	type tally struct{ tensors, bytes int64 }
	unknown := map[string]*tally{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("header: %s", jsonProblem(err, ""))
		}
		name, _ := tok.(string)
		if seen[name] {
			return nil, fmt.Errorf("header: %s is listed twice", Quote(name))
		}
		seen[name] = true
		if name == "__metadata__" {
			// Only a map of strings is allowed ("Arbitrary JSON is not allowed").
			var md map[string]string
			if err := dec.Decode(&md); err != nil {
				return nil, fmt.Errorf("header: __metadata__ is not a map of strings (%s)", jsonProblem(err, ""))
			}
			h.Metadata = md
			continue
		}
		var e entry
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("header: tensor %s: %s", Quote(name), jsonProblem(err, "an object of dtype, shape and data_offsets"))
		}
		t, known, err := tensorOf(name, e)
		if err != nil {
			return nil, fmt.Errorf("header: %w", err)
		}
		if !known {
			u := unknown[t.DType]
			if u == nil {
				if len(unknown) == MaxUnknownDTypes {
					return nil, fmt.Errorf("header: more than %d dtypes gpusplit does not know: not a checkpoint it can size", MaxUnknownDTypes)
				}
				u = &tally{}
				unknown[t.DType] = u
			}
			u.tensors++
			u.bytes += t.Bytes()
		}
		h.Tensors = append(h.Tensors, t)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("header: %s", jsonProblem(err, ""))
	}
	// What follows the object may only be the spaces that pad it.
	if rest := raw[dec.InputOffset():]; len(strings.Trim(string(rest), " ")) != 0 {
		return nil, errors.New("header: something other than spaces follows the JSON object")
	}
	end, err := checkCoverage(h.Tensors)
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	h.DataBytes = end
	// The enum is non-exhaustive: a newer dtype is sized by its offsets, said once.
	dtypes := make([]string, 0, len(unknown))
	for d := range unknown {
		dtypes = append(dtypes, d)
	}
	slices.Sort(dtypes)
	for _, d := range dtypes {
		u := unknown[d]
		h.Warnings = append(h.Warnings, fmt.Sprintf("%s of dtype %s, which gpusplit does not know: counted at their %d bytes", tensors(u.tensors), Quote(d), u.bytes))
	}
	return h, nil
}

func tensors(n int64) string {
	if n == 1 {
		return "1 tensor"
	}
	return fmt.Sprintf("%d tensors", n)
}

// jsonProblem says what is wrong with JSON that did not decode, without its text: a
// syntax error by its offset, a value of the wrong type by the field it is in (the
// decoder's own message quotes numbers it cannot hold). want is what the value should
// have been, for a value of the wrong type outside any field.
func jsonProblem(err error, want string) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("not valid JSON (at byte %d of the header)", syntax.Offset)
	case errors.As(err, &typ) && typ.Field != "":
		return fmt.Sprintf("its %s is not %s", typ.Field, wantOf(typ.Type.Kind()))
	case errors.As(err, &typ) && want != "":
		return "not " + want
	case errors.As(err, &typ):
		return "a value of the wrong type"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends early"
	}
	return "not valid JSON"
}

func wantOf(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Int64:
		return "whole numbers that fit 64 bits"
	case reflect.Slice:
		return "a list of whole numbers"
	}
	return "of the right type"
}

// MaxQuoted is the most bytes of a name read from a file that a message quotes.
const MaxQuoted = 128

// Quote quotes a name read from a file for a message: Go-quoted (a control character
// cannot reach the terminal), and cut to MaxQuoted bytes, so that a header of one
// 100 MB name does not make a 100 MB message.
func Quote(s string) string {
	if len(s) <= MaxQuoted {
		return strconv.Quote(s)
	}
	cut := MaxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("… (%d bytes)", len(s))
}

// shapeText words a shape for a message: whole when short, else its rank.
func shapeText(shape []int64) string {
	if len(shape) <= 8 {
		return fmt.Sprint(shape)
	}
	return fmt.Sprintf("of %d dimensions", len(shape))
}

// tensorOf checks one entry: its fields are there, its offsets ordered, and its size
// the one its dtype and shape give. known is false for a dtype this package does not
// know, sized by its offsets.
func tensorOf(name string, e entry) (Tensor, bool, error) {
	if e.DType == nil || e.Shape == nil || e.DataOffsets == nil {
		return Tensor{}, false, fmt.Errorf("tensor %s lacks dtype, shape or data_offsets", Quote(name))
	}
	off := *e.DataOffsets
	if len(off) != 2 {
		return Tensor{}, false, fmt.Errorf("tensor %s: data_offsets has %d numbers, not 2", Quote(name), len(off))
	}
	t := Tensor{Name: name, DType: *e.DType, Shape: *e.Shape, Begin: off[0], End: off[1]}
	if t.Begin < 0 || t.End < t.Begin {
		return Tensor{}, false, fmt.Errorf("tensor %s: data_offsets [%d, %d] are not a range", Quote(name), t.Begin, t.End)
	}
	// The element count in big numbers: a hostile shape must not wrap around.
	elems := big.NewInt(1)
	for _, d := range t.Shape {
		if d < 0 {
			return Tensor{}, false, fmt.Errorf("tensor %s: negative dimension %d", Quote(name), d)
		}
		elems.Mul(elems, big.NewInt(d))
	}
	bits, known := Bits(t.DType)
	if !known {
		return t, false, nil
	}
	total := new(big.Int).Mul(elems, big.NewInt(bits))
	if new(big.Int).Rem(total, big.NewInt(8)).Sign() != 0 {
		return Tensor{}, false, fmt.Errorf("tensor %s: %s elements of %d bits are not a whole number of bytes", Quote(name), elems, bits)
	}
	want := total.Div(total, big.NewInt(8))
	if !want.IsInt64() || want.Int64() != t.Bytes() {
		return Tensor{}, false, fmt.Errorf("tensor %s: %s %s takes %s bytes, but data_offsets give %d", Quote(name), t.DType, shapeText(t.Shape), want, t.Bytes())
	}
	return t, true, nil
}

// checkCoverage verifies that the ranges tile [0, end) and returns end.
func checkCoverage(ts []Tensor) (int64, error) {
	idx := make([]int, len(ts))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if ts[a].Begin != ts[b].Begin {
			return int(sign(ts[a].Begin - ts[b].Begin))
		}
		return int(sign(ts[a].End - ts[b].End))
	})
	var end int64
	for _, i := range idx {
		t := ts[i]
		if t.Begin != end {
			if t.Begin < end {
				return 0, fmt.Errorf("tensor %s overlaps the one before it (it starts at %d, before %d)", Quote(t.Name), t.Begin, end)
			}
			return 0, fmt.Errorf("a hole in the data buffer: bytes %d to %d belong to no tensor (the next is %s)", end, t.Begin, Quote(t.Name))
		}
		end = t.End
	}
	return end, nil
}

func sign(x int64) int64 {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

// Spec is a tensor to write: its name, dtype and shape; Write lays out the offsets.
type Spec struct {
	Name  string
	DType string
	Shape []int64
}

// Bytes is what the tensor of s takes, or an error for an unknown dtype or a size that
// is not whole bytes. WriteHeader uses it.
func (s Spec) Bytes() (int64, error) {
	bits, ok := Bits(s.DType)
	if !ok {
		return 0, fmt.Errorf("tensor %q: unknown dtype %q", s.Name, s.DType)
	}
	n := bits
	for _, d := range s.Shape {
		if d < 0 || (d > 0 && n > math.MaxInt64/d) {
			return 0, fmt.Errorf("tensor %q: shape %v is too large", s.Name, s.Shape)
		}
		n *= d
	}
	if n%8 != 0 {
		return 0, fmt.Errorf("tensor %q: %v elements of %s are not whole bytes", s.Name, s.Shape, s.DType)
	}
	return n / 8, nil
}

// WriteHeader writes the 8-byte length and the header of a file holding specs, in the
// order given, padded with spaces to a multiple of 8 bytes as the reference writer
// pads it, and returns the length of the data buffer that must follow. It writes no
// data: a test makes the rest of the file sparse (os.Truncate), and a header-only copy
// of a model stops here. It is for tests: the checkpoints of hfmodel's, fit's and
// cli's tests and internal/testutils/checkpoint are written with it.
func WriteHeader(w io.Writer, specs []Spec, metadata map[string]string) (int64, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	if len(metadata) > 0 {
		md, err := json.Marshal(metadata)
		if err != nil {
			return 0, err
		}
		b.WriteString(`"__metadata__":`)
		b.Write(md)
		first = false
	}
	var off int64
	for _, s := range specs {
		n, err := s.Bytes()
		if err != nil {
			return 0, err
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		name, _ := json.Marshal(s.Name)
		shape := s.Shape
		if shape == nil {
			shape = []int64{}
		}
		sh, _ := json.Marshal(shape)
		fmt.Fprintf(&b, `%s:{"dtype":%q,"shape":%s,"data_offsets":[%d,%d]}`, name, s.DType, sh, off, off+n)
		off += n
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	var prefix [8]byte
	binary.LittleEndian.PutUint64(prefix[:], uint64(b.Len()))
	if _, err := w.Write(prefix[:]); err != nil {
		return 0, err
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return 0, err
	}
	return off, nil
}
