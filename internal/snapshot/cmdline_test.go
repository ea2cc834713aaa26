package snapshot

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/bootcfg"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/kmsg"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

// Each kernel parameter that carries a secret keeps its name and loses its value; the
// others stay byte for byte.
func TestRedactParam(t *testing.T) {
	for _, c := range []struct {
		in, want string
		names    []string
	}{
		// By name: dracut's iSCSI and CIFS credentials, LUKS and other key files,
		// systemd credentials, a crypt table; and every name with pass, key, token,
		// secret in it, case aside.
		{"rd.iscsi.password=chap", "rd.iscsi.password=<redacted>", []string{"rd.iscsi.password"}},
		{"rd.iscsi.in.password=chap", "rd.iscsi.in.password=<redacted>", []string{"rd.iscsi.in.password"}},
		{"rd.iscsi.username=u", "rd.iscsi.username=<redacted>", []string{"rd.iscsi.username"}},
		{"iscsi_password=chap", "iscsi_password=<redacted>", []string{"iscsi_password"}},
		{"iscsi_in_password=chap", "iscsi_in_password=<redacted>", []string{"iscsi_in_password"}},
		{"iscsi_target_password=chap", "iscsi_target_password=<redacted>", []string{"iscsi_target_password"}},
		{"cifsuser=u", "cifsuser=<redacted>", []string{"cifsuser"}},
		{"cifspass=p", "cifspass=<redacted>", []string{"cifspass"}},
		{"rd.luks.key=/keys/root.key:UUID=1234", "rd.luks.key=<redacted>", []string{"rd.luks.key"}},
		{"luks.key=/k", "luks.key=<redacted>", []string{"luks.key"}},
		{"cryptkey=rootfs:/secret.bin", "cryptkey=<redacted>", []string{"cryptkey"}},
		{"systemd.set_credential=passwd.plaintext-password.root:pw", "systemd.set_credential=<redacted>", []string{"systemd.set_credential"}},
		{"dm-mod.create=\"c,,,rw,0 2048 crypt aes-xts-plain64 00ff 0 /dev/sda 0\"", "dm-mod.create=<redacted>", []string{"dm-mod.create"}},
		{"API_TOKEN=t", "API_TOKEN=<redacted>", []string{"API_TOKEN"}},
		{"my.Secret=s", "my.Secret=<redacted>", []string{"my.Secret"}},
		{"passwd/root-password=x", "passwd/root-password=<redacted>", []string{"passwd/root-password"}},
		// Quotes: a parameter quoted whole stays quoted, a quoted value goes with it.
		{`"iscsi_password=a b"`, `"iscsi_password=<redacted>"`, []string{"iscsi_password"}},
		{`iscsi_password="a b"`, `iscsi_password=<redacted>`, []string{"iscsi_password"}},
		// URLs and dracut's iSCSI root: the user and password only.
		{"root=cifs://u:p@10.0.0.1/share", "root=cifs://<redacted>@10.0.0.1/share", []string{"root"}},
		{"inst.ks=https://u:p@h/ks.cfg", "inst.ks=https://<redacted>@h/ks.cfg", []string{"inst.ks"}},
		{"netroot=iscsi:u:p:ru:rp@10.0.0.1::3260::iqn.2009-06.dracut:target0", "netroot=iscsi:<redacted>@10.0.0.1::3260::iqn.2009-06.dracut:target0", []string{"netroot"}},
		{"root=iscsi:u:p@srv::3260::iqn.x", "root=iscsi:<redacted>@srv::3260::iqn.x", []string{"root"}},
		// A secret nested in a value: in a comma list, a URL's query.
		{"cifsroot=//10.0.0.1/share,username=u,password=p,vers=3", "cifsroot=//10.0.0.1/share,username=u,password=<redacted>,vers=3", []string{"password"}},
		{"rd.iscsi.param=node.session.auth.password=p", "rd.iscsi.param=node.session.auth.password=<redacted>", []string{"node.session.auth.password"}},
		{"ignition.config.url=https://h/c.ign?token=t", "ignition.config.url=https://h/c.ign?token=<redacted>", []string{"https://h/c.ign?token"}},
		// Nothing secret: as it was.
		{"root=/dev/mapper/pve-root", "root=/dev/mapper/pve-root", nil},
		{"root=iscsi:srv::3260::iqn.x", "root=iscsi:srv::3260::iqn.x", nil},
		{"nfsroot=10.0.0.1:/srv/root,vers=4", "nfsroot=10.0.0.1:/srv/root,vers=4", nil},
		{"ip=10.0.0.2::10.0.0.1:255.255.255.0:host:eth0:none", "ip=10.0.0.2::10.0.0.1:255.255.255.0:host:eth0:none", nil},
		{"rd.luks.uuid=keysource:aaaa", "rd.luks.uuid=keysource:aaaa", nil},
		{"rd.vconsole.keymap=de-latin1", "rd.vconsole.keymap=de-latin1", nil},
		{"spec_store_bypass_disable=on", "spec_store_bypass_disable=on", nil},
		{"rd.luks.key", "rd.luks.key", nil},
		{"cifspass=", "cifspass=", nil},
		{"https://h/x", "https://h/x", nil},
		// Redacted already: as it is, so that a snapshot of a snapshot is the same.
		{"iscsi_password=<redacted>", "iscsi_password=<redacted>", nil},
		{`"iscsi_password=<redacted>"`, `"iscsi_password=<redacted>"`, nil},
		{"root=cifs://<redacted>@10.0.0.1/share", "root=cifs://<redacted>@10.0.0.1/share", nil},
		{"netroot=iscsi:<redacted>@10.0.0.1::::iqn.x", "netroot=iscsi:<redacted>@10.0.0.1::::iqn.x", nil},
		{"cifsroot=//h/s,password=<redacted>", "cifsroot=//h/s,password=<redacted>", nil},
	} {
		got, names := redactParam(c.in, `"`)
		if got != c.want || !slices.Equal(names, c.names) {
			t.Errorf("redactParam(%q) = %q %q, want %q %q", c.in, got, names, c.want, c.names)
		}
	}
}

