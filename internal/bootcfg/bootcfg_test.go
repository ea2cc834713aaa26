package bootcfg

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// writeTree lays out files (absolute paths as the machine sees them) under a temporary
// root and opens it. A path ending in "/" is made a directory.
func writeTree(t *testing.T, files map[string]string) *host.Host {
	t.Helper()
	dir := t.TempDir()
	for p, text := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestTokens(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"   \t\n", nil},
		{"quiet", []string{"quiet"}},
		{"  quiet  splash\n", []string{"quiet", "splash"}},
		{"BOOT_IMAGE=/boot/vmlinuz-6.17.2-1-pve root=/dev/mapper/pve-root ro quiet\n",
			[]string{"BOOT_IMAGE=/boot/vmlinuz-6.17.2-1-pve", "root=/dev/mapper/pve-root", "ro", "quiet"}},
		{`foo="a b" bar`, []string{`foo="a b"`, "bar"}},
		{`"foo=a b" bar`, []string{`"foo=a b"`, "bar"}},
		{`dyndbg="file x.c +p"	quiet`, []string{`dyndbg="file x.c +p"`, "quiet"}},
		{"a\tb\rc\vd\fe", []string{"a", "b", "c", "d", "e"}},
		{`x="a b"c"d e" y`, []string{`x="a b"c"d e"`, "y"}},
		// An unterminated quote runs to the end, as in the kernel.
		{`quiet foo="a b c`, []string{"quiet", `foo="a b c`}},
		{`"`, []string{`"`}},
		{`a "" b`, []string{"a", `""`, "b"}},
		{"-- init_arg", []string{"--", "init_arg"}},
	}
	for _, tt := range tests {
		if got := Tokens(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("Tokens(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParam(t *testing.T) {
	tests := []struct{ in, want string }{
		{"iommu=pt", "iommu"},
		{"quiet", "quiet"},
		{"root=ZFS=rpool/ROOT/pve-1", "root"},
		{`foo="a b"`, "foo"},
		{`"foo=a b"`, "foo"},
		{`initrd=\EFI\proxmox\5.4.73-1-pve\initrd.img-5.4.73-1-pve`, "initrd"},
		{"=x", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := Param(tt.in); got != tt.want {
			t.Errorf("Param(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// systemdBootCmdline is a Proxmox VE host's /proc/cmdline under systemd-boot, verbatim
// from the public text of a PCI passthrough guide.
const systemdBootCmdline = `initrd=\EFI\proxmox\5.4.73-1-pve\initrd.img-5.4.73-1-pve root=ZFS=rpool/ROOT/pve-1 boot=zfs intel_iommu=on iommu=pt`

func TestLoader(t *testing.T) {
	tests := []struct{ in, want string }{
		{"BOOT_IMAGE=/boot/vmlinuz-6.17.2-1-pve root=/dev/mapper/pve-root ro quiet", "grub"},
		{"BOOT_IMAGE=/vmlinuz-6.8.0-45-generic root=UUID=0b2c ro console=tty1 console=ttyS0\n", "grub"},
		{"BOOT_IMAGE=(hd0,gpt2)/vmlinuz-6.1.0-26-amd64 root=/dev/sda3 ro quiet", "grub"},
		{systemdBootCmdline, "systemd-boot"},
		{systemdBootCmdline + "\n", "systemd-boot"},
		{`initrd=\EFI\proxmox\6.8.12-4-pve\initrd.img-6.8.12-4-pve root=ZFS=rpool/ROOT/pve-1 boot=zfs`, "systemd-boot"},
		{`initrd=\efi\proxmox\6.8.12-4-pve\initrd.img root=ZFS=rpool/ROOT/pve-1`, "systemd-boot"},
		// Kernels started another way: a direct kernel boot (QEMU -append), an initrd
		// that is not on the EFI partition, a cmdline that mentions BOOT_IMAGE later.
		{"root=/dev/vda1 console=ttyS0", ""},
		{`initrd=/boot/initrd.img root=/dev/sda1`, ""},
		{`initrd=\EFI`, ""},
		{"root=/dev/sda1 BOOT_IMAGE=/vmlinuz", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := Loader(tt.in); got != tt.want {
			t.Errorf("Loader(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestMissing(t *testing.T) {
	tests := []struct {
		name       string
		want, have string
		missing    []string
	}{
		{"Proxmox systemd-boot: /etc/kernel/cmdline not refreshed",
			"root=ZFS=rpool/ROOT/pve-1 boot=zfs intel_iommu=on iommu=pt\n",
			`initrd=\EFI\proxmox\6.8.12-4-pve\initrd.img-6.8.12-4-pve root=ZFS=rpool/ROOT/pve-1 boot=zfs intel_iommu=on`,
			[]string{"iommu=pt"}},
		{"Proxmox systemd-boot: applied",
			"root=ZFS=rpool/ROOT/pve-1 boot=zfs intel_iommu=on iommu=pt",
			systemdBootCmdline,
			nil},
		{"GRUB: applied",
			"quiet amd_iommu=on iommu=pt",
			"BOOT_IMAGE=/boot/vmlinuz-6.17.2-1-pve root=/dev/mapper/pve-root ro quiet amd_iommu=on iommu=pt\n",
			nil},
		{"GRUB cloud image: overridden",
			"console=tty1 console=ttyS0 intel_iommu=on iommu=pt pci=realloc",
			"BOOT_IMAGE=/vmlinuz-6.8.0-45-generic root=UUID=0b2c ro console=tty1 console=ttyS0",
			[]string{"intel_iommu=on", "iommu=pt", "pci=realloc"}},
		{"compared as written: a different value is missing",
			"iommu=pt pcie_aspm=off", "iommu=on pcie_aspm=off", []string{"iommu=pt"}},
		{"repeated tokens reported once", "iommu=pt quiet iommu=pt", "quiet", []string{"iommu=pt"}},
		{"loader parameters ignored in have", "BOOT_IMAGE=/vmlinuz quiet", "BOOT_IMAGE=/vmlinuz quiet", []string{"BOOT_IMAGE=/vmlinuz"}},
		{"initrd in have does not count", `initrd=\EFI\x`, `initrd=\EFI\x`, []string{`initrd=\EFI\x`}},
		{"GRUB's requoting", `dyndbg="file x.c +p" quiet`, `BOOT_IMAGE=/vmlinuz "dyndbg=file x.c +p" quiet`, nil},
		{"nothing wanted", "", "quiet", nil},
		{"nothing there", "quiet", "", []string{"quiet"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Missing(tt.want, tt.have); !slices.Equal(got, tt.missing) {
				t.Errorf("Missing(%q, %q) = %q, want %q", tt.want, tt.have, got, tt.missing)
			}
		})
	}
}

func TestKernelCmdline(t *testing.T) {
	tests := []struct {
		name   string
		files  map[string]string
		want   string
		wantOK bool
	}{
		{"absent", map[string]string{"/etc/hostname": "pve\n"}, "", false},
		{"one line", map[string]string{KernelCmdlineFile: "root=ZFS=rpool/ROOT/pve-1 boot=zfs intel_iommu=on iommu=pt\n"},
			"root=ZFS=rpool/ROOT/pve-1 boot=zfs intel_iommu=on iommu=pt", true},
		{"no newline", map[string]string{KernelCmdlineFile: "root=ZFS=rpool/ROOT/pve-1 boot=zfs"}, "root=ZFS=rpool/ROOT/pve-1 boot=zfs", true},
		{"only the first line counts", map[string]string{KernelCmdlineFile: "root=ZFS=rpool/ROOT/pve-1 boot=zfs \niommu=pt\n"},
			"root=ZFS=rpool/ROOT/pve-1 boot=zfs", true},
		{"empty", map[string]string{KernelCmdlineFile: ""}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := KernelCmdline(writeTree(t, tt.files))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("KernelCmdline = %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
	t.Run("unreadable", func(t *testing.T) {
		h := writeTree(t, map[string]string{KernelCmdlineFile + "/": ""})
		_, _, err := KernelCmdline(h)
		if err == nil || !strings.Contains(err.Error(), KernelCmdlineFile) {
			t.Errorf("error %v does not name %s", err, KernelCmdlineFile)
		}
	})
}

// cloudImgSettings is /etc/default/grub.d/50-cloudimg-settings.cfg of an Ubuntu cloud
// image, verbatim.
const cloudImgSettings = `# Cloud Image specific Grub settings for Generic Cloud Images
# CLOUD_IMG: This file was created/modified by the Cloud Image build process

# Set the recordfail timeout
GRUB_RECORDFAIL_TIMEOUT=0

# Do not wait on grub prompt
GRUB_TIMEOUT=0

# Set the default commandline
GRUB_CMDLINE_LINUX_DEFAULT="console=tty1 console=ttyS0"

# Set the grub console type
GRUB_TERMINAL=console
`

const cloudImgFile = "/etc/default/grub.d/50-cloudimg-settings.cfg"

// ubuntuGrub is an Ubuntu /etc/default/grub where the user added IOMMU parameters to
// GRUB_CMDLINE_LINUX_DEFAULT (line 10).
const ubuntuGrub = `# If you change this file, run 'update-grub' afterwards to update
# /boot/grub/grub.cfg.
# For full documentation of the options in this file, see:
#   info -f grub -n 'Simple configuration'

GRUB_DEFAULT=0
GRUB_TIMEOUT_STYLE=hidden
GRUB_TIMEOUT=0
GRUB_DISTRIBUTOR=` + "`( . /etc/os-release; echo ${NAME:-Ubuntu} ) 2>/dev/null || echo Ubuntu`" + `
GRUB_CMDLINE_LINUX_DEFAULT="quiet splash intel_iommu=on iommu=pt pci=realloc"
GRUB_CMDLINE_LINUX=""

# If your computer has multiple operating systems installed, then you
# probably want to run os-prober. However, if your computer is a host
# for guest OSes installed via LVM or raw disk devices, running
# os-prober can cause damage to those guest OSes as it mounts
# filesystems to look for things.
#GRUB_DISABLE_OS_PROBER=false

# Uncomment to disable graphical terminal
#GRUB_TERMINAL=console
`

// proxmoxGrub is a Proxmox VE node's /etc/default/grub as installed.
const proxmoxGrub = `# If you change this file, run 'update-grub' afterwards to update
# /boot/grub/grub.cfg.
# For full documentation of the options in this file, see:
#   info -f grub -n 'Simple configuration'

GRUB_DEFAULT=0
GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR=` + "`( . /etc/os-release && echo ${NAME} )`" + `
GRUB_CMDLINE_LINUX_DEFAULT="quiet"
GRUB_CMDLINE_LINUX=""

# If your computer has multiple operating systems installed, then you
# probably want to run os-prober. However, if your computer is a host
# for guest OSes installed via LVM or raw disk devices, running
# os-prober can cause damage to those guest OSes as it mounts
# filesystems to look for things.
#GRUB_DISABLE_OS_PROBER=false

# Uncomment to enable BadRAM filtering, modify to suit your needs
# This works with Linux (no patch required) and with any kernel that obtains
# the memory map information from GRUB (GNU Mach, kernel of FreeBSD ...)
#GRUB_BADRAM="0x01234567,0xfefefefe,0x89abcdef,0xefefefef"

# Uncomment to disable graphical terminal
#GRUB_TERMINAL=console

# The resolution used on graphical terminal
# note that you can use only modes which your graphic card supports via VBE
# you can see them in real GRUB with the command ` + "`vbeinfo'" + `
#GRUB_GFXMODE=640x480

# Uncomment if you don't want GRUB to pass "root=UUID=xxx" parameter to Linux
#GRUB_DISABLE_LINUX_UUID=true

# Uncomment to disable generation of recovery mode menu entries
#GRUB_DISABLE_RECOVERY="true"

# Uncomment to get a beep at grub start
#GRUB_INIT_TUNE="480 440 1"
`

// proxmoxInstallerCfg is the drop-in the Proxmox VE installer writes.
const proxmoxInstallerCfg = `GRUB_TERMINAL_OUTPUT="gfxterm"
GRUB_GFXMODE="1024x768"
`

// overrides renders a Grub's overrides as "param set-file:line lost-file:line".
func overrides(g *Grub) []string {
	var out []string
	for _, o := range g.Overrides {
		out = append(out, o.Param+" "+where(o.SetBy)+" "+where(o.LostBy))
	}
	return out
}

func where(a Assignment) string { return a.File + ":" + strconv.Itoa(a.Line) }

// assignments renders a Grub's assignments as "file:line VAR=value" (with "+" for one that keeps).
func assignments(list []Assignment) []string {
	var out []string
	for _, a := range list {
		s := where(a) + " " + a.Var + "=" + a.Value
		if a.Keeps {
			s += " +"
		}
		out = append(out, s)
	}
	return out
}

const (
	grubMain = GrubFile
	cloudSet = cloudImgFile + ":11"
	mainSet  = grubMain + ":10"
)

func TestReadGrub(t *testing.T) {
	tests := []struct {
		name        string
		files       map[string]string
		absent      bool // no /etc/default/grub
		def, linux  string
		cmdline     string
		overrides   []string
		assignments []string // checked when not nil
		unsure      []string // "file:line VAR"
		syntax      []string
	}{
		{
			name:    "Ubuntu cloud image discards the parameters",
			files:   map[string]string{grubMain: ubuntuGrub, cloudImgFile: cloudImgSettings},
			def:     "console=tty1 console=ttyS0",
			cmdline: "console=tty1 console=ttyS0",
			overrides: []string{
				"quiet " + mainSet + " " + cloudSet,
				"splash " + mainSet + " " + cloudSet,
				"intel_iommu=on " + mainSet + " " + cloudSet,
				"iommu=pt " + mainSet + " " + cloudSet,
				"pci=realloc " + mainSet + " " + cloudSet,
			},
			assignments: []string{
				mainSet + " GRUB_CMDLINE_LINUX_DEFAULT=quiet splash intel_iommu=on iommu=pt pci=realloc",
				grubMain + ":11 GRUB_CMDLINE_LINUX=",
				cloudSet + " GRUB_CMDLINE_LINUX_DEFAULT=console=tty1 console=ttyS0",
			},
		},
		{
			name: "a later drop-in that appends restores them",
			files: map[string]string{grubMain: ubuntuGrub, cloudImgFile: cloudImgSettings,
				"/etc/default/grub.d/99-x.cfg": `GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT intel_iommu=on iommu=pt"` + "\n"},
			def:     "console=tty1 console=ttyS0 intel_iommu=on iommu=pt",
			cmdline: "console=tty1 console=ttyS0 intel_iommu=on iommu=pt",
			overrides: []string{
				"quiet " + mainSet + " " + cloudSet,
				"splash " + mainSet + " " + cloudSet,
				"pci=realloc " + mainSet + " " + cloudSet,
			},
			assignments: []string{
				mainSet + " GRUB_CMDLINE_LINUX_DEFAULT=quiet splash intel_iommu=on iommu=pt pci=realloc",
				grubMain + ":11 GRUB_CMDLINE_LINUX=",
				cloudSet + " GRUB_CMDLINE_LINUX_DEFAULT=console=tty1 console=ttyS0",
				"/etc/default/grub.d/99-x.cfg:1 GRUB_CMDLINE_LINUX_DEFAULT=console=tty1 console=ttyS0 intel_iommu=on iommu=pt +",
			},
		},
		{
			name: "parameters in GRUB_CMDLINE_LINUX survive the cloud file",
			files: map[string]string{
				grubMain: strings.Replace(strings.Replace(ubuntuGrub,
					`GRUB_CMDLINE_LINUX_DEFAULT="quiet splash intel_iommu=on iommu=pt pci=realloc"`, `GRUB_CMDLINE_LINUX_DEFAULT="quiet splash iommu=pt"`, 1),
					`GRUB_CMDLINE_LINUX=""`, `GRUB_CMDLINE_LINUX="intel_iommu=on iommu=pt pci=realloc"`, 1),
				cloudImgFile: cloudImgSettings,
			},
			def:     "console=tty1 console=ttyS0",
			linux:   "intel_iommu=on iommu=pt pci=realloc",
			cmdline: "intel_iommu=on iommu=pt pci=realloc console=tty1 console=ttyS0",
			// iommu=pt left GRUB_CMDLINE_LINUX_DEFAULT but still reaches the kernel.
			overrides: []string{"quiet " + mainSet + " " + cloudSet, "splash " + mainSet + " " + cloudSet},
		},
		{
			name: "drop-ins in C-locale glob order, only *.cfg",
			files: map[string]string{
				grubMain:                                `GRUB_CMDLINE_LINUX_DEFAULT="main"`,
				"/etc/default/grub.d/50-b.cfg":          `GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT b"`,
				"/etc/default/grub.d/10-a.cfg":          `GRUB_CMDLINE_LINUX_DEFAULT=a`,
				"/etc/default/grub.d/99-c.cfg":          `GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT} c"`,
				"/etc/default/grub.d/9-z.cfg":           `GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT z"`,
				"/etc/default/grub.d/Z.cfg":             `GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT Z"`,
				"/etc/default/grub.d/README":            `GRUB_CMDLINE_LINUX_DEFAULT="readme"`,
				"/etc/default/grub.d/60-x.cfg.dpkg-old": `GRUB_CMDLINE_LINUX_DEFAULT="old"`,
				"/etc/default/grub.d/.hidden.cfg":       `GRUB_CMDLINE_LINUX_DEFAULT="hidden"`,
				"/etc/default/grub.d/70-dir.cfg/":       "",
			},
			def:       "a b z c Z",
			cmdline:   "a b z c Z",
			overrides: []string{"main " + grubMain + ":1 /etc/default/grub.d/10-a.cfg:1"},
			assignments: []string{
				grubMain + ":1 GRUB_CMDLINE_LINUX_DEFAULT=main",
				"/etc/default/grub.d/10-a.cfg:1 GRUB_CMDLINE_LINUX_DEFAULT=a",
				"/etc/default/grub.d/50-b.cfg:1 GRUB_CMDLINE_LINUX_DEFAULT=a b +",
				"/etc/default/grub.d/9-z.cfg:1 GRUB_CMDLINE_LINUX_DEFAULT=a b z +",
				"/etc/default/grub.d/99-c.cfg:1 GRUB_CMDLINE_LINUX_DEFAULT=a b z c +",
				"/etc/default/grub.d/Z.cfg:1 GRUB_CMDLINE_LINUX_DEFAULT=a b z c Z +",
			},
		},
		{
			name:    "Proxmox VE as installed",
			files:   map[string]string{grubMain: proxmoxGrub, "/etc/default/grub.d/installer.cfg": proxmoxInstallerCfg},
			def:     "quiet",
			cmdline: "quiet",
			assignments: []string{
				grubMain + ":9 GRUB_CMDLINE_LINUX_DEFAULT=quiet",
				grubMain + ":10 GRUB_CMDLINE_LINUX=",
			},
		},
		{
			name: "Proxmox VE with IOMMU parameters",
			files: map[string]string{grubMain: strings.Replace(proxmoxGrub,
				`GRUB_CMDLINE_LINUX_DEFAULT="quiet"`, `GRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=on iommu=pt"`, 1)},
			def:     "quiet intel_iommu=on iommu=pt",
			cmdline: "quiet intel_iommu=on iommu=pt",
		},
		{
			name:    "drop-ins without the main file",
			absent:  true,
			files:   map[string]string{cloudImgFile: cloudImgSettings},
			def:     "console=tty1 console=ttyS0",
			cmdline: "console=tty1 console=ttyS0",
		},
		{
			name:   "nothing",
			absent: true,
			files:  map[string]string{"/etc/hostname": "x\n"},
		},
		{
			name: "shell: quoting, expansion, export, continuation, comments",
			files: map[string]string{grubMain: `# comment
OPTS='$NOT expanded'
EXTRA=iommu=pt # a comment after a value
export GRUB_CMDLINE_LINUX="a=\"1 2\" \$x \\ \q ${EXTRA}$UNSET"
GRUB_CMDLINE_LINUX_DEFAULT="quiet"' splash'" $OPTS"#not-a-comment
GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT"' pci=realloc' \
  # after a continued line
GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT \
pcie_aspm=off"; A=1; GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX $A"
   GRUB_TIMEOUT=5
`},
			def:     "quiet splash $NOT expanded#not-a-comment pci=realloc pcie_aspm=off",
			linux:   `a="1 2" $x \ \q iommu=pt 1`,
			cmdline: `a="1 2" $x \ \q iommu=pt 1 quiet splash $NOT expanded#not-a-comment pci=realloc pcie_aspm=off`,
			assignments: []string{
				grubMain + `:4 GRUB_CMDLINE_LINUX=a="1 2" $x \ \q iommu=pt`,
				grubMain + ":5 GRUB_CMDLINE_LINUX_DEFAULT=quiet splash $NOT expanded#not-a-comment",
				grubMain + ":6 GRUB_CMDLINE_LINUX_DEFAULT=quiet splash $NOT expanded#not-a-comment pci=realloc +",
				grubMain + ":8 GRUB_CMDLINE_LINUX_DEFAULT=quiet splash $NOT expanded#not-a-comment pci=realloc pcie_aspm=off +",
				grubMain + `:9 GRUB_CMDLINE_LINUX=a="1 2" $x \ \q iommu=pt 1 +`,
			},
		},
		{
			name: "shell: what is not evaluated is not assigned",
			files: map[string]string{grubMain: `GRUB_CMDLINE_LINUX_DEFAULT="quiet"
if [ -e /etc/x ]; then
	GRUB_CMDLINE_LINUX_DEFAULT="in-if"
fi
[ -e /etc/x ] && GRUB_CMDLINE_LINUX_DEFAULT="after-and"
true || GRUB_CMDLINE_LINUX="after-or"
GRUB_CMDLINE_LINUX="in-env" true
echo GRUB_CMDLINE_LINUX_DEFAULT=argument
f() {
	GRUB_CMDLINE_LINUX_DEFAULT="in-function"
}
( GRUB_CMDLINE_LINUX_DEFAULT="in-subshell" )
case "$x" in
a) GRUB_CMDLINE_LINUX_DEFAULT="in-case" ;;
esac
for i in 1 2; do GRUB_CMDLINE_LINUX="$i"; done
cat >/dev/null <<EOF
GRUB_CMDLINE_LINUX_DEFAULT="in-heredoc"
EOF
cat >/dev/null <<-'END'
	GRUB_CMDLINE_LINUX_DEFAULT="in-heredoc-too"
	END
GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT iommu=pt"
[ -e /etc/y ] &&

	GRUB_CMDLINE_LINUX_DEFAULT="after-and-and-lines"
unset -f GRUB_CMDLINE_LINUX_DEFAULT
`},
			def:     "quiet iommu=pt",
			cmdline: "quiet iommu=pt",
			assignments: []string{
				grubMain + ":1 GRUB_CMDLINE_LINUX_DEFAULT=quiet",
				grubMain + ":23 GRUB_CMDLINE_LINUX_DEFAULT=quiet iommu=pt +",
			},
			unsure: []string{
				grubMain + ":3 GRUB_CMDLINE_LINUX_DEFAULT",
				grubMain + ":5 GRUB_CMDLINE_LINUX_DEFAULT",
				grubMain + ":6 GRUB_CMDLINE_LINUX",
				grubMain + ":10 GRUB_CMDLINE_LINUX_DEFAULT",
				grubMain + ":12 GRUB_CMDLINE_LINUX_DEFAULT",
				grubMain + ":14 GRUB_CMDLINE_LINUX_DEFAULT",
				grubMain + ":16 GRUB_CMDLINE_LINUX",
				grubMain + ":26 GRUB_CMDLINE_LINUX_DEFAULT",
			},
		},
		{
			name: "shell: command substitution and unknown expansions",
			files: map[string]string{grubMain: "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n" +
				"GRUB_DISTRIBUTOR=`( . /etc/os-release && echo ${NAME} )`\n" +
				"GRUB_CMDLINE_LINUX=\"$(cat /etc/extra) x\"\n" +
				"GRUB_CMDLINE_LINUX_DEFAULT=\"${GRUB_CMDLINE_LINUX_DEFAULT:-quiet} splash\"\n" +
				"GRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT $1\"\n" +
				"D=$GRUB_DISTRIBUTOR\n" +
				"GRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT distro=$D\"\n"},
			def:     "quiet distro=",
			cmdline: "quiet distro=",
			assignments: []string{
				grubMain + ":1 GRUB_CMDLINE_LINUX_DEFAULT=quiet",
				grubMain + ":7 GRUB_CMDLINE_LINUX_DEFAULT=quiet distro= +",
			},
			unsure: []string{
				grubMain + ":3 GRUB_CMDLINE_LINUX",
				grubMain + ":4 GRUB_CMDLINE_LINUX_DEFAULT",
				grubMain + ":5 GRUB_CMDLINE_LINUX_DEFAULT",
				grubMain + ":7 GRUB_CMDLINE_LINUX_DEFAULT",
			},
		},
		{
			name:      "shell: unset",
			files:     map[string]string{grubMain: "GRUB_CMDLINE_LINUX=\"iommu=pt\"\nunset GRUB_CMDLINE_LINUX\n"},
			overrides: []string{"iommu=pt " + grubMain + ":1 " + grubMain + ":2"},
		},
		{
			name: "unterminated quote: sh stops there",
			files: map[string]string{grubMain: `GRUB_CMDLINE_LINUX_DEFAULT="quiet"
GRUB_CMDLINE_LINUX="iommu=pt
GRUB_CMDLINE_LINUX_DEFAULT="splash"
`, cloudImgFile: cloudImgSettings},
			// sh reads the second line's value up to the quote on the third and fails on
			// the last one, which opens a quote that never ends.
			def:       "console=tty1 console=ttyS0",
			cmdline:   "console=tty1 console=ttyS0",
			overrides: []string{"quiet " + grubMain + ":1 " + cloudSet},
			syntax:    []string{grubMain + ":3: unterminated double quote"},
		},
		{
			name:    "unclosed if",
			files:   map[string]string{grubMain: "GRUB_CMDLINE_LINUX=a\nif true; then\nGRUB_CMDLINE_LINUX=b\n"},
			linux:   "a",
			cmdline: "a",
			unsure:  []string{grubMain + ":3 GRUB_CMDLINE_LINUX"},
			syntax:  []string{grubMain + ":2: no end to the if started here"},
		},
		{
			name:    "unexpected fi",
			files:   map[string]string{grubMain: "GRUB_CMDLINE_LINUX=a\nfi\nGRUB_CMDLINE_LINUX=b\n"},
			linux:   "a",
			cmdline: "a",
			syntax:  []string{grubMain + ":2: unexpected fi"},
		},
		{
			name:  "binary garbage",
			files: map[string]string{grubMain: "\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00>\x00\x01\x00\x00\x00\xff\xfe\n\x00\x00\x00"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := ReadGrub(writeTree(t, tt.files))
			if err != nil {
				t.Fatal(err)
			}
			if g.Present == tt.absent {
				t.Errorf("Present = %v", g.Present)
			}
			if g.Default != tt.def || g.Linux != tt.linux {
				t.Errorf("Default, Linux = %q, %q; want %q, %q", g.Default, g.Linux, tt.def, tt.linux)
			}
			if got := g.Cmdline(); got != tt.cmdline {
				t.Errorf("Cmdline() = %q, want %q", got, tt.cmdline)
			}
			if got := overrides(g); !slices.Equal(got, tt.overrides) {
				t.Errorf("Overrides =\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.overrides, "\n\t"))
			}
			if got := assignments(g.Assignments); tt.assignments != nil && !slices.Equal(got, tt.assignments) {
				t.Errorf("Assignments =\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.assignments, "\n\t"))
			}
			var unsure []string
			for _, a := range g.Unsure {
				unsure = append(unsure, where(a)+" "+a.Var)
			}
			if !slices.Equal(unsure, tt.unsure) {
				t.Errorf("Unsure =\n\t%s\nwant\n\t%s", strings.Join(unsure, "\n\t"), strings.Join(tt.unsure, "\n\t"))
			}
			if !slices.Equal(g.SyntaxErrors, tt.syntax) {
				t.Errorf("SyntaxErrors = %q, want %q", g.SyntaxErrors, tt.syntax)
			}
		})
	}
}

// The cloud image trap, in the words the doctor shows: the file and line that discard
// each parameter, and the line that set it.
func TestReadGrubOverrideText(t *testing.T) {
	g, err := ReadGrub(writeTree(t, map[string]string{grubMain: ubuntuGrub, cloudImgFile: cloudImgSettings}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"intel_iommu=on": true, "iommu=pt": true, "pci=realloc": true}
	for _, o := range g.Overrides {
		if !want[o.Param] {
			continue
		}
		delete(want, o.Param)
		if o.SetBy.Text != `GRUB_CMDLINE_LINUX_DEFAULT="quiet splash intel_iommu=on iommu=pt pci=realloc"` || o.SetBy.Keeps {
			t.Errorf("%s: SetBy = %+v", o.Param, o.SetBy)
		}
		if o.LostBy.File != cloudImgFile || o.LostBy.Line != 11 || o.LostBy.Var != VarDefault ||
			o.LostBy.Text != `GRUB_CMDLINE_LINUX_DEFAULT="console=tty1 console=ttyS0"` || o.LostBy.Keeps {
			t.Errorf("%s: LostBy = %+v", o.Param, o.LostBy)
		}
	}
	if len(want) > 0 {
		t.Errorf("no override for %v", want)
	}
	// And the kernel that booted from it lacks them.
	proc := "BOOT_IMAGE=/vmlinuz-6.8.0-45-generic root=UUID=0b2c ro console=tty1 console=ttyS0\n"
	if got := Missing(g.Cmdline(), proc); got != nil {
		t.Errorf("Missing(Cmdline) = %q: the generated command line is what booted", got)
	}
}

func TestReadGrubContinuedText(t *testing.T) {
	src := "GRUB_TIMEOUT=5\nexport \\\n  GRUB_CMDLINE_LINUX_DEFAULT=\"quiet \\\niommu=pt\"\r\nGRUB_TIMEOUT=1\n"
	g, err := ReadGrub(writeTree(t, map[string]string{grubMain: src}))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Assignments) != 1 {
		t.Fatalf("Assignments = %+v", g.Assignments)
	}
	a := g.Assignments[0]
	want := "export \\\n  GRUB_CMDLINE_LINUX_DEFAULT=\"quiet \\\niommu=pt\""
	if a.Line != 2 || a.Text != want || a.Value != "quiet iommu=pt\r" {
		t.Errorf("Assignment = %+v; want line 2, text %q", a, want)
	}
	if got := g.Cmdline(); got != "quiet iommu=pt" {
		t.Errorf("Cmdline() = %q", got)
	}
}

func TestReadGrubErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		links map[string]string // link path -> target
		file  string            // the file the error must name
	}{
		{"main file unreadable", map[string]string{grubMain + "/": ""}, nil, grubMain},
		{"drop-in escapes the root", map[string]string{grubMain: proxmoxGrub},
			map[string]string{"/etc/default/grub.d/50-x.cfg": "../../../../../../etc/passwd"}, "/etc/default/grub.d/50-x.cfg"},
		{"drop-in directory unreadable", map[string]string{grubMain: proxmoxGrub, GrubDropIn: "not a directory"}, nil, GrubDropIn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := writeTree(t, tt.files)
			for p, target := range tt.links {
				full := filepath.Join(h.Root(), filepath.FromSlash(p))
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, full); err != nil {
					t.Fatal(err)
				}
			}
			g, err := ReadGrub(h)
			if err == nil {
				t.Fatalf("no error; got %+v", g)
			}
			if !strings.Contains(err.Error(), tt.file) {
				t.Errorf("error %q does not name %s", err, tt.file)
			}
		})
	}
	t.Run("dangling drop-in link is left out", func(t *testing.T) {
		h := writeTree(t, map[string]string{grubMain: proxmoxGrub})
		full := filepath.Join(h.Root(), "etc/default/grub.d/50-x.cfg")
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/etc/nowhere.cfg", full); err != nil {
			t.Fatal(err)
		}
		g, err := ReadGrub(h)
		if err != nil || g.Default != "quiet" {
			t.Errorf("ReadGrub = %+v, %v", g, err)
		}
	})
}

func TestReadGrubHugeInput(t *testing.T) {
	// Far past maxValue, and within what host reads of a file (larger is refused there).
	huge := strings.Repeat("x", host.MaxFileBytes-4096)
	tests := []struct {
		name  string
		src   string
		check func(g *Grub) bool
	}{
		{"huge line", `GRUB_CMDLINE_LINUX_DEFAULT="quiet ` + huge + `"` + "\n",
			func(g *Grub) bool { return g.Default == "quiet "+huge && len(g.Unsure) == 0 }},
		{"huge comment", "#" + huge + "\nGRUB_CMDLINE_LINUX_DEFAULT=quiet\n",
			func(g *Grub) bool { return g.Default == "quiet" }},
		{"huge unterminated quote", "GRUB_CMDLINE_LINUX_DEFAULT=quiet\nGRUB_CMDLINE_LINUX='" + huge,
			func(g *Grub) bool { return g.Default == "quiet" && g.Linux == "" && len(g.SyntaxErrors) == 1 }},
		// A variable that doubles line after line is followed up to a bound; past it,
		// its value is not known and what is built from it is unsure.
		{"doubling", "GRUB_CMDLINE_LINUX_DEFAULT=quiet\nX=xxxxxxxx\n" +
			strings.Repeat("X=\"$X$X\"\n", 64) + "GRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT $X\"\n",
			func(g *Grub) bool {
				return g.Default == "quiet" && len(g.Unsure) == 1 && g.Unsure[0].Line == 67
			}},
		{"many expansions", "X=" + strings.Repeat("y", 60<<10) + "\n" + strings.Repeat("Y=$X\n", 20000) +
			"GRUB_CMDLINE_LINUX=\"$Y\"\n",
			func(g *Grub) bool { return len(g.Linux) <= maxValue && len(g.Unsure) == 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := ReadGrub(writeTree(t, map[string]string{grubMain: tt.src}))
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(g) {
				t.Errorf("Default %.40q... (%d bytes), Linux %.40q... (%d bytes), %d unsure, syntax errors %q",
					g.Default, len(g.Default), g.Linux, len(g.Linux), len(g.Unsure), g.SyntaxErrors)
			}
		})
	}
}

// The sample host is a Proxmox VE node booted by GRUB with its parameters applied.
func TestSampleHost(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	g, err := ReadGrub(h)
	if err != nil {
		t.Fatal(err)
	}
	if !g.Present || g.Default != "quiet amd_iommu=on iommu=pt" || g.Linux != "" || len(g.Overrides) > 0 || len(g.Unsure) > 0 {
		t.Errorf("ReadGrub = %+v", g)
	}
	proc, err := h.ReadString("/proc/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	if got := Loader(proc); got != "grub" {
		t.Errorf("Loader = %q, want grub", got)
	}
	if got := Missing(g.Cmdline(), proc); got != nil {
		t.Errorf("Missing = %q", got)
	}
	if _, ok, err := KernelCmdline(h); ok || err != nil {
		t.Errorf("KernelCmdline: ok %v, err %v; the node boots with GRUB", ok, err)
	}
}

func FuzzGrubFile(f *testing.F) {
	for _, s := range []string{ubuntuGrub, proxmoxGrub, cloudImgSettings, proxmoxInstallerCfg,
		"A='x\nB=\"$A${A}$(x)`y`\"\\\n C=1; if x; then D=2; fi\ncase $x in (a) y;; esac\ncat <<-E\n\tE\n",
		"f() { x; }\n( ) ${#x} ${x:-\"}\"} $((1+2)) \"\\", "export X=1 Y readonly Z=\"$X\"\n}\nfi\n"} {
		f.Add(s, cloudImgSettings)
	}
	f.Fuzz(func(t *testing.T, main, dropIn string) {
		g := evalGrub([]source{{GrubFile, main}, {cloudImgFile, dropIn}})
		lines := map[string]int{GrubFile: strings.Count(main, "\n") + 1, cloudImgFile: strings.Count(dropIn, "\n") + 1}
		check := func(what string, a Assignment) {
			if a.Line < 1 || a.Line > lines[a.File] || !isCmdlineVar(a.Var) {
				t.Fatalf("%s: %+v", what, a)
			}
		}
		for _, a := range g.Assignments {
			check("assignment", a)
			if len(a.Value) > maxValue {
				t.Fatalf("value of %d bytes", len(a.Value))
			}
		}
		for _, a := range g.Unsure {
			check("unsure", a)
		}
		final := Tokens(g.Cmdline())
		for _, o := range g.Overrides {
			check("set by", o.SetBy)
			check("lost by", o.LostBy)
			if slices.Contains(final, o.Param) || !slices.Contains(Tokens(o.SetBy.Value), o.Param) ||
				slices.Contains(Tokens(o.LostBy.Value), o.Param) {
				t.Fatalf("override %+v with final %q", o, final)
			}
		}
		if len(g.Assignments) > 0 {
			last := map[string]string{}
			for _, a := range g.Assignments {
				last[a.Var] = a.Value
			}
			if last[VarDefault] != g.Default || last[VarLinux] != g.Linux {
				t.Fatalf("final values %q %q, last assigned %q", g.Default, g.Linux, last)
			}
		}
	})
}

func FuzzTokens(f *testing.F) {
	for _, s := range []string{systemdBootCmdline, `a="b c" "d e`, "\t\n", `x"y z"w "`, "BOOT_IMAGE=/x initrd=\\EFI\\y z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks := Tokens(s)
		for i, tok := range toks {
			if tok == "" || isSpace(tok[0]) || !strings.Contains(s, tok) {
				t.Fatalf("token %d %q of %q", i, tok, s)
			}
			if i < len(toks)-1 && strings.Count(tok, `"`)%2 != 0 {
				t.Fatalf("token %d %q of %q has an open quote", i, tok, s)
			}
			_ = Param(tok)
		}
		if again := Tokens(strings.Join(toks, " ")); !slices.Equal(again, toks) {
			t.Fatalf("Tokens(Join(Tokens(%q))) = %q, want %q", s, again, toks)
		}
		for _, tok := range Missing(s, s) {
			if p := Param(tok); p != "BOOT_IMAGE" && p != "initrd" {
				t.Fatalf("Missing(s, s) reports %q", tok)
			}
		}
		_ = Loader(s)
	})
}
