//go:build linux

package hostile

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/samplehost"
	"github.com/gpusplit/gpusplit/internal/testutils/gpusplitbin"
)

// binary is gpusplit, built once for all tests.
var binary string

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild(os.Args[1:]))
	}
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	bin, cleanup, err := gpusplitbin.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = bin
	code := m.Run()
	cleanup()
	os.Exit(code)
}

const (
	// gpu is a GPU of the sample host, on NUMA node 1.
	gpu    = "sys/devices/pci0000:80/0000:80:01.1/0000:81:00.0"
	pciCfg = "etc/pve/mapping/pci.cfg"

	// maxRSS is the most memory a command may take on any root.
	maxRSS = 100 << 20
	// deadline is far more than any command takes (well under a second on the sample
	// host): past it, a command hangs.
	deadline = 2 * time.Minute
)

// commands are the ones that read a whole host. "SNAPSHOT" is replaced by a file to write.
var commands = map[string][]string{
	"inventory": {"inventory"},
	"topo":      {"topo"},
	"doctor":    {"doctor"},
	"pve sync":  {"pve", "sync", "--vfio", "numa:1", "--dry-run"},
	"snapshot":  {"snapshot", "--file", "SNAPSHOT"},
}

// crafted is a root made to hang a reader or exhaust memory.
type crafted struct {
	name string
	make func(t *testing.T) string // lays it out and returns what --root is given
	// say holds, for each command ("*": every one), what its output must hold: the
	// file and what is wrong with it, or why the whole root is refused.
	say map[string][]string
}

