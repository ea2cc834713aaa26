// Package pveprop reads and edits Proxmox's property strings, the comma-separated
// key=value lists of a guest config's options ("mapping=pro6000,pcie=1",
// "x86-64-v2-AES,phys-bits=42"). pve, which edits guest configs, and addrspace, which
// pve calls, both need them; the edits keep the other parts' order and spelling.
package pveprop

import "strings"

// Parse splits value into its parts; a part without '=' is the default key's value
// (hostpci's host, cpu's cputype; "" where the option has none).
func Parse(value, defaultKey string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(value, ",") {
		if k, v, ok := strings.Cut(part, "="); ok {
			out[k] = v
		} else if part != "" {
			out[defaultKey] = part
		}
	}
	return out
}

// Set sets key=v in value: in place where the key is, else at the end.
func Set(value, key, v string) string {
	if value == "" {
		return key + "=" + v
	}
	parts := strings.Split(value, ",")
	for i, p := range parts {
		if strings.HasPrefix(p, key+"=") {
			parts[i] = key + "=" + v
			return strings.Join(parts, ",")
		}
	}
	return value + "," + key + "=" + v
}

// Drop removes key=… from value.
func Drop(value, key string) string {
	var out []string
	for _, p := range strings.Split(value, ",") {
		if !strings.HasPrefix(p, key+"=") {
			out = append(out, p)
		}
	}
	return strings.Join(out, ",")
}