// doctorParams are the parameters the doctor and the boot checks read, name or
// suggest, as a host has them: none of them is touched.
var doctorParams = []string{
	`BOOT_IMAGE=/boot/vmlinuz-6.17.2-1-pve`, `initrd=\EFI\proxmox\6.17.2-1-pve\initrd.img-6.17.2-1-pve`,
	"root=ZFS=rpool/ROOT/pve-1", "boot=zfs", "ro", "quiet",
	"intel_iommu=on", "amd_iommu=on", "iommu=pt", "iommu.passthrough=1", "iommu.strict=0",
	"vfio-pci.ids=10de:2bb1,10de:22e8", "vfio_pci.disable_vga=1", "vfio_iommu_type1.allow_unsafe_interrupts=1",
	"pcie_acs_override=downstream,multifunction", "pci=realloc", "pci=nocrs", "pcie_aspm=off", "pcie_port_pm=off",
	"video=efifb:off", "video=vesafb:off", "initcall_blacklist=sysfb_init", "nomodeset",
	"modprobe.blacklist=nouveau,nvidiafb", "module_blacklist=nouveau", "rd.driver.blacklist=nouveau",
	"rd.driver.pre=vfio-pci", "nouveau.modeset=0", "kvm_amd.sev_snp=0", "mem_encrypt=on", "kvm.ignore_msrs=1",
	"console=ttyS0,115200n8", "console=tty1",
}

// The parameters gpusplit reads survive, in place, between redacted ones.
func TestDoctorParamsSurvive(t *testing.T) {
	var in []string
	for i, p := range doctorParams {
		in = append(in, p, []string{"iscsi_password=s3cr3t", "rd.luks.key=/s3cr3t.key", `"cifspass=s3 cr3t"`}[i%3])
	}
	line := strings.Join(in, " ") + "\n"
	r := newRedaction("/proc/cmdline")
	got := redactCmdline(line, `"`, &r)
	if strings.Contains(got, "s3cr3t") || strings.Contains(got, "cr3t") {
		t.Errorf("a secret is left: %s", got)
	}
	toks := bootcfg.Tokens(got)
	if len(toks) != len(in) {
		t.Fatalf("%d parameters, want %d: %s", len(toks), len(in), got)
	}
	for i, p := range doctorParams {
		if toks[2*i] != p {
			t.Errorf("%s became %s", p, toks[2*i])
		}
	}
	if want := map[string]int{"iscsi_password": 11, "rd.luks.key": 11, "cifspass": 11}; !maps.Equal(r.Replaced, want) {
		t.Errorf("replaced %v, want %v", r.Replaced, want)
	}
	// And every fixture's command line, log and GRUB files, which hold no secret, pass
	// as they are.
	for _, f := range fakehost.Fixtures() {
		name, m := f.Name, f.Machine()
		for p, body := range m.Files {
			var out []byte
			switch {
			case p == "proc/cmdline" || p == "etc/kernel/cmdline":
				out, _ = reduceCmdline(p, []byte(body))
			case p == "dev/kmsg":
				out, _ = redactKernelLog(p, []byte(body))
			case strings.HasPrefix(p, "etc/default/grub"):
				out, _ = reduceGrub(p, []byte(body))
			default:
				continue
			}
			if string(out) != body {
				t.Errorf("%s: %s changed:\n%s\n---\n%s", name, p, body, out)
			}
		}
	}
}

