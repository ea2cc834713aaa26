// Package deb holds what scripts/build-deb puts into the Debian packages beside the
// binaries (the copyright file, the lintian overrides), and the test that builds the
// packages, installs them into a throwaway root and uses what they installed.
package deb

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// tools are what the test needs beyond Go; scripts/vm-deps installs them.
var tools = []string{"git", "dpkg", "dpkg-deb", "dpkg-shlibdeps", "dpkg-query", "lintian", "man", "bash", "systemd-analyze"}

// metricsUnits are the only systemd units the package ships: the metrics timer and its
// service, which nothing enables but the administrator. The boot-time files come from
// gpusplit persist install.
var metricsUnits = []string{"./usr/lib/systemd/system/gpusplit-metrics.service", "./usr/lib/systemd/system/gpusplit-metrics.timer"}

// bashCompletion is bash-completion's library, which cobra's bash script uses.
const bashCompletion = "/usr/share/bash-completion/bash_completion"

func TestPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the packages")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing: run ./scripts/vm-deps, which installs dpkg-dev, lintian, man-db, bash-completion and systemd", tool)
		}
	}
	if _, err := os.Stat(bashCompletion); err != nil {
		t.Fatalf("%v: run ./scripts/vm-deps, which installs bash-completion", err)
	}

	out := t.TempDir()
	build := exec.Command("../../scripts/build-deb", out)
	var stdout, stderr bytes.Buffer
	build.Stdout, build.Stderr = &stdout, &stderr
	if err := build.Run(); err != nil {
		t.Fatalf("scripts/build-deb: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	debs := strings.Fields(stdout.String())
	if len(debs) != 2 {
		t.Fatalf("scripts/build-deb printed %q, want the paths of the two packages", stdout.String())
	}
	main, cuda := debs[0], debs[1]
	m := regexp.MustCompile(`/gpusplit_([0-9][A-Za-z0-9.+~]*)_amd64\.deb$`).FindStringSubmatch(main)
	if m == nil || !strings.HasSuffix(cuda, "/gpusplit-cuda_"+m[1]+"_amd64.deb") {
		t.Fatalf("packages %s, %s: want gpusplit_<version>_amd64.deb and gpusplit-cuda_<version>_amd64.deb", main, cuda)
	}
	version := m[1]
	if got := field(t, main, "Version"); got != version {
		t.Errorf("the control file says version %q, the file name %q", got, version)
	}
	if dep := field(t, cuda, "Depends"); !strings.Contains(dep, "gpusplit (= "+version+")") || !strings.Contains(dep, "libc6") {
		t.Errorf("gpusplit-cuda depends on %q, want gpusplit of its version and libc6", dep)
	}
	if dep := field(t, main, "Depends"); dep != "" {
		t.Errorf("gpusplit (static) depends on %q", dep)
	}

	checkContents(t, main, []string{
		"./usr/bin/gpusplit",
		"./usr/share/man/man1/gpusplit.1.gz",
		"./usr/share/man/man1/gpusplit-topo.1.gz",
		"./usr/share/man/man1/gpusplit-pve-sync.1.gz",
		"./usr/share/man/man1/gpusplit-persist-install.1.gz",
		"./usr/share/bash-completion/completions/gpusplit",
		"./usr/share/zsh/vendor-completions/_gpusplit",
		"./usr/share/fish/vendor_completions.d/gpusplit.fish",
		"./usr/share/doc/gpusplit/examples/split.toml",
		"./usr/share/doc/gpusplit/examples/grafana-dashboard.json",
		metricsUnits[0], metricsUnits[1],
		"./usr/share/doc/gpusplit/copyright",
		"./usr/share/doc/gpusplit/changelog.gz",
		"./usr/share/lintian/overrides/gpusplit",
	})
	checkContents(t, cuda, []string{
		"./usr/bin/gpusplit-cuda",
		"./usr/share/man/man1/gpusplit-cuda.1.gz",
		"./usr/share/doc/gpusplit-cuda/copyright",
	})

	// lintian: clean but for the overridden tags, each with its reason in the file.
	lint := exec.Command("lintian", "--fail-on", "error,warning", "--display-info", main, cuda)
	if b, err := lint.CombinedOutput(); err != nil {
		t.Errorf("lintian: %v\n%s", err, b)
	}

	root := install(t, main, cuda)
	bin := filepath.Join(root, "usr/bin/gpusplit")
	got := run(t, nil, bin, "--demo", "topo")
	if !strings.Contains(got, "GPU7") || !strings.Contains(got, "NODE") {
		t.Errorf("the installed gpusplit --demo topo:\n%s", got)
	}
	if got := run(t, nil, bin, "--version"); !strings.Contains(got, version) {
		t.Errorf("the installed gpusplit --version says %q, want %s", got, version)
	}
	if got := run(t, nil, filepath.Join(root, "usr/bin/gpusplit-cuda"), "--demo", "topo"); !strings.Contains(got, "GPU7") {
		t.Errorf("the installed gpusplit-cuda --demo topo:\n%s", got)
	}
	// The packaged build's boot unit runs the packaged binary.
	if got := run(t, nil, bin, "--demo", "persist", "show", "--vfio", "numa:1"); !strings.Contains(got, "ExecStart=/usr/bin/gpusplit apply") {
		t.Errorf("persist show of the packaged build does not run /usr/bin/gpusplit:\n%s", got)
	}

	// Every page renders without a warning, and man finds them by name.
	pages, _ := filepath.Glob(filepath.Join(root, "usr/share/man/man1/*.1.gz"))
	if len(pages) < 15 {
		t.Errorf("%d man pages installed: %v", len(pages), pages)
	}
	for _, p := range pages {
		c := exec.Command("man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z", p)
		var errOut bytes.Buffer
		c.Stderr = &errOut
		if err := c.Run(); err != nil || errOut.Len() > 0 {
			t.Errorf("man -l %s: %v\n%s", filepath.Base(p), err, errOut.String())
		}
	}
	manEnv := []string{"MANPAGER=cat", "PAGER=cat", "MANWIDTH=80", "LC_ALL=C.UTF-8"}
	page := run(t, manEnv, "man", "-l", filepath.Join(root, "usr/share/man/man1/gpusplit-topo.1.gz"))
	for _, want := range []string{"gpusplit-topo - Show how the GPUs are connected", "EXIT STATUS", "FILES", "/sys/bus/pci/devices/*", "--format"} {
		if !strings.Contains(page, want) {
			t.Errorf("man -l gpusplit-topo.1.gz lacks %q:\n%s", want, page)
		}
	}
	page = run(t, manEnv, "man", "-M", filepath.Join(root, "usr/share/man"), "gpusplit-persist-install")
	if !strings.Contains(page, "/usr/bin/gpusplit") || strings.Contains(page, "/usr/local/bin/gpusplit") {
		t.Errorf("man gpusplit-persist-install does not name /usr/bin/gpusplit as the unit's binary:\n%s", page)
	}

	// TAB in bash with the installed script, loaded as bash-completion loads it; the
	// script asks the installed binary, which reads the sample host.
	tab := func(line string) []string {
		script := fmt.Sprintf(`source %s; source %s
COMP_LINE=$1; read -ra COMP_WORDS <<<"$COMP_LINE"; [[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]}-1)); COMP_POINT=${#COMP_LINE}
__start_gpusplit 2>/dev/null; printf '%%s\n' "${COMPREPLY[@]}"`, bashCompletion, filepath.Join(root, "usr/share/bash-completion/completions/gpusplit"))
		return strings.Fields(run(t, []string{"PATH=" + filepath.Join(root, "usr/bin") + ":/usr/bin:/bin"}, "bash", "-c", script, "bash", line))
	}
	for _, tc := range []struct{ line, want string }{
		{"gpusplit to", "topo"},
		{"gpusplit --demo pve vm-layout --vm ", "131"},      // the sample host's VM
		{"gpusplit --demo topo --devices ", "0000:81:00.0"}, // one of its GPUs
	} {
		if got := tab(tc.line); !slices.Contains(got, tc.want) {
			t.Errorf("bash completes %q to %q, want %s among them", tc.line, got, tc.want)
		}
	}
	zsh, _ := os.ReadFile(filepath.Join(root, "usr/share/zsh/vendor-completions/_gpusplit"))
	fish, _ := os.ReadFile(filepath.Join(root, "usr/share/fish/vendor_completions.d/gpusplit.fish"))
	if !bytes.HasPrefix(zsh, []byte("#compdef gpusplit")) || !bytes.Contains(fish, []byte("complete -c gpusplit")) {
		t.Errorf("the zsh or fish completion is not gpusplit's:\n%.60s\n%.60s", zsh, fish)
	}

	// Installing enabled nothing (systemctl enable would link the timer under /etc),
	// and removing takes every file away.
	for _, p := range []string{"etc", "lib/systemd"} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			t.Errorf("installing created %s", p)
		}
	}
	checkUnits(t, root, bin)
	dpkg(t, root, "-r", "gpusplit-cuda", "gpusplit")
	left, _ := filepath.Glob(filepath.Join(root, "usr/*/*gpusplit*"))
	if len(left) > 0 {
		t.Errorf("dpkg -r left %v", left)
	}
}

