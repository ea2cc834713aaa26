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
