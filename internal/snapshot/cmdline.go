package snapshot

import (
	"bytes"
	"slices"
	"strings"
)

// The kernel's command line reaches a snapshot four ways: /proc/cmdline, the kernel
// log's "Kernel command line:" lines, /etc/kernel/cmdline and the GRUB defaults. Some of
// its parameters carry secrets, for an initramfs to log in or unlock with: dracut's
// iSCSI and CIFS credentials, a LUKS key file, systemd credentials, a crypt target's
// key. Of those the snapshot keeps the parameter and replaces its value by Redacted,
// alike in all four, so that they still agree where they agreed (the doctor compares
// them) and the archive still says what was set.

// secretParams are the parameters whose values are secrets by what they are, with the
// documentation that names them. Names are compared as the kernel compares them: '-'
// and '_' alike. Most of them the rule of secretParamWords catches too; these are the
// ones known, kept here so that a change to the rule cannot lose them.
var secretParams = []string{
	// dracut.cmdline(7): iSCSI CHAP credentials, and the older names dracut's iscsiroot
	// and open-iscsi's initramfs scripts still read.
	"rd.iscsi.username", "rd.iscsi.password", "rd.iscsi.in.username", "rd.iscsi.in.password",
	"iscsi_username", "iscsi_password", "iscsi_in_username", "iscsi_in_password",
	// dracut.cmdline(7): the CIFS root's user and password.
	"cifsuser", "cifspass",
	// dracut.cmdline(7), systemd-cryptsetup-generator(8): a LUKS key file (a path, and
	// where the key is); mkinitcpio's encrypt hook: cryptkey; dracut's masterkey,
	// ecryptfs and integrity modules: their key files.
	"rd.luks.key", "luks.key", "cryptkey", "masterkey", "ecryptfskey", "evmkey",
	// kernel-command-line(7): a systemd credential, value and all.
	"systemd.set_credential", "systemd.set_credential_binary",
	// The kernel's dm-init: a crypt target's table holds its key.
	"dm_mod.create",
}

// secretParamWords in a parameter's name mark its value as secret, case aside
// (iscsi_target_password, rd.iscsi.in.password, api_token, ...), but for the harmless
// names that contain one (harmlessStems).
var secretParamWords = []string{"pass", "pwd", "key", "token", "secret", "cred"}

// harmlessStems are the parts of real parameter names that contain a word of
// secretParamWords and say nothing secret: iommu.passthrough, spec_store_bypass_disable,
// rd.vconsole.keymap.
var harmlessStems = []string{"passthrough", "bypass", "keymap"}

// normParam is a parameter's name as the kernel compares it, '-' and '_' alike, and
// case aside.
func normParam(name string) string {
	return strings.ToLower(strings.ReplaceAll(name, "-", "_"))
}

