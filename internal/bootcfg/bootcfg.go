// Package bootcfg reads what the boot configuration asks the kernel command line to be,
// and what it is: the GRUB defaults files (/etc/default/grub and the drop-ins under
// /etc/default/grub.d/ that grub-mkconfig sources after it), /etc/kernel/cmdline (the
// source proxmox-boot-tool writes into systemd-boot's entries) and /proc/cmdline.
package bootcfg

import (
	"errors"
	"io/fs"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
)

// KernelCmdlineFile is where proxmox-boot-tool (systemd-boot) takes the command line from.
const KernelCmdlineFile = "/etc/kernel/cmdline"

// isSpace reports whether the kernel's command line parser separates parameters at c
// (its isspace, for the ASCII characters).
func isSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return true
	}
	return false
}

// Tokens splits a kernel command line as the kernel does (spaces separate; double quotes group, as in
// `foo="a b"`), keeping each parameter's text as written.
//
// As in the kernel, a double quote anywhere in a parameter opens or closes a quoted
// stretch, and an unterminated quote runs to the end of the line.
func Tokens(cmdline string) []string {
	var out []string
	i := 0
	for {
		for i < len(cmdline) && isSpace(cmdline[i]) {
			i++
		}
		if i >= len(cmdline) {
			return out
		}
		start := i
		quoted := false
		for ; i < len(cmdline); i++ {
			c := cmdline[i]
			if isSpace(c) && !quoted {
				break
			}
			if c == '"' {
				quoted = !quoted
			}
		}
		out = append(out, cmdline[start:i])
	}
}

// Param returns the name of a parameter token ("iommu" of "iommu=pt", "quiet" of "quiet").
//
// Double quotes are left out of the name, as the kernel leaves them out (`"foo=a b"` is foo).
func Param(token string) string {
	name, _, _ := strings.Cut(token, "=")
	return strings.ReplaceAll(name, `"`, "")
}

// Loader tells the boot loader from /proc/cmdline: "grub" when it starts with BOOT_IMAGE=, "systemd-boot"
// when it starts with initrd=\EFI\ (Proxmox's proxmox-boot-tool: initrd=\EFI\proxmox\...), "" when unknown.
func Loader(procCmdline string) string {
	s := strings.TrimLeft(procCmdline, " \t\n\v\f\r")
	switch {
	case strings.HasPrefix(s, "BOOT_IMAGE="):
		return "grub"
	case strings.HasPrefix(s, "initrd=") && len(s) >= len(`initrd=\EFI\`) &&
		strings.EqualFold(s[len("initrd="):len(`initrd=\EFI\`)], `\EFI\`):
		// Paths on the EFI system partition are not case sensitive.
		return "systemd-boot"
	}
	return ""
}

// KernelCmdline reads /etc/kernel/cmdline (the systemd-boot / proxmox-boot-tool source); ok=false when absent.
//
// proxmox-boot-tool takes the file's first line as the command line ("placed as one line
// in /etc/kernel/cmdline"), so only that line is returned, without surrounding white space.
func KernelCmdline(h *host.Host) (cmdline string, ok bool, err error) {
	b, err := h.ReadFile(KernelCmdlineFile)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(first), true, nil
}

// Missing returns the tokens of want that are not in have (compared as written, after Tokens), in order.
// Parameters the boot loader or initramfs add are ignored in have only: BOOT_IMAGE=, initrd=.
//
// A token is reported once however often want repeats it. A token also counts as present
// when it differs from one in have only by its double quotes: GRUB passes `foo="a b"`
// from its configuration to the kernel as `"foo=a b"`.
func Missing(want, have string) []string {
	present := map[string]bool{}
	unquoted := map[string]bool{}
	for _, t := range Tokens(have) {
		switch Param(t) {
		case "BOOT_IMAGE", "initrd":
			continue
		}
		present[t] = true
		unquoted[unquote(t)] = true
	}
	var out []string
	seen := map[string]bool{}
	for _, t := range Tokens(want) {
		if present[t] || unquoted[unquote(t)] || seen[t] {
			continue
		}
		seen[t] = true
		out = append(out, t)
	}
	return out
}

func unquote(token string) string { return strings.ReplaceAll(token, `"`, "") }