// The kernel log's command lines lose the same values as /proc/cmdline, in every form
// of log the doctor reads, and still parse as they did; no other line changes.
func TestRedactKernelLog(t *testing.T) {
	cmdline := `BOOT_IMAGE=/vmlinuz root=/dev/sda1 iscsi_password=s3cr3t "rd.luks.key=/a b.key" amd_iommu=on`
	want := `BOOT_IMAGE=/vmlinuz root=/dev/sda1 iscsi_password=<redacted> "rd.luks.key=<redacted>" amd_iommu=on`
	log := "6,0,0,-;Linux version 6.17.2-1-pve\n" +
		"6,1,0,-;Command line: " + cmdline + "\n" +
		"5,2,0,-;Kernel command line: " + cmdline + "\n" +
		" SUBSYSTEM=cpu\n" +
		"[    0.000000] Kernel command line: " + cmdline + "\n" +
		"Oct 20 05:10:45 kpro6 kernel: Kernel command line: " + cmdline + "\n" +
		`5,3,0,-;Unknown kernel command line parameters "iscsi_password=s3cr3t cifspass=p4ss BOOT_IMAGE=/vmlinuz", will be passed to user space.` + "\n" +
		"6,4,0,-;dracut-cmdline[201]: Using kernel command line parameters: iscsi_password=s3cr3t quiet\n" +
		"6,5,0,-;iommu: Default domain type: Passthrough (set via kernel command line)\n" +
		"4,6,0,-;vfio-pci 0000:01:00.0: password=not-a-command-line\n"
	got, r := redactKernelLog(host.KernelLogPath, []byte(log))
	var cmdlines []string
	var unknown []string
	for _, l := range strings.Split(string(got), "\n") {
		if strings.Contains(l, "s3cr3t") || strings.Contains(l, "p4ss") || strings.Contains(l, "/a b.key") {
			t.Errorf("a secret is left: %s", l)
		}
		_, msg, _ := strings.Cut(l, ";")
		if b, ok := kmsg.ParseBootLine(msg); ok {
			if b.Cmdline != "" {
				cmdlines = append(cmdlines, b.Cmdline)
			}
			unknown = append(unknown, b.Unknown...)
		}
	}
	if !slices.Equal(cmdlines, []string{want, want}) {
		t.Errorf("command lines %q, want twice %q", cmdlines, want)
	}
	if !slices.Equal(unknown, []string{"iscsi_password=<redacted>", "cifspass=<redacted>", "BOOT_IMAGE=/vmlinuz"}) {
		t.Errorf("unknown parameters %q", unknown)
	}
	for _, l := range []string{
		"[    0.000000] Kernel command line: " + want,
		"kernel: Kernel command line: " + want,
		"Using kernel command line parameters: iscsi_password=<redacted> quiet",
		"iommu: Default domain type: Passthrough (set via kernel command line)\n",
		"vfio-pci 0000:01:00.0: password=not-a-command-line\n",
		" SUBSYSTEM=cpu\n",
	} {
		if !strings.Contains(string(got), l) {
			t.Errorf("the log lacks %q:\n%s", l, got)
		}
	}
	if want := map[string]int{"iscsi_password": 6, "rd.luks.key": 4, "cifspass": 1}; !maps.Equal(r.Replaced, want) {
		t.Errorf("replaced %v, want %v", r.Replaced, want)
	}
	if again, r := redactKernelLog(host.KernelLogPath, got); string(again) != string(got) || len(r.Replaced) != 0 {
		t.Errorf("redacted twice, it changes: %v\n%s", r.Replaced, again)
	}
	// A log without a secret is returned as it is, not copied.
	plain := []byte("6,1,0,-;Command line: root=/dev/sda1 quiet\n")
	if out, _ := redactKernelLog(host.KernelLogPath, plain); &out[0] != &plain[0] {
		t.Error("a log without secrets was copied")
	}
}

