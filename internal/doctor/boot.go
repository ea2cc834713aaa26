package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/bootcfg"
)

// checkGrubOverride finds parameters set in /etc/default/grub that a drop-in under
// /etc/default/grub.d discards by assigning the variable anew (Ubuntu cloud images ship
// 50-cloudimg-settings.cfg that does): they never reach the kernel.
func checkGrubOverride(e *Env) []Finding {
	g, err := bootcfg.ReadGrub(e.H)
	if err != nil || g == nil || len(g.Overrides) == 0 {
		return nil
	}
	byFile := map[string][]bootcfg.Override{}
	var files []string
	for _, o := range g.Overrides {
		key := fmt.Sprintf("%s:%d", o.LostBy.File, o.LostBy.Line)
		if byFile[key] == nil {
			files = append(files, key)
		}
		byFile[key] = append(byFile[key], o)
	}
	var out []Finding
	for _, key := range files {
		overrides := byFile[key]
		lost := overrides[0].LostBy
		var params []string
		evidence := []string{}
		for _, o := range overrides {
			params = append(params, o.Param)
			line := fmt.Sprintf("%s:%d: %s", o.SetBy.File, o.SetBy.Line, strings.TrimSpace(o.SetBy.Text))
			if !slices.Contains(evidence, line) {
				evidence = append(evidence, line)
			}
		}
		evidence = append(evidence, fmt.Sprintf("%s:%d: %s (read after it, so it wins)", lost.File, lost.Line, strings.TrimSpace(lost.Text)))
		out = append(out, Finding{
			Severity: Warning,
			Title:    fmt.Sprintf("%s replaces %s, so %s never reach the kernel", lost.File, lost.Var, strings.Join(params, " ")),
			Evidence: evidence,
			Remedy: fmt.Sprintf("grub-mkconfig reads /etc/default/grub, then every /etc/default/grub.d/*.cfg, and the last assignment wins. "+
				"Append instead of assigning, in a drop-in that sorts after it, e.g. /etc/default/grub.d/99-gpusplit.cfg with "+
				"`%s=\"$%s %s\"` (or put the parameters in GRUB_CMDLINE_LINUX, which the drop-in leaves alone); then run update-grub and reboot.",
				lost.Var, lost.Var, strings.Join(params, " ")),
		})
	}
	return out
}

// checkCmdlineApplied compares the parameters the boot configuration asks for with
// /proc/cmdline: edits that were not applied (update-grub, proxmox-boot-tool refresh) or
// not booted yet.
func checkCmdlineApplied(e *Env) []Finding {
	running, err := e.H.ReadString("/proc/cmdline")
	if err != nil {
		return nil
	}
	loader := bootcfg.Loader(running)
	want, source, tool, ok := configuredCmdline(e, loader)
	if !ok {
		return nil
	}
	missing := bootcfg.Missing(want, running)
	if len(missing) == 0 {
		return nil
	}
	remedy := fmt.Sprintf("Run %s so the boot loader gets the parameters, then reboot: the kernel only reads its command line at boot.", tool)
	if loader == "systemd-boot" {
		remedy += " This host boots with systemd-boot (proxmox-boot-tool): /etc/default/grub is not used here, /etc/kernel/cmdline is."
	}
	return []Finding{{
		Severity: Warning,
		Title:    fmt.Sprintf("%s asks for %s, which the running kernel did not get", source, strings.Join(missing, " ")),
		Evidence: []string{source + ": " + strings.TrimSpace(want), "/proc/cmdline: " + running},
		Remedy:   remedy,
	}}
}

// configuredCmdline returns the command line the boot configuration of loader asks for,
// the file that holds it and the tool that applies it.
func configuredCmdline(e *Env, loader string) (want, source, tool string, ok bool) {
	switch loader {
	case "systemd-boot":
		kc, ok, err := bootcfg.KernelCmdline(e.H)
		if err != nil || !ok {
			return "", "", "", false
		}
		return kc, "/etc/kernel/cmdline", "proxmox-boot-tool refresh", true
	case "grub":
		g, err := bootcfg.ReadGrub(e.H)
		if err != nil || g == nil || !g.Present {
			return "", "", "", false
		}
		return g.Cmdline(), "/etc/default/grub (and /etc/default/grub.d)", "update-grub", true
	}
	return "", "", "", false
}

// checkBootCmdline compares the command line of the boot the log records with the
// running one, and lists what that kernel did not know.
func checkBootCmdline(e *Env) []Finding {
	if e.Log == nil || (e.Log.Cmdline == "" && len(e.Log.Unknown) == 0) {
		return nil
	}
	var out []Finding
	running, _ := e.H.ReadString("/proc/cmdline")
	if e.Log.Cmdline != "" && running != "" && e.Log.Cmdline != running {
		missing := diffParams(e.Log.Cmdline, running)
		added := diffParams(running, e.Log.Cmdline)
		evidence := []string{"kernel: " + e.Log.CmdlineLine, "/proc/cmdline: " + running}
		if len(missing) > 0 {
			evidence = append(evidence, "in the log's boot only: "+strings.Join(missing, " "))
		}
		if len(added) > 0 {
			evidence = append(evidence, "running now only: "+strings.Join(added, " "))
		}
		// What the boot files ask for now, which the log's boot lacked: set since.
		if want, source, _, ok := configuredCmdline(e, bootcfg.Loader(running)); ok {
			if m := bootcfg.Missing(want, e.Log.Cmdline); len(m) > 0 {
				evidence = append(evidence, fmt.Sprintf("%s asks for %s, which the log's boot lacked", source, strings.Join(m, " ")))
			}
		}
		out = append(out, Finding{
			Severity: Info,
			Title:    "the log is of a boot with another command line than the running one",
			Evidence: evidence,
			Remedy: "What the log shows happened with the log's command line: a finding that a parameter would fix may already be " +
				"fixed in the running boot, and one the running boot has may be new. Read the log of this boot (journalctl -k -b) to be sure.",
		})
	}
	var unknown []string
	for _, u := range e.Log.Unknown {
		if !strings.HasPrefix(u, "BOOT_IMAGE=") && !slices.Contains(unknown, u) {
			unknown = append(unknown, u)
		}
	}
	if len(unknown) > 0 {
		var evidence []string
		for _, l := range e.Log.UnknownLines {
			evidence = append(evidence, "kernel: "+l)
		}
		out = append(out, Finding{
			Severity: Warning,
			Title:    "the kernel did not know parameters it was given: " + strings.Join(unknown, " "),
			Evidence: capped(evidence, 6),
			Remedy: "The kernel passes words it does not know to user space, where nothing reads them: they have no effect. Check the " +
				"spelling and whether this kernel has the option: pcie_acs_override= exists only in patched kernels (Proxmox's has it), " +
				"amd_iommu=on is not a value of amd_iommu (iommu-param-invalid), and a module's parameter is written module.param=value.",
		})
	}
	return out
}

// diffParams returns the parameters of a that b lacks, BOOT_IMAGE= aside (it names the
// kernel file, which every upgrade changes).
func diffParams(a, b string) []string {
	have := bootcfg.Tokens(b)
	var out []string
	for _, p := range bootcfg.Tokens(a) {
		if !strings.HasPrefix(p, "BOOT_IMAGE=") && !slices.Contains(have, p) {
			out = append(out, p)
		}
	}
	return out
}