// Every command finishes on every crafted root, with an error or a warning that names
// the file, or the documented fallback, within 100 MB.
func TestCraftedRoots(t *testing.T) {
	if testing.Short() {
		t.Skip("builds gpusplit and runs it 70 times (a minute on 2 CPUs)")
	}
	hardLinked := []string{pciCfg, "proc/cpuinfo", "proc/cmdline", "dev/kmsg",
		"etc/pve/nodes/kpro6/qemu-server/131.conf", "etc/pve/nodes/kpro6/lxc/129.conf"}
	for _, d := range []string{"0000:00:01.1/0000:01:00.0", "0000:10:01.1/0000:11:00.0", "0000:60:01.1/0000:61:00.0", "0000:70:01.1/0000:71:00.0",
		"0000:90:01.1/0000:91:00.0", "0000:00:00.0", "0000:10:00.0", "0000:80:00.0"} {
		hardLinked = append(hardLinked, "sys/devices/pci0000:"+d[5:7]+"/"+d+"/resource")
	}
	// What each command says. snapshot copies regular files and leaves the rest out.
	scan := func(file, what string) map[string][]string {
		m := map[string][]string{}
		for _, c := range []string{"inventory", "topo", "doctor", "pve sync"} {
			m[c] = []string{"warning: 0000:81:00.0: read /" + file, what}
		}
		return m
	}
	fifoAttr := scan(gpu+"/numa_node", "is a FIFO, not a regular file")
	fifoCfg := map[string][]string{"pve sync": {"gpusplit: read /" + pciCfg, "is a FIFO, not a regular file"}}
	devices := map[string][]string{
		"doctor":   {"the kernel log could not be read: read /dev/kmsg", "is a character device, not a regular file"},
		"snapshot": {"left out for what they are", "/dev/kmsg: is a character device, not a regular file"},
	}
	refused := func(why ...string) map[string][]string {
		return map[string][]string{"*": append([]string{"gpusplit: snapshot "}, why...)}
	}
	roots := []crafted{
		{"FIFO attribute, directory", dirRoot(func(t *testing.T, r string) { mkfifo(t, r, gpu+"/numa_node") }), fifoAttr},
		{"FIFO attribute, archive", archiveRoot(false, func(a *archive) { a.put(tar.Header{Name: gpu + "/numa_node", Typeflag: tar.TypeFifo}) }), fifoAttr},
		{"FIFO pci.cfg, directory", dirRoot(func(t *testing.T, r string) { mkfifo(t, r, pciCfg) }), fifoCfg},
		{"FIFO pci.cfg, archive", archiveRoot(false, func(a *archive) { a.put(tar.Header{Name: pciCfg, Typeflag: tar.TypeFifo}) }), fifoCfg},
		{"devices as files, directory", dirRoot(func(t *testing.T, r string) {
			for _, p := range []string{"proc/cmdline", "proc/cpuinfo", "dev/kmsg"} {
				mknodZero(t, r, p)
			}
		}), devices},
		{"devices as files, archive", archiveRoot(false, func(a *archive) {
			for _, p := range []string{"proc/cmdline", "proc/cpuinfo", "dev/kmsg"} {
				a.put(tar.Header{Name: p, Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 5})
			}
		}), devices},
		{"sparse 3 GiB resource, directory", dirRoot(func(t *testing.T, r string) { sparse(t, r, gpu+"/resource", 3<<30) }),
			scan(gpu+"/resource", "is 3 GiB: larger than 1 MiB, the most gpusplit reads of a sysfs attribute")},
		{"480 MB resource, archive", archiveRoot(false, func(a *archive) { a.putZeros(gpu+"/resource", 480<<20) }),
			refused(`member "` + gpu + `/resource" takes the files and names past 64 MiB`)},
		{"hard links to a 400 MB file, directory", dirRoot(func(t *testing.T, r string) {
			sparse(t, r, "big", 400<<20)
			for _, p := range hardLinked {
				os.Remove(filepath.Join(r, p))
				if err := os.Link(filepath.Join(r, "big"), filepath.Join(r, p)); err != nil {
					t.Fatal(err)
				}
			}
		}), map[string][]string{
			"inventory": {"0000:01:00.0/resource", "is 400 MiB: larger than 1 MiB, the most gpusplit reads of a sysfs attribute"},
			"topo":      {"0000:91:00.0/resource", "is 400 MiB: larger than 1 MiB"},
			"doctor":    {"/dev/kmsg", "is 400 MiB: larger than 32 MiB, the most gpusplit reads of the kernel log"},
			"pve sync":  {"/etc/pve/mapping/pci.cfg", "is 400 MiB: larger than 1 MiB, the most gpusplit reads of a Proxmox file"},
			"snapshot":  {"14 files left out for what they are", "/sys/devices/pci0000:00/0000:00:00.0/resource: is 400 MiB: larger than 1 MiB"},
		}},
		{"hard links to a 400 MB member, archive", archiveRoot(false, func(a *archive) {
			a.putZeros(gpu+"/resource", 400<<20)
			for _, p := range hardLinked {
				a.put(tar.Header{Name: p, Typeflag: tar.TypeLink, Linkname: gpu + "/resource"})
			}
		}), refused(`member "` + gpu + `/resource" takes the files and names past 64 MiB`)},
		{"hard links to a 1 MiB member, archive", archiveRoot(true, func(a *archive) {
			a.putZeros(gpu+"/config", 1<<20)
			for i := range 70 {
				a.put(tar.Header{Name: fmt.Sprintf("sys/links/%d", i), Typeflag: tar.TypeLink, Linkname: gpu + "/config"})
			}
		}), refused(`member "sys/links/`, "takes the files and names past 64 MiB")},
		{"a million processes, directory", dirRoot(func(t *testing.T, r string) {
			// Links to nothing: the cheapest entry to make, and each one a process
			// that a reader would look into.
			for i := range 1_000_000 {
				if err := syscall.Symlink("gone", filepath.Join(r, "proc", strconv.Itoa(1_000_000+i))); err != nil {
					t.Fatal(err)
				}
			}
		}), map[string][]string{
			"inventory": {"warning: processes: read directory /proc", "holds more than 262144 entries", "holders unknown"},
			"doctor":    {"warning: processes: read directory /proc", "holds more than 262144 entries"},
			"snapshot":  {"/proc: holds more than 262144 entries"},
		}},
		{"a device 1,900 directories deep, directory", dirRoot(func(t *testing.T, r string) {
			moveDeep(t, r, gpu, filepath.Dir(gpu)+"/"+strings.Repeat("d/", 1900)+filepath.Base(gpu))
		}), map[string][]string{
			"inventory": {"0000:81:00.0    RTX PRO 6000", "0000:81:00.0 (3849 bytes) has \"d\" between the host bridge and the device"},
			"topo":      {"GPU4"},
			"snapshot":  {"captured "},
		}},
		{"a million entries, archive", archiveRoot(true, func(a *archive) {
			a.more = func(tw *tar.Writer) error {
				for i := range 1_000_000 {
					if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("junk/%07d/", i), Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
						return err
					}
				}
				return nil
			}
		}), refused("more than 262144 entries (at member \"junk/")},
		{"a name 300,000 directories deep, archive", archiveRoot(true, func(a *archive) {
			a.put(tar.Header{Name: strings.Repeat("d/", 300_000) + "f", Typeflag: tar.TypeReg})
		}), refused(`member "d/d/d/`, "(600001 bytes): name is longer than 4096 bytes (PATH_MAX)")},
		{"deep names that add up, archive", archiveRoot(true, func(a *archive) {
			for i := range 40 {
				a.put(tar.Header{Name: fmt.Sprintf("deep%d/%sf", i, strings.Repeat("d/", 2000)), Typeflag: tar.TypeReg})
			}
		}), refused(`member "deep`, "(4008 bytes) takes the files and names past 64 MiB")},
	}
	for _, c := range roots {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			root := c.make(t)
			t.Logf("root made in %v", time.Since(start).Round(time.Millisecond))
			for name, args := range commands {
				args = append([]string(nil), args...)
				for i, a := range args {
					if a == "SNAPSHOT" {
						args[i] = filepath.Join(t.TempDir(), "snap.tar.gz")
					}
				}
				start := time.Now()
				out, code, rss := run(t, root, args)
				t.Logf("%s: exit %d, %d MB, %v\n%s", name, code, rss>>20, time.Since(start).Round(time.Millisecond), firstLines(out, 8))
				if code < 0 || code > 3 || strings.Contains(out, "panic:") || strings.Contains(out, "fatal error:") {
					t.Errorf("%s: exit %d\n%s", name, code, firstLines(out, 30))
				}
				if rss > maxRSS {
					t.Errorf("%s: peak memory %d MB, more than %d MB", name, rss>>20, maxRSS>>20)
				}
				// Notes wrap to the width of the output: a phrase may span lines.
				flat := strings.Join(strings.Fields(out), " ")
				for _, want := range append(c.say["*"], c.say[name]...) {
					if !strings.Contains(out, want) && !strings.Contains(flat, strings.Join(strings.Fields(want), " ")) {
						t.Errorf("%s: the output does not say %q:\n%s", name, want, firstLines(out, 30))
					}
				}
			}
		})
	}
}

