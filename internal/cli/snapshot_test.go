package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// secretSample is the sample host with secrets planted where Proxmox and its users keep
// them: guest descriptions, cloud-init passwords and keys, container environments, a
// snapshot section, pending changes, files beside split.toml; and a split.toml, which a
// snapshot must carry.
func secretSample(t *testing.T) (string, []string) {
	t.Helper()
	root := t.TempDir()
	if err := samplehost.Unpack(root); err != nil {
		t.Fatal(err)
	}
	put := func(rel, body string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	edit(t, root, vm131, func(s string) string {
		return "#ops: root password cli-desc-s3cr3t\n" + s +
			"cipassword: cli-cipw-s3cr3t\nsshkeys: ssh-ed25519%20AAAA%20cli-sshkeys-s3cr3t\n" +
			"\n[pre-split]\n#before the split, cli-snapdesc-s3cr3t\nargs: -object secret,id=s,data=cli-snapargs-s3cr3t\ncipassword: cli-snapcipw-s3cr3t\nhostpci0: mapping=pro6000,pcie=1\n" +
			"\n[PENDING]\ncipassword: cli-pending-s3cr3t\n"
	})
	edit(t, root, "etc/pve/nodes/kpro6/lxc/129.conf", func(s string) string {
		return s + "lxc.environment: HF_TOKEN=cli-env-s3cr3t\nlxc.mount.entry: /tank/cli-mount-s3cr3t mnt/keys none bind 0 0\n"
	})
	// A VM laid out by gpusplit already, with a secret object beside its devices.
	put("etc/pve/nodes/kpro6/qemu-server/132.conf", "args: -object secret,id=s0,data=cli-args-s3cr3t -device pxb-pcie,id=gpusplit-pxb0,bus_nr=128,numa_node=0,bus=pcie.0,addr=0x2\nmachine: q35\nmemory: 4096\nname: laid-out\n")
	put("etc/gpusplit/split.toml", "[[group]]\nname = \"vms\"\nselect = [\"numa:1\"]\ndriver = \"vfio-pci\"\n")
	put("etc/gpusplit/notify.env", "SLACK_TOKEN=cli-gpusplit-s3cr3t\n")
	put("etc/pve/mapping/dir.cfg", "models\n\tmap node=kpro6,path=/tank/cli-dirmap-s3cr3t\n")
	// Secrets on the kernel command line, as GRUB gives it, the kernel logs it and
	// /proc/cmdline shows it: all three must lose the same values, or the doctor, which
	// compares them, would find on the snapshot what is not on the host.
	secretParams := " iscsi_password=cli-iscsi-s3cr3t rd.luks.key=/cli-luks-s3cr3t.key netroot=iscsi:u:cli-netroot-s3cr3t@10.0.0.9::3260::iqn.2024-01.org.example:t0"
	edit(t, root, "proc/cmdline", func(s string) string { return strings.TrimSuffix(s, "\n") + secretParams + "\n" })
	edit(t, root, "dev/kmsg", func(s string) string {
		first, rest, _ := strings.Cut(s, "\n")
		second, rest, _ := strings.Cut(rest, "\n")
		if !strings.Contains(second, "Command line: ") {
			t.Fatalf("the sample's log has no command line where it should: %s", second)
		}
		return first + "\n" + second + secretParams + "\n" + rest
	})
	edit(t, root, "etc/default/grub", func(s string) string {
		return strings.Replace(s, `GRUB_CMDLINE_LINUX=""`, `GRUB_CMDLINE_LINUX="`+strings.TrimSpace(secretParams)+`"`, 1)
	})
	return root, []string{"cli-desc-s3cr3t", "cli-cipw-s3cr3t", "cli-sshkeys-s3cr3t", "cli-snapdesc-s3cr3t",
		"cli-snapargs-s3cr3t", "cli-snapcipw-s3cr3t", "cli-pending-s3cr3t", "cli-env-s3cr3t", "cli-mount-s3cr3t",
		"cli-gpusplit-s3cr3t", "cli-dirmap-s3cr3t", "cli-args-s3cr3t", "cli-iscsi-s3cr3t", "cli-luks-s3cr3t", "cli-netroot-s3cr3t"}
}

// A snapshot holds none of the secrets and says, in text and in JSON, what it left out
// of which file; and every command reads the same from it as from the host it was taken
// of, but for the lines gpusplit does not read, which its diffs show as context.
func TestSnapshotRedactsAndServes(t *testing.T) {
	root, secrets := secretSample(t)
	archive := filepath.Join(t.TempDir(), "snap.tar.gz")
	_, text, err := run(t, "--root", root, "snapshot", archive)
	if err != nil {
		t.Fatal(err)
	}
	jsonText, _, err := run(t, "--root", root, "snapshot", "--file", archive, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if bytes.Contains(raw, []byte(s)) {
			t.Errorf("the archive holds %s", s)
		}
		if strings.Contains(text+jsonText, s) {
			t.Errorf("the summary names %s", s)
		}
	}

	var sum struct {
		Archive  string `json:"archive"`
		Redacted []struct {
			File     string         `json:"file"`
			LeftOut  map[string]int `json:"left_out"`
			Replaced map[string]int `json:"replaced"`
		} `json:"redacted"`
		FilesLeftOut []string `json:"files_left_out"`
	}
	if err := json.Unmarshal([]byte(jsonText), &sum); err != nil {
		t.Fatalf("-o json: %v\n%s", err, jsonText)
	}
	found := map[string]bool{}
	for _, r := range sum.Redacted {
		switch r.File {
		case "/etc/pve/nodes/kpro6/qemu-server/131.conf":
			found[r.File] = r.LeftOut["cipassword"] == 3 && r.LeftOut["description"] == 3 && r.LeftOut["sshkeys"] == 1 && r.Replaced["args"] == 1
		case "/etc/pve/nodes/kpro6/lxc/129.conf":
			found[r.File] = r.LeftOut["lxc.environment"] == 1 && r.LeftOut["lxc.mount.entry"] == 1
		case "/proc/48213/cmdline":
			found[r.File] = r.LeftOut["arguments"] == 6
		case "/proc/cmdline", "/dev/kmsg", "/etc/default/grub":
			found[r.File] = maps.Equal(r.Replaced, map[string]int{"iscsi_password": 1, "rd.luks.key": 1, "netroot": 1})
		}
	}
	if len(found) != 6 || slices.Contains(slices.Collect(maps.Values(found)), false) {
		t.Errorf("the JSON summary does not say what was left out (%v):\n%s", found, jsonText)
	}
	if sum.Archive != archive || strings.Join(sum.FilesLeftOut, " ") != "/etc/gpusplit/notify.env /etc/pve/mapping/dir.cfg" {
		t.Errorf("archive %q, files left out %v", sum.Archive, sum.FilesLeftOut)
	}
	for _, want := range []string{
		"  /etc/pve/nodes/kpro6/qemu-server/131.conf: replaced: args; left out: agent, balloon, boot, cipassword ×3, description ×3,",
		"  /etc/pve/nodes/kpro6/lxc/129.conf: left out: description, features, hostname, lxc.environment, lxc.mount.entry, mp0,",
		"  /proc/48213/cmdline: replaced: argv[0]; left out: arguments ×6\n",
		"  /proc/cmdline: replaced: iscsi_password, netroot, rd.luks.key\n",
		"not captured, as gpusplit does not read them: /etc/gpusplit/notify.env, /etc/pve/mapping/dir.cfg\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the summary lacks %q:\n%s", want, text)
		}
	}

	// Unpacked, so that both roots are directories and differ only in what they hold.
	unpacked := t.TempDir()
	unpack(t, raw, unpacked)
	for _, c := range []struct {
		args []string
		exit int
		diff bool   // the output holds diffs of Proxmox files
		says string // a line that shows the command did its work
	}{
		// -o wide: whole cells, and topo in nvidia-smi's TAB layout.
		{[]string{"inventory", "-o", "wide"}, 0, false, "nvidia-persistenced[2211]; python3[48213] in CT 129"},
		{[]string{"topo", "-o", "wide"}, 0, false, "GPU7\tSYS"},
		{[]string{"doctor"}, 1, false, "33 checks, 0 errors, 2 warnings"},
		{[]string{"doctor", "-o", "json"}, 1, false, `"id": "split-drift"`},
		{[]string{"nccl-topo"}, 0, false, "<system"},
		// plan and status read the desired split from the snapshot's split.toml; the
		// boot files are left out, since a snapshot holds no binary for their unit.
		{[]string{"plan", "--persist=false"}, 0, true, "8 moves"},
		{[]string{"status", "--persist=false"}, 3, false, "DRIFT"},
		{[]string{"pve", "mappings"}, 0, false, "2 PCI mappings"},
		{[]string{"pve", "sync", "--dry-run"}, 0, true, "+numa0: cpus=0-63,hostnodes=1,memory=262144,policy=bind"},
		{[]string{"pve", "vm-layout", "--vm", "131", "--dry-run"}, 0, true, "+args: -device pxb-pcie,id=gpusplit-pxb0"},
		{[]string{"pve", "vm-layout", "--vm", "132", "--dry-run"}, 0, false, "VM 132 already has gpusplit's layout"},
	} {
		want, wantErr := runOn(t, root, c.args, c.diff)
		got, gotErr := runOn(t, unpacked, c.args, c.diff)
		if exitCode(wantErr) != c.exit || !strings.Contains(want, c.says) {
			t.Errorf("gpusplit %s on the host: %v, without %q:\n%s", strings.Join(c.args, " "), wantErr, c.says, want)
		}
		if want != got || exitCode(wantErr) != exitCode(gotErr) {
			t.Errorf("gpusplit %s: on the host (%v)\n%s\non its snapshot (%v)\n%s", strings.Join(c.args, " "), wantErr, want, gotErr, got)
		}
	}
}