// secretParam reports whether a parameter's value is a secret by the parameter's name.
func secretParam(name string) bool {
	n := normParam(name)
	if slices.Contains(secretParams, n) {
		return true
	}
	for _, s := range harmlessStems {
		n = strings.ReplaceAll(n, s, "")
	}
	for _, w := range secretParamWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// redactParam replaces the secret values of one parameter of a command line, as the
// kernel splits it (see bootcfg.Tokens), and returns it with the names of the parameters
// whose values it replaced. q is the quote that groups words in it: `"` on the command
// line, `\"` inside a shell's double quotes.
//
// A parameter named for a secret (secretParam) loses its whole value; any other loses
// the user and password of a URL ("root=cifs://user:pass@server/share" keeps
// "cifs://<redacted>@server/share") or of dracut's iSCSI root ("netroot=iscsi:user:pass@…"),
// and of each comma-separated part of its value that is itself a parameter, the value by
// the same rules ("cifsroot=//server/share,username=u,password=<redacted>",
// "rd.iscsi.param=node.session.auth.password=<redacted>"). None of the parameters that
// gpusplit's doctor and boot checks read is touched (TestDoctorParamsSurvive). Quotes
// stay balanced, and a redacted parameter stays as it is, so that redacting twice is
// redacting once.
func redactParam(tok, q string) (string, []string) {
	i := strings.IndexByte(tok, '=')
	if i < 0 {
		return tok, nil
	}
	name, val := strings.ReplaceAll(tok[:i], q, ""), tok[i+1:]
	bare := strings.ReplaceAll(val, q, "")
	if bare == "" || bare == Redacted {
		return tok, nil
	}
	var out string
	var names []string
	if secretParam(name) {
		out, names = tok[:i+1]+Redacted, []string{name}
	} else {
		v, n := redactUserinfo(val, q)
		if n {
			names = append(names, name)
		}
		parts := strings.Split(v, ",")
		for j, p := range parts {
			var inner []string
			parts[j], inner = redactParam(p, q)
			names = append(names, inner...)
		}
		if len(names) == 0 {
			return tok, nil
		}
		out = tok[:i+1] + strings.Join(parts, ",")
	}
	if strings.Count(out, q)%2 != strings.Count(tok, q)%2 {
		out += q
	}
	return out, names
}

// redactUserinfo replaces the user and password of every URL in v
// (scheme://user:pass@host/…, up to the host's end) and of a dracut iSCSI root
// (iscsi:user:pass[:reverse:pass]@server:…), and reports whether it replaced any.
func redactUserinfo(v, q string) (string, bool) {
	changed := false
	replace := func(start, at int) {
		if u := v[start:at]; u != "" && strings.ReplaceAll(u, q, "") != Redacted {
			v, changed = v[:start]+Redacted+v[at:], true
		}
	}
	if rest, ok := strings.CutPrefix(strings.TrimLeft(v, `"\`), "iscsi:"); ok && strings.Contains(rest, "@") {
		start := len(v) - len(rest)
		replace(start, strings.LastIndex(v, "@"))
	}
	for from := 0; ; {
		i := strings.Index(v[from:], "://")
		if i < 0 {
			return v, changed
		}
		start := from + i + 3
		end := start + strings.IndexFunc(v[start:]+"/", func(r rune) bool { return strings.ContainsRune("/?#,\"", r) })
		if at := strings.LastIndex(v[start:end], "@"); at >= 0 {
			replace(start, start+at)
		}
		from = min(start, len(v))
	}
}

// kernelTokens returns the spans of the parameters of a command line as bootcfg.Tokens
// splits it: blanks separate, and q groups (an unterminated q runs to the end).
func kernelTokens(s, q string) [][2]int {
	var spans [][2]int
	for i := 0; ; {
		for i < len(s) && isBlank(s[i]) {
			i++
		}
		if i >= len(s) {
			return spans
		}
		start, quoted := i, false
		for i < len(s) && (quoted || !isBlank(s[i])) {
			if strings.HasPrefix(s[i:], q) {
				quoted = !quoted
				i += len(q)
				continue
			}
			i++
		}
		spans = append(spans, [2]int{start, i})
	}
}

func isBlank(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return true
	}
	return false
}

// redactCmdline redacts the parameters of the command line s, byte for byte but for the
// values replaced, and counts them by parameter in r.
func redactCmdline(s, q string, r *Redaction) string {
	var out strings.Builder
	last := 0
	for _, sp := range kernelTokens(s, q) {
		tok, names := redactParam(s[sp[0]:sp[1]], q)
		if names == nil {
			continue
		}
		out.WriteString(s[last:sp[0]])
		out.WriteString(tok)
		last = sp[1]
		for _, n := range names {
			r.Replaced[n]++
		}
	}
	if last == 0 {
		return s
	}
	out.WriteString(s[last:])
	return out.String()
}

func newRedaction(file string) Redaction {
	return Redaction{File: file, LeftOut: map[string]int{}, Replaced: map[string]int{}}
}

// reduceCmdline redacts a file that is a kernel command line: /proc/cmdline,
// /etc/kernel/cmdline.
func reduceCmdline(file string, data []byte) ([]byte, Redaction) {
	r := newRedaction(file)
	return []byte(redactCmdline(string(data), `"`, &r)), r
}

// Markers of the kernel log's lines that hold the command line or parameters of it: the
// kernel's own ("Kernel command line: …", and x86's earlier "Command line: …"), its list
// of the parameters it passes on to init, and dracut's, which it may log there.
const (
	cmdlineMarker    = "ommand line: "                            // "Kernel command line: ", "Command line: "
	dracutMarker     = "command line parameters: "                // "Using kernel command line parameters: "
	unknownMarker    = `Unknown kernel command line parameters "` // … ", will be passed to user space."
	unknownEndMarker = `", will be passed to user space`
)

// redactKernelLog redacts the command lines of a kernel log, in any form the doctor
// reads (/dev/kmsg records, dmesg or journal text): the rest of a line after the
// marker of one. Every other line stays as it is. The log is not changed: a redacted
// log is a copy, and a log with nothing to redact is returned as it is.
func redactKernelLog(file string, data []byte) ([]byte, Redaction) {
	r := newRedaction(file)
	var out *bytes.Buffer // from the first line that changes
	for pos := 0; pos < len(data); {
		line := data[pos:]
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i+1]
		}
		start := pos
		pos += len(line)
		red := line
		if bytes.Contains(line, []byte("ommand line")) {
			if s := redactLogLine(string(line), &r); s != string(line) {
				red = []byte(s)
				if out == nil {
					out = bytes.NewBuffer(make([]byte, 0, len(data)+64))
					out.Write(data[:start])
				}
			}
		}
		if out != nil {
			out.Write(red)
		}
	}
	if out == nil {
		return data, r
	}
	return out.Bytes(), r
}

// redactLogLine redacts the command line in one line of a kernel log, if it holds one.
func redactLogLine(s string, r *Redaction) string {
	start, end := -1, len(s)
	switch {
	case strings.Contains(s, unknownMarker):
		start = strings.Index(s, unknownMarker) + len(unknownMarker)
		if e := strings.Index(s[start:], unknownEndMarker); e >= 0 {
			end = start + e
		}
	case strings.Contains(s, cmdlineMarker):
		start = strings.Index(s, cmdlineMarker) + len(cmdlineMarker)
	case strings.Contains(s, dracutMarker):
		start = strings.Index(s, dracutMarker) + len(dracutMarker)
	default:
		return s
	}
	return s[:start] + redactCmdline(s[start:end], `"`, r) + s[end:]
}

// reduceGrub redacts the command lines of a GRUB defaults file (/etc/default/grub,
// /etc/default/grub.d/*.cfg), a shell script: the parameters of every stretch of it,
// quoted or not, as the kernel would get them from GRUB_CMDLINE_LINUX and
// GRUB_CMDLINE_LINUX_DEFAULT, comments alike. A value replaced outside quotes is quoted
// ('<redacted>'), so that sh reads the file as before and gives the parameter the value
// Redacted, as /proc/cmdline's copy has it. Only the values change: the file still
// parses to the same assignments of the same parameters.
func reduceGrub(file string, data []byte) ([]byte, Redaction) {
	r := newRedaction(file)
	s := string(data)
	type edit struct {
		start, end int
		with       string
		names      []string
	}
	var edits []edit
	segs := shellSegments(s)
	// valueOf is the stretch whose first word is the value of a secret parameter named
	// just before it (name="value"), and valueNames that parameter.
	valueOf, valueNames := -1, []string(nil)
	for k, sg := range segs {
		q := segmentQuote(sg.quote)
		text := s[sg.start:sg.end]
		spans := kernelTokens(text, q)
		for t, sp := range spans {
			tok := text[sp[0]:sp[1]]
			if k == valueOf && t == 0 && sp[0] == 0 {
				if strings.ReplaceAll(tok, q, "") != Redacted {
					with := Redacted
					if strings.Count(tok, q)%2 == 1 {
						with += q
					}
					edits = append(edits, edit{sg.start, sg.start + sp[1], with, valueNames})
				}
				continue
			}
			red, names := redactParam(tok, q)
			if names != nil {
				if sg.quote == 0 {
					red = strings.ReplaceAll(red, Redacted, "'"+Redacted+"'")
				}
				edits = append(edits, edit{sg.start + sp[0], sg.start + sp[1], red, names})
				continue
			}
			if t == len(spans)-1 && sp[1] == len(text) && strings.HasSuffix(tok, "=") &&
				k+1 < len(segs) && segs[k+1].quote != 0 && segs[k+1].start == sg.end+1 {
				if _, secret := redactParam(tok+"x", q); secret != nil {
					valueOf, valueNames = k+1, secret
				}
			}
		}
	}
	if len(edits) == 0 {
		return data, r
	}
	var out strings.Builder
	last := 0
	for _, e := range edits {
		out.WriteString(s[last:e.start])
		out.WriteString(e.with)
		last = e.end
		for _, n := range e.names {
			r.Replaced[n]++
		}
	}
	out.WriteString(s[last:])
	return []byte(out.String()), r
}

// segmentQuote is what groups the words of a kernel command line in a stretch of a
// shell script: in '…' a double quote, which reaches the kernel; in "…" an escaped one;
// outside quotes nothing, as the shell's own quotes end the stretch.
func segmentQuote(quote byte) string {
	switch quote {
	case '\'':
		return `"`
	case '"':
		return `\"`
	}
	return "\x00"
}

// segment is a stretch of a shell script: its contents [start, end), and the quote it
// is in: 0 outside quotes, else the quote character.
type segment struct {
	start, end int
	quote      byte
}

// shellSegments splits a shell script into its stretches outside quotes, inside '…' and
// inside "…" (where a backslash escapes the next character). An unterminated quote runs
// to the end, as sh would not read it anyway.
func shellSegments(s string) []segment {
	var segs []segment
	start := 0
	for i := 0; i < len(s); {
		switch s[i] {
		case '\\':
			i += 2
		case '\'', '"':
			if i > start {
				segs = append(segs, segment{start: start, end: i})
			}
			quote := s[i]
			j := i + 1
			for j < len(s) && s[j] != quote {
				if quote == '"' && s[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j, len(s))
			segs = append(segs, segment{start: i + 1, end: j, quote: quote})
			i, start = j+1, j+1
		default:
			i++
		}
	}
	if start < len(s) {
		segs = append(segs, segment{start: start, end: len(s)})
	}
	return segs
}