// childEnv, when set, makes the test binary run the command in its arguments and write
// that command's peak memory and exit status to the file it names.
const childEnv = "GPUSPLIT_HOSTILE_RUSAGE"

// run runs gpusplit --root root args, and returns its output, exit status (-1 when it was
// killed) and peak memory. A command that runs past the deadline is killed and fails the
// test.
//
// The command runs below a small child process (the test binary again): a process
// started by Go shares its parent's memory until it executes the program (vfork), and
// Linux counts the parent's peak in the child's, so the test's own memory would count.
// The child starts gpusplit the same way, from a few MB, and reports what wait4 says.
func run(t *testing.T, root string, args []string) (string, int, int64) {
	t.Helper()
	report := filepath.Join(t.TempDir(), "rusage")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, self, append([]string{binary, "--root", root}, args...)...)
	cmd.Env = append(os.Environ(), childEnv+"="+report)
	cmd.Dir = t.TempDir()
	// Killed with gpusplit below it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, _ := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Errorf("%v: still running after %v: it hangs\n%s", args, deadline, firstLines(string(out), 10))
		return string(out), -1, 0
	}
	var rss int64
	var code int
	b, err := os.ReadFile(report)
	if err == nil {
		_, err = fmt.Sscanf(string(b), "maxrss %d exit %d", &rss, &code)
	}
	if err != nil {
		t.Fatalf("%v: no report of its memory (%v)\n%s", args, err, firstLines(string(out), 10))
	}
	return string(out), code, rss
}

