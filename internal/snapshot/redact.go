package snapshot

import (
	"encoding/json"
	"path"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/lazyre"
)

// Redacted stands for every value a snapshot leaves out of a line it keeps.
const Redacted = "<redacted>"

// Redaction says what a snapshot left out of one file it captured: how many lines of
// which keys, and how many values of which keys it replaced (in a guest config's args by
// Redacted, a process's argv[0] by its program's name). The values themselves appear
// nowhere, not even here. In a guest config, "description" counts the # lines too and
// "(not a key)" the lines that are none; in a cmdline, "arguments" counts those after
// argv[0].
type Redaction struct {
	File     string         `json:"file"`
	LeftOut  map[string]int `json:"left_out"` // key → lines (or arguments) not copied
	Replaced map[string]int `json:"replaced"` // key → values replaced
}

func (r *Redaction) empty() bool { return len(r.LeftOut) == 0 && len(r.Replaced) == 0 }

// guestKeys are the keys of a VM or container config that gpusplit reads, and so the
// only ones a snapshot keeps. Who reads them: internal/pve's sync (hostpciN, machine,
// numa, numaN, cores, sockets, memory, devN, lxc.mount.entry, lxc.cgroup2.devices.allow,
// lock), internal/vmlayout (arch, machine, ostype, hostpciN, numa, numaN, args) and
// internal/holders (hostpciN, devN, lxc.mount.entry), internal/addrspace through sync
// (bios, cpu, hotplug, hugepages, machine, memory, sockets, args). hookscript is kept
// for the reports of passthrough trouble (gpusplit's hook) though no command reads it
// yet. Everything else (description, cipassword, sshkeys, net0, lxc.environment, disks,
// tags, name, hostname...) says nothing gpusplit needs and may say what should not
// leave the host.
var guestKeys = []string{
	"arch", "args", "bios", "cores", "cpu", "hookscript", "hotplug", "hugepages", "lock",
	"machine", "memory", "numa", "ostype", "sockets",
	"template", "vga",
	"lxc.cgroup2.devices.allow", "lxc.cgroup.devices.allow", "lxc.mount.entry",
}

// numberedKeys are the keys that come as prefix<N>.
var numberedKeys = []string{"hostpci", "dev", "numa"}

// The line syntax of a guest config, as internal/pve reads it: a key line, a raw lxc.*
// key (':' or '='), a section header ([snapshot], [PENDING], [special:cloudinit]). A line
// that is none of these gpusplit does not read, so it is not kept either.
var (
	guestKeyLine = lazyre.New(`^([a-z][a-z_\-]*\d*):\s*(.*?)\s*$`)
	rawLXCLine   = lazyre.New(`^(lxc\.[a-z0-9_\-.]+)(?::|\s*=)\s*(.*?)\s*$`)
	sectionLine  = lazyre.New(`^\[[^\]]+\]\s*$`)
)

// keptKey reports whether a guest config key is one gpusplit reads.
func keptKey(k string) bool {
	if slices.Contains(guestKeys, k) {
		return true
	}
	for _, p := range numberedKeys {
		if n, ok := strings.CutPrefix(k, p); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			return true
		}
	}
	return false
}

// reduceGuest keeps of a VM or container config the lines gpusplit reads, in every
// section alike (main, snapshots, pending changes, cloud-init), each byte for byte but
// for args, whose secret values are replaced. Section headers and blank lines stay, so
// that what is the main section stays so. Description lines (#) go, and lxc.mount.entry
// lines that mount anything but a device node.
func reduceGuest(file string, data []byte) ([]byte, Redaction) {
	r := Redaction{File: file, LeftOut: map[string]int{}, Replaced: map[string]int{}}
	var out strings.Builder
	for rest := string(data); rest != ""; {
		line, end := rest, ""
		if i := strings.IndexByte(rest, '\n'); i >= 0 {
			line, end, rest = rest[:i], "\n", rest[i+1:]
		} else {
			rest = ""
		}
		key, value := "", ""
		if m := rawLXCLine.FindStringSubmatch(line); m != nil {
			key, value = m[1], m[2]
		} else if m := guestKeyLine.FindStringSubmatch(line); m != nil {
			key, value = m[1], m[2]
		}
		switch {
		case strings.TrimSpace(line) == "", sectionLine.MatchString(line):
		case strings.HasPrefix(line, "#"):
			r.LeftOut["description"]++
			continue
		case key == "":
			r.LeftOut["(not a key)"]++
			continue
		case !keptKey(key):
			r.LeftOut[key]++
			continue
		case key == "lxc.mount.entry" && !mountsDevice(value):
			r.LeftOut[key]++
			continue
		case key == "args":
			// The key has no '=' of its own, so the whole line goes through.
			var n int
			line, n = redactArgs(line)
			if n > 0 {
				r.Replaced[key] += n
			}
		}
		out.WriteString(line)
		out.WriteString(end)
	}
	return []byte(out.String()), r
}

// mountsDevice reports whether an lxc.mount.entry mounts a device node or a directory of
// them (/dev/dri): the only entries gpusplit reads (holders, the container sync).
func mountsDevice(value string) bool {
	src, _, _ := strings.Cut(strings.TrimSpace(value), " ")
	return strings.HasPrefix(path.Clean(src), "/dev/")
}

