package pveprop

import (
	"maps"
	"testing"
)

// Values as qemu-server's configs hold them: hostpci's default key is host, cpu's
// cputype; a part without '=' where the option has no default key goes under "".
func TestParse(t *testing.T) {
	for _, c := range []struct {
		value, key string
		want       map[string]string
	}{
		{"0000:01:00,pcie=1,x-vga=1", "host", map[string]string{"host": "0000:01:00", "pcie": "1", "x-vga": "1"}},
		{"mapping=pro6000,pcie=1", "host", map[string]string{"mapping": "pro6000", "pcie": "1"}},
		{"x86-64-v2-AES,flags=+pdpe1gb;+aes,phys-bits=42", "cputype", map[string]string{"cputype": "x86-64-v2-AES", "flags": "+pdpe1gb;+aes", "phys-bits": "42"}},
		{"cpus=0-15,hostnodes=1,memory=65536,policy=bind", "", map[string]string{"cpus": "0-15", "hostnodes": "1", "memory": "65536", "policy": "bind"}},
		{"", "host", map[string]string{}},
	} {
		if got := Parse(c.value, c.key); !maps.Equal(got, c.want) {
			t.Errorf("Parse(%q, %q) = %v, want %v", c.value, c.key, got, c.want)
		}
	}
}

// Set changes a part in place or adds it at the end; Drop removes it; the other parts
// keep their order and spelling.
func TestSetDrop(t *testing.T) {
	for _, c := range []struct{ value, key, v, want string }{
		{"0000:01:00,pcie=1,x-vga=1", "pcie", "0", "0000:01:00,pcie=0,x-vga=1"},
		{"0000:01:00", "mapping", "pro6000", "0000:01:00,mapping=pro6000"},
		{"", "phys-bits", "42", "phys-bits=42"},
		// A key that another only begins with is not it.
		{"x-vga=1", "x", "2", "x-vga=1,x=2"},
	} {
		if got := Set(c.value, c.key, c.v); got != c.want {
			t.Errorf("Set(%q, %q, %q) = %q, want %q", c.value, c.key, c.v, got, c.want)
		}
	}
	for _, c := range []struct{ value, key, want string }{
		{"0000:01:00,pcie=1,x-vga=1", "x-vga", "0000:01:00,pcie=1"},
		{"mapping=a,pcie=1", "rombar", "mapping=a,pcie=1"},
	} {
		if got := Drop(c.value, c.key); got != c.want {
			t.Errorf("Drop(%q, %q) = %q, want %q", c.value, c.key, got, c.want)
		}
	}
}