// runChild runs args with its output on ours and writes its peak memory and exit status
// to the file childEnv names. Its address space is bounded, so that a reader that would
// fill memory fails fast instead of making the machine swap.
func runChild(args []string) int {
	lim := syscall.Rlimit{Cur: 4 << 30, Max: 4 << 30}
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &lim); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 125
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Run()
	if cmd.ProcessState == nil {
		fmt.Fprintln(os.Stderr, "did not start:", args)
		return 125
	}
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // Linux counts KiB
	report := fmt.Sprintf("maxrss %d exit %d\n", rss, cmd.ProcessState.ExitCode())
	if err := os.WriteFile(os.Getenv(childEnv), []byte(report), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 125
	}
	return 0
}

func firstLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("… (%d more lines)\n", len(lines)-n))
	}
	return strings.Join(lines, "")
}

// dirRoot is the sample host unpacked in a directory, changed by plant.
func dirRoot(plant func(t *testing.T, root string)) func(t *testing.T) string {
	return func(t *testing.T) string {
		root := t.TempDir()
		if err := samplehost.Unpack(root); err != nil {
			t.Fatal(err)
		}
		plant(t, root)
		return root
	}
}

// moveDeep moves the directory from to to (both relative to root), and makes every link
// that leads into it, or out of it, absolute: a relative link cannot climb out of a
// directory 1,900 levels deep within PATH_MAX, and the kernel's links are as valid
// either way for a reader that resolves them inside the root.
func moveDeep(t *testing.T, root, from, to string) {
	t.Helper()
	type link struct{ at, target string } // relative to root, after the move
	var links []link
	moved := func(p string) string {
		if p == from || strings.HasPrefix(p, from+"/") {
			return to + strings.TrimPrefix(p, from)
		}
		return p
	}
	err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.Type()&os.ModeSymlink == 0 {
			return err
		}
		tgt, err := os.Readlink(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		abs := tgt
		if !filepath.IsAbs(tgt) {
			abs = filepath.Join(filepath.Dir(rel), tgt)
		}
		if moved(rel) != rel || moved(abs) != abs {
			links = append(links, link{moved(rel), moved(abs)})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// MkdirAll of the whole path would pass PATH_MAX in one call: make it a level
	// at a time, from inside.
	d, err := os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range strings.Split(filepath.Dir(to), "/") {
		fd := int(d.Fd())
		if err := syscall.Mkdirat(fd, c, 0o755); err != nil && !errors.Is(err, syscall.EEXIST) {
			t.Fatal(err)
		}
		next, err := syscall.Openat(fd, c, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
		d = os.NewFile(uintptr(next), c)
	}
	src, err := syscall.Open(filepath.Join(root, filepath.Dir(from)), syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Renameat(src, filepath.Base(from), int(d.Fd()), filepath.Base(to)); err != nil {
		t.Fatal(err)
	}
	syscall.Close(src)
	d.Close()
	for _, l := range links {
		at := filepath.Join(root, l.at)
		if len(at) >= syscall.PathMax {
			// Inside the moved directory: reached through it.
			dir, err := openDeep(root, filepath.Dir(l.at))
			if err != nil {
				t.Fatal(err)
			}
			// The directory by its descriptor: a short path to a deep place.
			at := fmt.Sprintf("/proc/self/fd/%d/%s", dir, filepath.Base(l.at))
			os.Remove(at)
			err = os.Symlink("/"+l.target, at)
			syscall.Close(dir)
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		os.Remove(at)
		if err := os.Symlink("/"+l.target, at); err != nil {
			t.Fatal(err)
		}
	}
}

// openDeep opens the directory at rel under root a level at a time.
func openDeep(root, rel string) (int, error) {
	fd, err := syscall.Open(root, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	for _, c := range strings.Split(rel, "/") {
		if err != nil {
			return -1, err
		}
		var next int
		next, err = syscall.Openat(fd, c, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
		syscall.Close(fd)
		fd = next
	}
	return fd, err
}

func mkfifo(t *testing.T, root, p string) {
	t.Helper()
	full := filepath.Join(root, p)
	os.Remove(full)
	if err := syscall.Mkfifo(full, 0o644); err != nil {
		t.Fatal(err)
	}
}

// mknodZero puts a /dev/zero (character device 1:5) at p. Only a test with CAP_MKNOD can.
func mknodZero(t *testing.T, root, p string) {
	t.Helper()
	full := filepath.Join(root, p)
	os.Remove(full)
	if err := syscall.Mknod(full, syscall.S_IFCHR|0o644, 1<<8|5); err != nil {
		if errors.Is(err, syscall.EPERM) {
			t.Skipf("making a device node needs CAP_MKNOD: %v", err)
		}
		t.Fatal(err)
	}
}

// sparse makes p a file of size zero bytes that takes no disk.
func sparse(t *testing.T, root, p string, size int64) {
	t.Helper()
	f, err := os.Create(filepath.Join(root, p))
	if err == nil {
		err = f.Truncate(size)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// archive is the sample host's members, changed before they are written.
type archive struct {
	members []member
	more    func(tw *tar.Writer) error // writes members after those
}

type member struct {
	hdr   tar.Header
	body  []byte
	zeros int64 // a regular member of this many zero bytes
}

// put replaces the member of the same name, or adds one at the end.
func (a *archive) put(h tar.Header) {
	if h.Mode == 0 {
		h.Mode = 0o644
	}
	a.members = append(a.drop(h.Name), member{hdr: h})
}

func (a *archive) putZeros(name string, size int64) {
	a.members = append(a.drop(name), member{hdr: tar.Header{Name: name, Typeflag: tar.TypeReg, Size: size, Mode: 0o644}, zeros: size})
}

func (a *archive) drop(name string) []member {
	out := a.members[:0]
	for _, m := range a.members {
		if strings.TrimSuffix(m.hdr.Name, "/") != name {
			out = append(out, m)
		}
	}
	return out
}

// archiveRoot is the sample host's snapshot archive, changed by change, as a .tar.gz or
// as a plain .tar whose long runs of zeros are holes (so that a 400 MB member costs no
// disk and no time to write).
func archiveRoot(compress bool, change func(a *archive)) func(t *testing.T) string {
	return func(t *testing.T) string {
		a := &archive{members: sampleMembers(t)}
		change(a)
		name := filepath.Join(t.TempDir(), "crafted.tar")
		if compress {
			name += ".gz"
		}
		f, err := os.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		hw := &holeWriter{f: f}
		var w io.Writer = hw
		bw := bufio.NewWriterSize(f, 1<<20)
		var zw *gzip.Writer
		if compress {
			zw, _ = gzip.NewWriterLevel(bw, gzip.BestSpeed)
			w = zw
		}
		tw := tar.NewWriter(w)
		for _, m := range a.members {
			if err := tw.WriteHeader(&m.hdr); err != nil {
				t.Fatal(err)
			}
			body := io.Reader(bytes.NewReader(m.body))
			if m.zeros > 0 {
				body = io.LimitReader(zeros{}, m.zeros)
			}
			if _, err := io.CopyBuffer(tw, body, make([]byte, 1<<20)); err != nil {
				t.Fatal(err)
			}
		}
		if a.more != nil {
			if err := a.more(tw); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		if compress {
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			if err := bw.Flush(); err != nil {
				t.Fatal(err)
			}
		} else if err := f.Truncate(hw.off); err != nil { // a hole at the end
			t.Fatal(err)
		}
		return name
	}
}

// sampleMembers returns the members of the sample host's archive.
func sampleMembers(t *testing.T) []member {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(samplehost.Archive()))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var out []member
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, member{hdr: *hdr, body: body})
	}
}

// holeWriter writes to f, leaving a hole for every block of zeros.
type holeWriter struct {
	f   *os.File
	off int64
}

func (h *holeWriter) Write(p []byte) (int, error) {
	for i := 0; i < len(p); {
		n := min(len(p)-i, 4096)
		block := p[i : i+n]
		var err error
		if bytes.Count(block, []byte{0}) == n {
			_, err = h.f.Seek(int64(n), io.SeekCurrent)
		} else {
			_, err = h.f.Write(block)
		}
		if err != nil {
			return i, err
		}
		i += n
		h.off += int64(n)
	}
	return len(p), nil
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