// redactArgs replaces the secret values of a QEMU command line (a VM's args): every
// property, in every option's comma-separated list, whose name speaks of a secret,
// password, key, token or credential, or is data= (-object secret) or string= (-fw_cfg),
// and every value that itself holds such a name or a URL with a user. Quotes around a
// value stay, and so does everything else, byte for byte: gpusplit's own -device
// options have none of these. It returns the line and how many values it replaced.
func redactArgs(line string) (string, int) {
	var out strings.Builder
	n := 0
	for line != "" {
		i := strings.IndexAny(line, " \t")
		if i < 0 {
			i = len(line)
		}
		if i == 0 {
			out.WriteByte(line[0])
			line = line[1:]
			continue
		}
		tok, c := redactToken(line[:i])
		out.WriteString(tok)
		n += c
		line = line[i:]
	}
	return out.String(), n
}

// sizeFwCfg are the fw_cfg files whose string= is a size, no secret: OVMF's 64-bit
// window, which the address-space plan reads from args.
var sizeFwCfg = []string{"name=opt/ovmf/X-PciMmio64Mb"}

// redactToken redacts the parts of one word of args: QEMU separates properties by ',',
// and writes a ',' inside a value as ",,".
func redactToken(tok string) (string, int) {
	size := slices.ContainsFunc(sizeFwCfg, func(name string) bool { return slices.Contains(strings.Split(tok, ","), name) })
	var out strings.Builder
	n, start := 0, 0
	for i := 0; i <= len(tok); i++ {
		if i+1 < len(tok) && tok[i] == ',' && tok[i+1] == ',' {
			i++
			continue
		}
		if i < len(tok) && tok[i] != ',' {
			continue
		}
		part := tok[start:i]
		if k, v, ok := strings.Cut(part, "="); ok && v != "" && !strings.HasPrefix(v, Redacted) && (secretName(k) || secretValue(v)) &&
			!(size && k == "string" && strings.Trim(v, "0123456789") == "") {
			quotes := v[len(strings.TrimRight(v, `"'`)):]
			part = k + "=" + Redacted + quotes
			n++
		}
		out.WriteString(part)
		if i < len(tok) {
			out.WriteByte(',')
		}
		start = i + 1
	}
	return out.String(), n
}

// secretWords in a property's name mark its value as secret (password=, key-secret=,
// passwd=, token=), as do the names data= (-object secret) and string= (-fw_cfg), which
// carry arbitrary bytes.
var secretWords = []string{"secret", "passw", "pwd", "key", "token", "cred", "auth"}

func secretName(k string) bool {
	k = strings.ToLower(strings.TrimLeft(k, `"'-`))
	if k == "data" || k == "string" {
		return true
	}
	for _, w := range secretWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// secretValue catches a secret nested in a value: "io.systemd.credential:password=x"
// (-smbios type=11), "iscsi://user:pw@host/…" (a drive's file).
func secretValue(v string) bool {
	l := strings.ToLower(v)
	for _, w := range secretWords {
		if i := strings.Index(l, w); i >= 0 && strings.ContainsAny(l[i:], "=:") {
			return true
		}
	}
	if _, after, ok := strings.Cut(l, "://"); ok {
		host, _, _ := strings.Cut(after, "/")
		return strings.Contains(host, "@")
	}
	return false
}

// programName reduces a process's argv[0] to a program's file name: the base name of
// its first word, up to the first character that no file name of a program has (a
// rewritten process title: "postgres: app password=… [local]" becomes "postgres",
// "sshd: root@pts/0" "sshd"). "" when nothing of it looks like one.
func programName(argv0 string) string {
	word, _, _ := strings.Cut(argv0, " ")
	word, _, _ = strings.Cut(word, "\t")
	word = path.Base(word)
	end := strings.IndexFunc(word, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._+-", r))
	})
	if end >= 0 {
		word = word[:end]
	}
	if word == "." || word == ".." {
		return ""
	}
	return word
}

// storageKeys are the properties of storage.cfg that gpusplit reads (where a storage
// keeps snippets); the rest (servers, exports, user names, fingerprints) stays out.
var storageKeys = []string{"path", "content", "nodes", "disable"}

// reduceStorage keeps of storage.cfg its section headers and the properties gpusplit
// reads.
func reduceStorage(file string, data []byte) ([]byte, Redaction) {
	r := Redaction{File: file, LeftOut: map[string]int{}, Replaced: map[string]int{}}
	var out strings.Builder
	for _, line := range strings.SplitAfter(string(data), "\n") {
		t := strings.TrimSpace(line)
		if t == "" || (line[0] != ' ' && line[0] != '\t' && !strings.HasPrefix(t, "#")) {
			out.WriteString(line)
			continue
		}
		k, _, _ := strings.Cut(t, " ")
		if strings.HasPrefix(t, "#") || !slices.Contains(storageKeys, k) {
			r.LeftOut[k]++
			continue
		}
		out.WriteString(line)
	}
	return []byte(out.String()), r
}

// reduceMembers keeps of /etc/pve/.members all but the nodes' addresses.
func reduceMembers(file string, data []byte) ([]byte, Redaction) {
	r := Redaction{File: file, LeftOut: map[string]int{}, Replaced: map[string]int{}}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		r.LeftOut["(not JSON)"]++
		return nil, r
	}
	if nodes, ok := doc["nodelist"].(map[string]any); ok {
		for _, n := range nodes {
			if m, ok := n.(map[string]any); ok {
				if _, had := m["ip"]; had {
					delete(m, "ip")
					r.LeftOut["ip"]++
				}
			}
		}
	}
	b, err := json.MarshalIndent(doc, "", "\t")
	if err != nil {
		return nil, r
	}
	return append(b, '\n'), r
}