// field returns a field of a package's control file.
func field(t *testing.T, deb, name string) string {
	t.Helper()
	b, err := exec.Command("dpkg-deb", "--field", deb, name).Output()
	if err != nil {
		t.Fatalf("dpkg-deb --field %s %s: %v", deb, name, err)
	}
	return strings.TrimSpace(string(b))
}

// checkContents checks that the package holds want, owned by root, with the modes
// Debian expects, and no maintainer script: installing it runs nothing.
func checkContents(t *testing.T, deb string, want []string) {
	t.Helper()
	b, err := exec.Command("dpkg-deb", "--contents", deb).Output()
	if err != nil {
		t.Fatalf("dpkg-deb --contents %s: %v", deb, err)
	}
	have := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 {
			t.Errorf("%s: cannot read %q", filepath.Base(deb), l)
			continue
		}
		mode, owner, name := f[0], f[1], f[5]
		have[name] = true
		wantMode := "-rw-r--r--"
		switch {
		case strings.HasPrefix(mode, "d"):
			wantMode = "drwxr-xr-x"
		case strings.HasPrefix(name, "./usr/bin/"):
			wantMode = "-rwxr-xr-x"
		}
		if owner != "root/root" || mode != wantMode {
			t.Errorf("%s: %s is %s %s, want root/root %s", filepath.Base(deb), name, mode, owner, wantMode)
		}
		if strings.HasPrefix(name, "./etc/") || strings.Contains(name, "/systemd/") && !strings.HasSuffix(name, "/") && !slices.Contains(metricsUnits, name) {
			t.Errorf("%s: %s: the boot-time files come from gpusplit persist install, not from the package", filepath.Base(deb), name)
		}
	}
	for _, w := range want {
		if !have[w] {
			t.Errorf("%s lacks %s", filepath.Base(deb), w)
		}
	}
	info, err := exec.Command("dpkg-deb", "--info", deb).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, script := range []string{"preinst", "postinst", "prerm", "postrm", "triggers"} {
		if bytes.Contains(info, []byte(" "+script+" ")) {
			t.Errorf("%s has a %s script", filepath.Base(deb), script)
		}
	}
}

