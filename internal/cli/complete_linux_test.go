package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// bashCompletion is the bash-completion package's entry point, which cobra's bash script
// needs (_get_comp_words_by_ref, _filedir). Proxmox VE and Debian install it by default.
const bashCompletion = "/usr/share/bash-completion/bash_completion"

// TAB in the shells the package installs completions for, with the scripts that
// 'gpusplit completion SHELL' writes, against the built binary. Bash, the shell of
// Debian and Proxmox VE, must be there with bash-completion; zsh and fish are skipped
// where they are not installed, saying so.
func TestShellCompletion(t *testing.T) {
	dir := completionHost(t)
	t.Run("bash", func(t *testing.T) { testBash(t, dir) })
	t.Run("zsh", func(t *testing.T) { testZsh(t, dir) })
	t.Run("fish", func(t *testing.T) { testFish(t, dir) })
}

// completionHost builds gpusplit into a new directory, with a few files for the flags
// that take files, and returns the directory: the shells run in it, with it first in PATH.
func completionHost(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "gpusplit"), "../../cmd/gpusplit").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, name := range []string{"snap.tar.gz", "snap-notes.txt", "split.toml", "split.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "hostdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// completionScript writes what 'gpusplit completion SHELL' prints to dir/name.
func completionScript(t *testing.T, dir, shell, name string) string {
	t.Helper()
	script, err := exec.Command(filepath.Join(dir, "gpusplit"), "completion", shell).Output()
	if err != nil {
		t.Fatalf("gpusplit completion %s: %v", shell, err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, script, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// tabCases are lines typed, then TAB, and the line the user sees after it.
var tabCases = []struct{ typed, want string }{
	{"gpusplit --demo pve vm-layout --vm ", "gpusplit --demo pve vm-layout --vm 131 "},
	{"gpusplit --demo pve vm-layout --vm=", "gpusplit --demo pve vm-layout --vm=131 "},
	{"gpusplit --demo nccl-topo --vm 1", "gpusplit --demo nccl-topo --vm 131 "},
	{"gpusplit --demo topo --devices 0000:e", "gpusplit --demo topo --devices 0000:e1:00.0 "},
	{"gpusplit --demo topo --devices num", "gpusplit --demo topo --devices numa:"},
	{"gpusplit --demo topo --devices numa:1", "gpusplit --demo topo --devices numa:1 "},
	{"gpusplit --demo topo --devices 10", "gpusplit --demo topo --devices 10de:2bb1 "},
	{"gpusplit --demo plan --vfio 0000:01:00.0,nu", "gpusplit --demo plan --vfio 0000:01:00.0,numa:"},
	{"gpusplit --demo plan --vfio 0000:01:00.0,0000:e", "gpusplit --demo plan --vfio 0000:01:00.0,0000:e1:00.0"},
	{"gpusplit --demo plan --vfio 0000:01:00.0,numa:1", "gpusplit --demo plan --vfio 0000:01:00.0,numa:1"},
	{"gpusplit --demo doctor --only iommu-tr", "gpusplit --demo doctor --only iommu-translated "},
	{"gpusplit --demo topo --format s", "gpusplit --demo topo --format svg "},
	{"gpusplit --demo inventory -o j", "gpusplit --demo inventory -o json "},
	{"gpusplit --demo pers", "gpusplit --demo persist "},
	{"gpusplit --demo persist ins", "gpusplit --demo persist install "},
	{"gpusplit --root sn", "gpusplit --root snap.tar.gz "},
	{"gpusplit --root hostd", "gpusplit --root hostdir/"},
	{"gpusplit --demo plan --config spl", "gpusplit --demo plan --config split.toml "},
	{"gpusplit --demo doctor --kernel-log split.tx", "gpusplit --demo doctor --kernel-log split.txt "},
	{"gpusplit --demo topo spl", "gpusplit --demo topo spl"},
	{"gpusplit --demo apply --parallel spl", "gpusplit --demo apply --parallel spl"},
}

// pressTab types each case's line and TAB into the shell on term, then C-x l, which the
// shell's setup binds to printing LINE<the line> and emptying it.
func pressTab(t *testing.T, term *terminal) {
	t.Helper()
	for _, tc := range tabCases {
		term.write(t, tc.typed+"\t\x18l")
		if got := term.waitFor(t, "LINE<"); got != tc.want {
			t.Errorf("%q + TAB gives %q, want %q", tc.typed, got, tc.want)
		}
	}
}

// TAB in a real interactive bash, through readline, on a terminal: the line after TAB is
// what the user sees. It covers what the unit tests cannot: bash's word splitting at ':'
// and '=', the script's quoting, readline's insertion of one match or of the common part
// of several.
func testBash(t *testing.T, dir string) {
	if _, err := os.Stat(bashCompletion); err != nil {
		t.Fatalf("%v: run ./scripts/vm-deps, which installs bash-completion", err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	script := completionScript(t, dir, "bash", "gpusplit.bash")
	rc := `PS1='$ '
bind 'set bell-style none'
source ` + bashCompletion + `
source ` + script + `
_line() { printf '\nLINE<%s>\n' "$READLINE_LINE"; READLINE_LINE=; READLINE_POINT=0; }
bind -x '"\C-xl": _line'
echo READY
`
	if err := os.WriteFile(filepath.Join(dir, "rc"), []byte(rc), 0o644); err != nil {
		t.Fatal(err)
	}
	term := startTerminal(t, dir, nil, bash, "--noprofile", "--rcfile", filepath.Join(dir, "rc"), "-i")
	term.waitFor(t, "READY")
	pressTab(t, term)
}

// The same in zsh, through its line editor and compinit, with the script where zsh's
// fpath finds it (as the package installs it).
func testZsh(t *testing.T, dir string) {
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Skipf("no zsh (%v): apt-get install zsh to run this test", err)
	}
	completionScript(t, dir, "zsh", "_gpusplit")
	rc := `PS1='$ '
unsetopt beep
fpath=(` + dir + ` $fpath)
autoload -U compinit && compinit -u -D
_line() { zle -I; print -r -- "LINE<$BUFFER>"; BUFFER=; }
zle -N _line
bindkey '^Xl' _line
echo READY
`
	if err := os.WriteFile(filepath.Join(dir, ".zshrc"), []byte(rc), 0o644); err != nil {
		t.Fatal(err)
	}
	term := startTerminal(t, dir, []string{"ZDOTDIR=" + dir}, zsh, "-i")
	term.waitFor(t, "READY")
	pressTab(t, term)
}

// In fish, what its completion engine offers for a line (complete -C), with the
// descriptions it shows. Cobra's fish script does not filter files by extension: --root
// and --config offer every file there.
func testFish(t *testing.T, dir string) {
	fish, err := exec.LookPath("fish")
	if err != nil {
		t.Skipf("no fish (%v): apt-get install fish to run this test", err)
	}
	script := completionScript(t, dir, "fish", "gpusplit.fish")
	for _, tc := range []struct {
		typed string
		want  []string
	}{
		{"gpusplit --demo pve vm-layout --vm ", []string{"131\ttrain01"}},
		{"gpusplit --demo topo --devices numa:", []string{"numa:0\tNUMA node 0: 4 GPUs", "numa:1\tNUMA node 1: 4 GPUs"}},
		{"gpusplit --demo topo --devices 0000:01:00.0,0000:e", []string{"0000:01:00.0,0000:e1:00.0", "0000:01:00.0,0000:e1:00.0,"}},
		{"gpusplit --demo doctor --only iommu-tr", []string{"iommu-translated\tthe IOMMU translates GPU DMA (not passthrough)"}},
		{"gpusplit --demo topo --format ", []string{"matrix\tthe nvidia-smi topo -m matrix", "svg\ta picture of the PCIe tree", "dot\tthe PCIe tree as a Graphviz graph"}},
		{"gpusplit --demo doctor --kernel-log split.t", []string{"split.toml", "split.txt"}},
	} {
		cmd := exec.Command(fish, "--no-config", "-c", "source "+script+"; complete -C "+shellQuote(tc.typed))
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+dir)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("fish: %v", err)
		}
		if got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"); !slices.Equal(got, tc.want) {
			t.Errorf("fish offers for %q:\n%q\nwant\n%q", tc.typed, got, tc.want)
		}
	}
}

// terminal is an interactive program on a pseudo-terminal.
type terminal struct {
	ptmx  *os.File
	lines chan string
}

// startTerminal runs name with args in dir on a new pseudo-terminal, with dir (where the
// built gpusplit is) first in PATH and env added to the environment.
func startTerminal(t *testing.T, dir string, env []string, name string, args ...string) *terminal {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	var unlock int32
	if err := ioctl(ptmx, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		t.Fatalf("unlocking the pseudo-terminal: %v", err)
	}
	var n uint32
	if err := ioctl(ptmx, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		t.Fatalf("naming the pseudo-terminal: %v", err)
	}
	// A wide terminal, so that readline does not wrap the lines it echoes.
	ws := struct{ rows, cols, x, y uint16 }{50, 400, 0, 0}
	if err := ioctl(ptmx, syscall.TIOCSWINSZ, unsafe.Pointer(&ws)); err != nil {
		t.Fatalf("sizing the pseudo-terminal: %v", err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "TERM=dumb", "HOME="+dir, "INPUTRC=/dev/null", "HISTFILE=/dev/null")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	term := &terminal{ptmx: ptmx, lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(ptmx)
		for sc.Scan() {
			term.lines <- string(bytes.TrimRight(sc.Bytes(), "\r"))
		}
		close(term.lines)
	}()
	return term
}

func (term *terminal) write(t *testing.T, s string) {
	t.Helper()
	if _, err := term.ptmx.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// waitFor returns what follows marker on the first line that starts with it, up to a
// closing '>' for LINE<…>.
func (term *terminal) waitFor(t *testing.T, marker string) string {
	t.Helper()
	var seen []string
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-term.lines:
			if !ok {
				t.Fatalf("the shell ended before %q:\n%s", marker, strings.Join(seen, "\n"))
			}
			if rest, found := strings.CutPrefix(l, marker); found {
				return strings.TrimSuffix(rest, ">")
			}
			seen = append(seen, l)
		case <-timeout:
			t.Fatalf("no %q from the shell in 30 s:\n%s", marker, strings.Join(seen, "\n"))
		}
	}
}

func ioctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), req, uintptr(arg)); errno != 0 {
		return errno
	}
	return nil
}