// A GRUB defaults file loses the values /proc/cmdline loses, as sh reads it: the
// command line bootcfg makes of the redacted file is the redacted command line of the
// file, so that the doctor's comparison of the two finds what it found before; and sh
// reads the file as it did.
func TestReduceGrub(t *testing.T) {
	for _, c := range []struct {
		name, file, want string
	}{
		{"double quotes", "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet iscsi_password=s3cr3t amd_iommu=on\"\nGRUB_CMDLINE_LINUX=\"\"\n",
			"GRUB_CMDLINE_LINUX_DEFAULT=\"quiet iscsi_password=<redacted> amd_iommu=on\"\nGRUB_CMDLINE_LINUX=\"\"\n"},
		{"single quotes, a quoted value", `GRUB_CMDLINE_LINUX='rd.luks.key=/k "cifspass=a b" root=cifs://u:s3cr3t@h/s'` + "\n",
			`GRUB_CMDLINE_LINUX='rd.luks.key=<redacted> "cifspass=<redacted>" root=cifs://<redacted>@h/s'` + "\n"},
		{"escaped quotes", `GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX \"iscsi_password=a s3cr3t\" iommu=pt"` + "\n",
			`GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX \"iscsi_password=<redacted>\" iommu=pt"` + "\n"},
		{"unquoted", "GRUB_CMDLINE_LINUX=iscsi_password=s3cr3t\nexport GRUB_CMDLINE_LINUX_DEFAULT=cifspass=s3cr3t\n",
			"GRUB_CMDLINE_LINUX=iscsi_password='<redacted>'\nexport GRUB_CMDLINE_LINUX_DEFAULT=cifspass='<redacted>'\n"},
		{"a value quoted apart", `GRUB_CMDLINE_LINUX=iscsi_password="s3cr3t" GRUB_CMDLINE_LINUX_DEFAULT=rd.luks.key='/s3cr3t key'` + "\n",
			`GRUB_CMDLINE_LINUX=iscsi_password="<redacted>" GRUB_CMDLINE_LINUX_DEFAULT=rd.luks.key='<redacted> key'` + "\n"},
		{"comments and other lines", "# GRUB_CMDLINE_LINUX=\"iscsi_password=s3cr3t\"\nGRUB_TIMEOUT=5\nGRUB_DISTRIBUTOR=`( . /etc/os-release && echo ${NAME} )`\n" +
			"GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n",
			"# GRUB_CMDLINE_LINUX=\"iscsi_password=<redacted>\"\nGRUB_TIMEOUT=5\nGRUB_DISTRIBUTOR=`( . /etc/os-release && echo ${NAME} )`\n" +
				"GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, r := reduceGrub(GrubPath, []byte(c.file))
			if string(got) != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
			if len(r.Replaced) == 0 {
				t.Error("nothing counted")
			}
			if again, r := reduceGrub(GrubPath, got); string(again) != string(got) || len(r.Replaced) != 0 {
				t.Errorf("reduced twice, it changes: %v\n%s", r.Replaced, again)
			}
			before, after := readGrub(t, c.file), readGrub(t, string(got))
			if len(after.SyntaxErrors) != len(before.SyntaxErrors) || len(after.Assignments) != len(before.Assignments) {
				t.Errorf("sh reads it otherwise: %v %d assignments, was %v %d", after.SyntaxErrors, len(after.Assignments), before.SyntaxErrors, len(before.Assignments))
			}
			rr := newRedaction("")
			want := redactCmdline(before.Cmdline(), `"`, &rr)
			if comment := strings.HasPrefix(c.file, "#"); comment != (len(rr.Replaced) == 0) {
				t.Errorf("bootcfg reads %q of it: the test does not test what it means to", before.Cmdline())
			}
			if m := append(bootcfg.Missing(want, after.Cmdline()), bootcfg.Missing(after.Cmdline(), want)...); len(m) > 0 {
				t.Errorf("bootcfg reads %q of it, not %q as /proc/cmdline would have it: %q differ", after.Cmdline(), want, m)
			}
		})
	}
}

// GrubPath is where readGrub puts a GRUB defaults file.
const GrubPath = "/etc/default/grub"

func readGrub(t *testing.T, body string) *bootcfg.Grub {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, GrubPath)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	g, err := bootcfg.ReadGrub(h)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
