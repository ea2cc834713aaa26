// Package vmtest boots Debian's kernel under QEMU (TCG, no KVM needed) on PCI topologies
// described in Go, with an initramfs holding busybox, the static gpusplit binary and the
// kernel modules the test needs, runs a shell script inside and brings its results back
// over the serial console. It lets tests check gpusplit against a real kernel's sysfs and
// real driver binding.
package vmtest

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Setup says how to get what the harness needs; every "missing" error ends with it.
const Setup = "run scripts/vm-deps as root (it installs qemu-system-x86, busybox-static and ovmf with apt-get " +
	"and downloads Debian's linux-image .deb into the cache), or set GPUSPLIT_KERNEL_DEB to a linux-image-*.deb"

// Kernel is a Debian kernel package unpacked into the cache: never installed as this
// machine's kernel.
type Kernel struct {
	Version string // "6.1.0-57-amd64"
	Image   string // boot/vmlinuz-…
	Modules string // lib/modules/<version>
}

// CacheDir is where kernel packages are kept and unpacked: $GPUSPLIT_VM_CACHE, or
// gpusplit-vmtest in the user's cache directory.
func CacheDir() (string, error) {
	if d := os.Getenv("GPUSPLIT_VM_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "gpusplit-vmtest"), nil
}

// FindKernel returns the kernel of $GPUSPLIT_KERNEL_DEB, or of the newest
// linux-image-*.deb in the cache, unpacking it with dpkg-deb on first use.
func FindKernel() (*Kernel, error) {
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	deb := os.Getenv("GPUSPLIT_KERNEL_DEB")
	if deb == "" {
		debs, _ := filepath.Glob(filepath.Join(cache, "linux-image-[0-9]*.deb"))
		if len(debs) == 0 {
			return nil, fmt.Errorf("no kernel package in %s: %s", cache, Setup)
		}
		slices.Sort(debs)
		deb = debs[len(debs)-1]
	}
	dir := filepath.Join(cache, strings.TrimSuffix(filepath.Base(deb), ".deb"))
	if _, err := os.Stat(filepath.Join(dir, ".unpacked")); err != nil {
		if _, err := exec.LookPath("dpkg-deb"); err != nil {
			return nil, fmt.Errorf("dpkg-deb is needed to unpack %s: %s", deb, Setup)
		}
		tmp := dir + ".tmp"
		os.RemoveAll(tmp)
		if out, err := exec.Command("dpkg-deb", "-x", deb, tmp).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("unpacking %s: %v\n%s", deb, err, out)
		}
		if err := os.WriteFile(filepath.Join(tmp, ".unpacked"), nil, 0o644); err != nil {
			return nil, err
		}
		os.RemoveAll(dir)
		if err := os.Rename(tmp, dir); err != nil {
			return nil, err
		}
	}
	images, _ := filepath.Glob(filepath.Join(dir, "boot", "vmlinuz-*"))
	if len(images) != 1 {
		return nil, fmt.Errorf("%s holds %d kernel images, want 1", deb, len(images))
	}
	version := strings.TrimPrefix(filepath.Base(images[0]), "vmlinuz-")
	mods := filepath.Join(dir, "lib", "modules", version)
	if _, err := os.Stat(mods); err != nil {
		return nil, fmt.Errorf("%s has no modules for %s: %w", deb, version, err)
	}
	return &Kernel{Version: version, Image: images[0], Modules: mods}, nil
}

// module is a loadable kernel module of the package.
type module struct {
	name    string // as the kernel names it, with '_' for '-'
	path    string
	depends []string
}

func modName(s string) string { return strings.ReplaceAll(s, "-", "_") }

// modules indexes every .ko of the kernel, and the names built into the image.
func (k *Kernel) modules() (map[string]module, map[string]bool, error) {
	mods := map[string]module{}
	err := filepath.WalkDir(k.Modules, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".ko") {
			return err
		}
		m := module{name: modName(strings.TrimSuffix(d.Name(), ".ko")), path: p}
		info, err := modinfo(p)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if n := info["name"]; n != "" {
			m.name = modName(n)
		}
		for _, dep := range strings.Split(info["depends"], ",") {
			if dep != "" {
				m.depends = append(m.depends, modName(dep))
			}
		}
		mods[m.name] = m
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	builtin := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(k.Modules, "modules.builtin")); err == nil {
		for _, line := range strings.Fields(string(b)) {
			builtin[modName(strings.TrimSuffix(filepath.Base(line), ".ko"))] = true
		}
	}
	return mods, builtin, nil
}

// modinfo reads the key=value strings of a module's .modinfo section, as modinfo(8) does.
func modinfo(path string) (map[string]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, errors.New("no .modinfo section")
	}
	data, err := sec.Data()
	if err != nil {
		return nil, err
	}
	info := map[string]string{}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			if _, seen := info[k]; !seen {
				info[k] = v
			}
		}
	}
	return info, nil
}

// loadOrder returns the modules to insert for want, dependencies first, leaving out those
// built into the kernel.
func (k *Kernel) loadOrder(want []string) ([]module, error) {
	mods, builtin, err := k.modules()
	if err != nil {
		return nil, err
	}
	var order []module
	state := map[string]int{} // 1: visiting, 2: done
	var visit func(name, from string) error
	visit = func(name, from string) error {
		name = modName(name)
		if builtin[name] || state[name] == 2 {
			return nil
		}
		if state[name] == 1 {
			return fmt.Errorf("module dependency cycle at %s", name)
		}
		m, ok := mods[name]
		if !ok {
			return fmt.Errorf("kernel %s has no module %s (needed by %s)", k.Version, name, from)
		}
		state[name] = 1
		for _, d := range m.depends {
			if err := visit(d, name); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, m)
		return nil
	}
	for _, w := range want {
		if err := visit(w, "the test"); err != nil {
			return nil, err
		}
	}
	return order, nil
}