// runOn runs a command on a root and returns what it says, with the root's name made
// ROOT and, where diff is set, the diffs' context and hunk lines left out: the
// snapshot's configs lack the lines gpusplit does not read, so only what the diffs
// change can be compared.
func runOn(t *testing.T, root string, args []string, diff bool) (string, error) {
	t.Helper()
	out, stderr, err := run(t, append([]string{"--root", root}, args...)...)
	var kept []string
	for _, line := range strings.Split(out+stderr, "\n") {
		if diff && (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "@@ ")) {
			continue
		}
		kept = append(kept, strings.ReplaceAll(line, root, "ROOT"))
	}
	return strings.Join(kept, "\n"), err
}

func exitCode(err error) int {
	var e *ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &e):
		return e.Code
	}
	return 1
}

// unpack writes a tar stream's directories, links and files under dir.
func unpack(t *testing.T, raw []byte, dir string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(hdr.Linkname, p)
		default:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, 0o644)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The archive is its owner's alone (it holds the kernel log and guest configs), made so
// and replacing a file that was not.
func TestSnapshotArchiveIsPrivate(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, before string }{{"new.tar.gz", ""}, {"old.tar.gz", "an older snapshot"}} {
		p := filepath.Join(dir, c.name)
		if c.before != "" {
			if err := os.WriteFile(p, []byte(c.before), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, stderr, err := run(t, "--demo", "snapshot", "--file", p); err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode() != 0o600 || fi.Size() < 1000 {
			t.Errorf("%s: %v, %v", c.name, fi.Mode(), err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("files left beside the archives: %v", left)
	}
}

// A file that cannot be written is said to be before anything is captured, by its name
// and what is in the way; not as an error about a temporary file after the capture.
// Run as the user nobody: the tests run as root, who may write anywhere.
func TestSnapshotUnwritable(t *testing.T) {
	base := openTempDir(t)
	mkdir := func(rel string, mode os.FileMode) string {
		p := filepath.Join(base, rel)
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // the umask aside
			t.Fatal(err)
		}
		return p
	}
	readOnly := mkdir("ro", 0o555)
	empty := mkdir("empty", 0o755) // not a host: capturing it fails
	closed := mkdir("closed", 0o700)
	mkdir("closed/sub", 0o777)
	sticky := mkdir("sticky", os.ModeSticky|0o777)
	writable := mkdir("writable", 0o777)
	if err := os.WriteFile(filepath.Join(sticky, "x.tar.gz"), []byte("root's"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string // in its output; "" for a success
	}{
		{"read-only directory, before the capture", []string{"--root", empty, "snapshot", "--file", readOnly + "/x.tar.gz"},
			"cannot write " + readOnly + "/x.tar.gz: directory " + readOnly + " (owner uid 0, mode 0555) is not writable by uid 65534 (permission denied); run as root or choose --file in a directory you can write"},
		{"the default name, in the current directory (/)", []string{"--demo", "snapshot"},
			"cannot write /gpusplit-kpro6-"},
		{"a directory above that may not be entered", []string{"--demo", "snapshot", "--file", closed + "/sub/x.tar.gz"},
			"cannot write " + closed + "/sub/x.tar.gz: directory " + closed + " (owner uid 0, mode 0700) may not be entered by uid 65534, so " + closed + "/sub cannot be reached (permission denied)"},
		{"another user's file in a sticky directory", []string{"--demo", "snapshot", "--file", sticky + "/x.tar.gz"},
			"cannot write " + sticky + "/x.tar.gz: it belongs to uid 0, and in " + sticky + ", a sticky directory, only its owner may replace it"},
		{"a directory that does not exist", []string{"--demo", "snapshot", "--file", base + "/none/x.tar.gz"},
			"cannot write " + base + "/none/x.tar.gz: directory " + base + "/none does not exist (no such file or directory); create it"},
		{"a directory where the file should be", []string{"--demo", "snapshot", "--file", writable},
			"cannot write " + writable + ": it is a directory; name a file in it, e.g. --file " + writable + "/snapshot.tar.gz"},
		{"a directory it may write", []string{"--demo", "snapshot", "--file", writable + "/x.tar.gz"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, code := runAsNobody(t, c.args...)
			t.Log(out)
			switch {
			case c.want == "" && code != 0:
				t.Errorf("exit %d:\n%s", code, out)
			case c.want != "" && (code != 1 || !strings.Contains(out, c.want)):
				t.Errorf("exit %d:\n%s\nwant it to hold\n%s", code, out, c.want)
			case strings.Contains(out, ".tmp"):
				t.Errorf("the error names a temporary file: %s", out)
			}
		})
	}
	if left, _ := filepath.Glob(filepath.Join(readOnly, "*")); len(left) != 0 {
		t.Errorf("files made in the read-only directory: %v", left)
	}
	if fi, err := os.Stat(filepath.Join(writable, "x.tar.gz")); err != nil || fi.Mode() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != 65534 {
		t.Errorf("the archive written: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(sticky, "x.tar.gz")); string(b) != "root's" {
		t.Errorf("another user's file was replaced: %.40q", b)
	}
}