// install installs the packages into a new root with dpkg, as on a host but for the
// root. The root's dpkg database holds this host's libc6, which gpusplit-cuda needs.
func install(t *testing.T, debs ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	libc, err := exec.Command("dpkg-query", "--status", "libc6").Output()
	if err != nil {
		t.Fatalf("dpkg-query --status libc6: %v", err)
	}
	if err := os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), libc, 0o644); err != nil {
		t.Fatal(err)
	}
	dpkg(t, root, append([]string{"--install"}, debs...)...)
	return root
}

func dpkg(t *testing.T, root string, args ...string) {
	t.Helper()
	// --path-include undoes a path-exclude of this machine's dpkg.cfg.d (container images
	// leave out /usr/share/man and /usr/share/doc), which would hide what is tested.
	c := exec.Command("dpkg", append([]string{"--root=" + root, "--force-not-root", "--force-script-chrootless", "--log=/dev/null", "--path-include=*"}, args...)...)
	if b, err := c.CombinedOutput(); err != nil {
		t.Fatalf("dpkg %s: %v\n%s", strings.Join(args, " "), err, b)
	}
}

func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	c := exec.Command(name, args...)
	c.Env = append(os.Environ(), env...)
	b, err := c.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, b, msg)
	}
	return string(b)
}

// checkUnits checks the metrics units as installed: systemd-analyze verify finds
// nothing to say of them (their keys, the binary they run, the man page their
// Documentation= names), and the service's command line, run on the sample host,
// writes the textfile.
func checkUnits(t *testing.T, root, bin string) {
	t.Helper()
	dir := t.TempDir()
	var service string
	for _, u := range metricsUnits {
		b, err := os.ReadFile(filepath.Join(root, u))
		if err != nil {
			t.Fatal(err)
		}
		// The unit as it is, but for the binary, which is the installed one here.
		unit := strings.ReplaceAll(string(b), "/usr/bin/gpusplit ", bin+" ")
		if strings.HasSuffix(u, ".service") {
			service = unit
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(u)), []byte(unit), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	verify := exec.Command("systemd-analyze", "verify", "gpusplit-metrics.service", "gpusplit-metrics.timer")
	verify.Dir = dir
	verify.Env = append(os.Environ(), "MANPATH="+filepath.Join(root, "usr/share/man"), "SYSTEMD_LOG_COLOR=0")
	if out, err := verify.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	timer, _ := os.ReadFile(filepath.Join(dir, "gpusplit-metrics.timer"))
	for _, want := range []string{"OnUnitActiveSec=1min", "WantedBy=timers.target"} {
		if !strings.Contains(string(timer), want) {
			t.Errorf("the timer lacks %s:\n%s", want, timer)
		}
	}

	var args []string
	for _, l := range strings.Split(service, "\n") {
		if cmd, ok := strings.CutPrefix(l, "ExecStart="); ok {
			args = strings.Fields(cmd)
		}
	}
	textDir := t.TempDir()
	if len(args) < 4 || args[0] != bin || args[len(args)-2] != "--textfile" {
		t.Fatalf("the service runs %q, want %s metrics --textfile DIR", args, bin)
	}
	if !strings.Contains(service, "ReadWritePaths=-"+args[len(args)-1]+"\n") {
		t.Errorf("the service writes %s but may not (ReadWritePaths=):\n%s", args[len(args)-1], service)
	}
	args = append(append([]string{"--demo"}, args[1:len(args)-1]...), textDir)
	run(t, []string{"XDG_CACHE_HOME=" + t.TempDir()}, bin, args...)
	if b, err := os.ReadFile(filepath.Join(textDir, "gpusplit.prom")); err != nil || !bytes.Contains(b, []byte("gpusplit_gpu_driver_info{")) {
		t.Errorf("the service's command wrote no metrics: %v", err)
	}
}
