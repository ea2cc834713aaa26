package snapshot

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

// secretRoot is a Proxmox node with a secret planted in every place a snapshot could
// carry one: each secret is a distinct word, so that a search of the archive's bytes
// tells which one got through. Beside them are the keys gpusplit reads, which must stay.
func secretRoot() (fakehost.Machine, []string) {
	m, secrets, _ := secretRootCmdline()
	return m, secrets
}

// secretRootCmdline is secretRoot with the command line as its snapshot must hold it.
func secretRootCmdline() (fakehost.Machine, []string, string) {
	secrets := []string{
		"desc-s3cr3t", "desc-key-s3cr3t", "cipw-s3cr3t", "ciuser-s3cr3t", "sshkey-s3cr3t",
		"objdata-s3cr3t", "spicepw-s3cr3t", "drivekey-s3cr3t", "smbios-s3cr3t", "iscsi-s3cr3t",
		"fwcfg-s3cr3t", "mmio-s3cr3t", "quoted-s3cr3t", "commas-s3cr3t", "net-s3cr3t", "tags-s3cr3t",
		"env-s3cr3t", "env2-s3cr3t", "hook-s3cr3t", "mount-s3cr3t", "ctdesc-s3cr3t",
		"snapdesc-s3cr3t", "snapcipw-s3cr3t", "snapargs-s3cr3t", "pendcipw-s3cr3t",
		"pendargs-s3cr3t", "cloudinit-s3cr3t", "garbage-s3cr3t",
		"gpusplit-other-s3cr3t", "gpusplit-sub-s3cr3t", "dirmap-s3cr3t",
		"user-s3cr3t", "storage-s3cr3t", "datacenter-s3cr3t", "priv-s3cr3t", "privlink-s3cr3t",
		"pgtitle-s3cr3t", "title-s3cr3t", "apikey-s3cr3t", "environ-s3cr3t",
		"iscsi-pw-s3cr3t", "iscsi-in-s3cr3t", "luks-s3cr3t", "cifs-url-s3cr3t", "netroot-s3cr3t", "cred-s3cr3t",
		"cifsroot-s3cr3t", "kmsg-unknown-s3cr3t", "kernel-cmdline-s3cr3t", "grub-s3cr3t", "grubd-s3cr3t",
	}
	// The command line, as /proc/cmdline and the kernel log have it, with the
	// parameters the doctor reads beside the secrets.
	cmdline := "BOOT_IMAGE=/boot/vmlinuz-6.17.2-1-pve root=cifs://admin:cifs-url-s3cr3t@10.0.0.1/root ro quiet amd_iommu=on iommu=pt" +
		" iscsi_target_password=iscsi-pw-s3cr3t rd.iscsi.in.password=iscsi-in-s3cr3t rd.luks.key=/etc/luks-s3cr3t.key" +
		" netroot=iscsi:u:netroot-s3cr3t@10.0.0.2::3260::iqn.2009-06.dracut:t0 systemd.set_credential=passwd.plaintext-password.root:cred-s3cr3t" +
		" \"cifsroot=//10.0.0.3/share,username=u,password=cifsroot-s3cr3t x\" vfio-pci.ids=10de:2bb1 pcie_acs_override=downstream"
	redactedCmdline := "BOOT_IMAGE=/boot/vmlinuz-6.17.2-1-pve root=cifs://<redacted>@10.0.0.1/root ro quiet amd_iommu=on iommu=pt" +
		" iscsi_target_password=<redacted> rd.iscsi.in.password=<redacted> rd.luks.key=<redacted>" +
		" netroot=iscsi:<redacted>@10.0.0.2::3260::iqn.2009-06.dracut:t0 systemd.set_credential=<redacted>" +
		" \"cifsroot=//10.0.0.3/share,username=u,password=<redacted>\" vfio-pci.ids=10de:2bb1 pcie_acs_override=downstream"
	vm := "#Training VM, root password desc-s3cr3t\n" +
		"#second line\n" +
		"args: -object secret,id=sec0,data=objdata-s3cr3t -spice port=5900,password=spicepw-s3cr3t" +
		" -drive file=/dev/zvol/x,key-secret=drivekey-s3cr3t -smbios type=11,value=io.systemd.credential:password=smbios-s3cr3t" +
		" -drive file=iscsi://admin:iscsi-s3cr3t@10.0.0.1/iqn.x/0 -fw_cfg name=opt/ign,string=fwcfg-s3cr3t" +
		" -fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=2097152 -fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=mmio-s3cr3t" +
		" -append \"quiet password=quoted-s3cr3t\" -object secret,id=sec1,data=commas-s3cr3t,,more,format=raw" +
		" -device pxb-pcie,id=gpusplit-pxb0,bus_nr=128,numa_node=0,bus=pcie.0,addr=0x2\n" +
		"bios: ovmf\n" +
		"cipassword: cipw-s3cr3t\n" +
		"ciuser: ciuser-s3cr3t\n" +
		"cores: 8\n" +
		"cpu: x86-64-v2-AES,flags=+pdpe1gb,phys-bits=42\n" +
		"description: desc-key-s3cr3t\n" +
		"hookscript: local:snippets/gpusplit.sh\n" +
		"hotplug: disk,network,usb,memory\n" +
		"hostpci0: mapping=gpus,pcie=1\n" +
		"machine: q35\n" +
		"memory: 65536\n" +
		"net0: virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=net-s3cr3t\n" +
		"numa: 1\n" +
		"numa0: cpus=0-7,hostnodes=0,memory=65536,policy=bind\n" +
		"ostype: l26\n" +
		"sockets: 1\n" +
		"sshkeys: ssh-ed25519%20AAAA%20sshkey-s3cr3t\n" +
		"tags: tags-s3cr3t\n" +
		"\x00\x01garbage-s3cr3t\n" +
		"\n" +
		"[before-upgrade]\n" +
		"#snapshot note snapdesc-s3cr3t\n" +
		"args: -object secret,id=s,data=snapargs-s3cr3t\n" +
		"cipassword: snapcipw-s3cr3t\n" +
		"hostpci0: mapping=gpus\n" +
		"snaptime: 1760712201\n" +
		"\n" +
		"[PENDING]\n" +
		"args: -object secret,id=p,data=pendargs-s3cr3t\n" +
		"cipassword: pendcipw-s3cr3t\n" +
		"delete: tags\n" +
		"\n" +
		"[special:cloudinit]\n" +
		"cipassword: cloudinit-s3cr3t\n"
	ct := "#inference ctdesc-s3cr3t\n" +
		"arch: amd64\n" +
		"cores: 4\n" +
		"dev0: /dev/nvidia0,gid=44,mode=0666\n" +
		"hostname: infer01\n" +
		"memory: 8192\n" +
		"lxc.environment: HF_TOKEN=env-s3cr3t\n" +
		"lxc.environment = API_KEY=env2-s3cr3t\n" +
		"lxc.hook.pre-start: /usr/local/bin/mount-creds hook-s3cr3t\n" +
		"lxc.cgroup2.devices.allow: c 195:* rwm\n" +
		"lxc.mount.entry: /dev/nvidia-caps dev/nvidia-caps none bind,optional,create=dir\n" +
		"lxc.mount.entry: /tank/mount-s3cr3t mnt/data none bind 0 0\n"
	m := fakehost.Machine{
		Nodes: []fakehost.Node{{ID: 0, CPUs: "0-7"}},
		Bridges: []fakehost.HostBridge{{NUMA: 0, Devices: []fakehost.Device{
			{Slot: 2, Vendor: 0x10de, Device: 0x2bb1, Class: 0x030000, Driver: "nvidia", Model: "NVIDIA RTX PRO 6000"},
		}}},
		NvidiaVersion: "580.95.05",
		Processes: []fakehost.Process{
			// A rewritten process title: argv[0] is all there is, and it holds a password.
			{PID: 70, Comm: "postgres", Cmdline: []string{"postgres: app password=pgtitle-s3cr3t [local] idle"}, Cgroup: "/system.slice/postgresql.service", Files: []string{"/dev/nvidia0"}},
			// A title that is no file name of the program: comm disagrees with it.
			{PID: 71, Comm: "worker", Cmdline: []string{"title-s3cr3t"}, Cgroup: "/lxc/129/ns", Files: []string{"/dev/nvidia0"}},
			{PID: 72, Comm: "python3", Cmdline: []string{"/opt/venv/bin/python3", "serve.py", "--api-key=apikey-s3cr3t"}, Cgroup: "/lxc/129/ns", Files: []string{"/dev/nvidia0"}},
		},
		Files: map[string]string{
			"etc/hostname":                         "n\n",
			"etc/pve/nodes/n/qemu-server/131.conf": vm,
			"etc/pve/nodes/n/lxc/129.conf":         ct,
			"etc/pve/mapping/pci.cfg":              "gpus\n\tmap id=10de:2bb1,node=n,path=0000:00:02.0\n\tdescription RTX PRO 6000\n\n",
			"etc/pve/mapping/dir.cfg":              "share\n\tmap node=n,path=/tank/dirmap-s3cr3t\n",
			"etc/pve/user.cfg":                     "user:root@pam:1:0:::user-s3cr3t::\n",
			"etc/pve/storage.cfg":                  "cifs: nas\n\tpassword storage-s3cr3t\n",
			"etc/pve/datacenter.cfg":               "email_from: datacenter-s3cr3t\n",
			"etc/pve/priv/storage/nas.pw":          "priv-s3cr3t\n",
			"etc/pve/priv/token.cfg":               "privlink-s3cr3t\n",
			"etc/gpusplit/split.toml":              "[[target]]\nname = \"vms\"\ndriver = \"vfio-pci\"\ndevices = [\"numa:0\"]\n",
			"etc/gpusplit/credentials.toml":        "token = \"gpusplit-other-s3cr3t\"\n",
			"etc/gpusplit/old/split.toml":          "# gpusplit-sub-s3cr3t\n",
			"proc/72/environ":                      "HF_TOKEN=environ-s3cr3t\x00",
			"proc/cmdline":                         cmdline + "\n",
			"dev/kmsg": "6,0,0,-;Linux version 6.17.2-1-pve\n6,1,0,-;Command line: " + cmdline + "\n" +
				"5,2,0,-;Unknown kernel command line parameters \"iscsi_password=kmsg-unknown-s3cr3t BOOT_IMAGE=/boot/vmlinuz-6.17.2-1-pve\", will be passed to user space.\n",
			"etc/kernel/cmdline":              "root=ZFS=rpool/ROOT/pve-1 boot=zfs rd.iscsi.password=kernel-cmdline-s3cr3t\n",
			"etc/default/grub":                "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet amd_iommu=on iommu=pt\"\nGRUB_CMDLINE_LINUX=\"iscsi_password=grub-s3cr3t\"\n",
			"etc/default/grub.d/50-iscsi.cfg": "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX rd.iscsi.password=grubd-s3cr3t\"\n",
		},
		Links: map[string]string{
			"etc/pve/local":                "nodes/n",
			"etc/pve/qemu-server":          "nodes/n/qemu-server",
			"etc/pve/lxc":                  "nodes/n/lxc",
			"etc/pve/nodes/n/lxc/130.conf": "../../../priv/token.cfg",
		},
	}
	return m, secrets, redactedCmdline
}

// gunzip is an archive's tar stream: every header and every member's bytes.
func gunzip(t *testing.T, archive []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// No secret planted anywhere in a Proxmox node gets into its snapshot, not even into the
// summary; what gpusplit reads is there, byte for byte.
func TestSnapshotHoldsNoSecret(t *testing.T) {
	m, secrets, redactedCmdline := secretRootCmdline()
	h, err := m.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	archive, sum := snap(t, h)
	raw := gunzip(t, archive)
	report, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	planted := strings.Join(slices.Collect(maps.Values(m.Files)), "") + processText(m)
	for _, s := range secrets {
		if !strings.Contains(planted, s) {
			t.Fatalf("%s is planted nowhere: the test is broken", s)
		}
		if bytes.Contains(raw, []byte(s)) {
			t.Errorf("the archive holds %s", s)
		}
		if bytes.Contains(report, []byte(s)) {
			t.Errorf("the summary names %s", s)
		}
	}
	got := members(t, archive)
	wantVM := "args: -object secret,id=sec0,data=<redacted> -spice port=5900,password=<redacted>" +
		" -drive file=/dev/zvol/x,key-secret=<redacted> -smbios type=11,value=<redacted>" +
		" -drive file=<redacted> -fw_cfg name=opt/ign,string=<redacted>" +
		" -fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=2097152 -fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=<redacted>" +
		" -append \"quiet password=<redacted>\" -object secret,id=sec1,data=<redacted>,format=raw" +
		" -device pxb-pcie,id=gpusplit-pxb0,bus_nr=128,numa_node=0,bus=pcie.0,addr=0x2\n" +
		"bios: ovmf\n" +
		"cores: 8\n" +
		"cpu: x86-64-v2-AES,flags=+pdpe1gb,phys-bits=42\n" +
		"hookscript: local:snippets/gpusplit.sh\n" +
		"hotplug: disk,network,usb,memory\n" +
		"hostpci0: mapping=gpus,pcie=1\n" +
		"machine: q35\n" +
		"memory: 65536\n" +
		"numa: 1\n" +
		"numa0: cpus=0-7,hostnodes=0,memory=65536,policy=bind\n" +
		"ostype: l26\n" +
		"sockets: 1\n" +
		"\n" +
		"[before-upgrade]\n" +
		"args: -object secret,id=s,data=<redacted>\n" +
		"hostpci0: mapping=gpus\n" +
		"\n" +
		"[PENDING]\n" +
		"args: -object secret,id=p,data=<redacted>\n" +
		"\n" +
		"[special:cloudinit]\n"
	wantCT := "arch: amd64\n" +
		"cores: 4\n" +
		"dev0: /dev/nvidia0,gid=44,mode=0666\n" +
		"memory: 8192\n" +
		"lxc.cgroup2.devices.allow: c 195:* rwm\n" +
		"lxc.mount.entry: /dev/nvidia-caps dev/nvidia-caps none bind,optional,create=dir\n"
	for p, want := range map[string]string{
		"etc/pve/nodes/n/qemu-server/131.conf": wantVM,
		"etc/pve/nodes/n/lxc/129.conf":         wantCT,
		"etc/pve/mapping/pci.cfg":              m.Files["etc/pve/mapping/pci.cfg"],
		"etc/gpusplit/split.toml":              m.Files["etc/gpusplit/split.toml"],
		"etc/pve/qemu-server":                  "-> nodes/n/qemu-server",
		"proc/70/cmdline":                      "postgres\x00",
		"proc/72/cmdline":                      "python3\x00",
		"proc/71/comm":                         "worker\n",
		"proc/cmdline":                         redactedCmdline + "\n",
		"dev/kmsg": "6,0,0,-;Linux version 6.17.2-1-pve\n6,1,0,-;Command line: " + redactedCmdline + "\n" +
			"5,2,0,-;Unknown kernel command line parameters \"iscsi_password=<redacted> BOOT_IMAGE=/boot/vmlinuz-6.17.2-1-pve\", will be passed to user space.\n",
		"etc/kernel/cmdline":              "root=ZFS=rpool/ROOT/pve-1 boot=zfs rd.iscsi.password=<redacted>\n",
		"etc/default/grub":                "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet amd_iommu=on iommu=pt\"\nGRUB_CMDLINE_LINUX=\"iscsi_password=<redacted>\"\n",
		"etc/default/grub.d/50-iscsi.cfg": "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX rd.iscsi.password=<redacted>\"\n",
	} {
		if got[p] != want {
			t.Errorf("%s is\n%q\nwant\n%q", p, got[p], want)
		}
	}
	for _, p := range []string{"proc/71/cmdline", "etc/gpusplit/credentials.toml", "etc/gpusplit/old", "etc/pve/mapping/dir.cfg", "etc/pve/nodes/n/lxc/130.conf", "etc/pve/user.cfg"} {
		if _, ok := got[p]; ok {
			t.Errorf("the snapshot holds %s", p)
		}
	}

	// The summary says what went, file by file, with the keys and their numbers.
	byFile := map[string]Redaction{}
	for _, r := range sum.Redacted {
		byFile[r.File] = r
	}
	for file, want := range map[string]Redaction{
		"/etc/pve/nodes/n/qemu-server/131.conf": {
			Replaced: map[string]int{"args": 11},
			LeftOut: map[string]int{"description": 4, "cipassword": 4, "ciuser": 1, "net0": 1, "sshkeys": 1,
				"tags": 1, "(not a key)": 1, "snaptime": 1, "delete": 1},
		},
		"/etc/pve/nodes/n/lxc/129.conf": {
			Replaced: map[string]int{},
			LeftOut:  map[string]int{"description": 1, "hostname": 1, "lxc.environment": 2, "lxc.hook.pre-start": 1, "lxc.mount.entry": 1},
		},
		"/proc/70/cmdline": {Replaced: map[string]int{"argv[0]": 1}, LeftOut: map[string]int{}},
		"/proc/71/cmdline": {Replaced: map[string]int{}, LeftOut: map[string]int{"argv[0]": 1}},
		"/proc/72/cmdline": {Replaced: map[string]int{"argv[0]": 1}, LeftOut: map[string]int{"arguments": 2}},
		"/proc/cmdline": {Replaced: map[string]int{"root": 1, "iscsi_target_password": 1, "rd.iscsi.in.password": 1, "rd.luks.key": 1,
			"netroot": 1, "systemd.set_credential": 1, "password": 1}, LeftOut: map[string]int{}},
		"/dev/kmsg": {Replaced: map[string]int{"root": 1, "iscsi_target_password": 1, "rd.iscsi.in.password": 1, "rd.luks.key": 1,
			"netroot": 1, "systemd.set_credential": 1, "password": 1, "iscsi_password": 1}, LeftOut: map[string]int{}},
		"/etc/kernel/cmdline":              {Replaced: map[string]int{"rd.iscsi.password": 1}, LeftOut: map[string]int{}},
		"/etc/default/grub":                {Replaced: map[string]int{"iscsi_password": 1}, LeftOut: map[string]int{}},
		"/etc/default/grub.d/50-iscsi.cfg": {Replaced: map[string]int{"rd.iscsi.password": 1}, LeftOut: map[string]int{}},
	} {
		r := byFile[file]
		if !maps.Equal(r.Replaced, want.Replaced) || !maps.Equal(r.LeftOut, want.LeftOut) {
			t.Errorf("%s: replaced %v, left out %v; want %v, %v", file, r.Replaced, r.LeftOut, want.Replaced, want.LeftOut)
		}
	}
	if want := []string{"/etc/gpusplit/credentials.toml", "/etc/gpusplit/old", "/etc/pve/mapping/dir.cfg"}; !slices.Equal(sum.FilesLeftOut, want) {
		t.Errorf("files left out %v, want %v", sum.FilesLeftOut, want)
	}
}

func processText(m fakehost.Machine) string {
	var b strings.Builder
	for _, p := range m.Processes {
		b.WriteString(strings.Join(p.Cmdline, " "))
	}
	return b.String()
}

func TestRedactArgs(t *testing.T) {
	for _, c := range []struct {
		in, want string
		n        int
	}{
		{"args: -cpu host,kvm=off", "args: -cpu host,kvm=off", 0},
		{"args: -object secret,id=s0,data=AbC= -drive file=x,password-secret=s0", "args: -object secret,id=s0,data=<redacted> -drive file=x,password-secret=<redacted>", 2},
		// ",," is a comma inside a value: all of it is the secret.
		{"args: -object secret,id=s,data=a,,b,,c,format=raw", "args: -object secret,id=s,data=<redacted>,format=raw", 1},
		{"args:  -vnc :1,password=on\t-k de", "args:  -vnc :1,password=<redacted>\t-k de", 1},
		{"args: -append 'console=ttyS0 passwd=x'", "args: -append 'console=ttyS0 passwd=<redacted>'", 1},
		{"args: -drive file=https://u:p@host/disk.img,if=none", "args: -drive file=<redacted>,if=none", 1},
		{"args: -drive file=https://host/disk.img,if=none", "args: -drive file=https://host/disk.img,if=none", 0},
		{"args: -object tls-creds-x509,id=t,dir=/etc/pki,endpoint=client", "args: -object tls-creds-x509,id=t,dir=/etc/pki,endpoint=client", 0},
		{"args: -netdev user,id=n,hostfwd=tcp::2222-:22,token=abc", "args: -netdev user,id=n,hostfwd=tcp::2222-:22,token=<redacted>", 1},
		// gpusplit's own layout goes through untouched, and a redacted line stays as it is.
		{"args: -device vfio-pci,host=0000:81:00.0,id=gpusplit-hostpci0,bus=gpusplit-rp0,addr=0x0,x-pci-vendor-id=0x10de,romfile=/usr/share/kvm/a.rom",
			"args: -device vfio-pci,host=0000:81:00.0,id=gpusplit-hostpci0,bus=gpusplit-rp0,addr=0x0,x-pci-vendor-id=0x10de,romfile=/usr/share/kvm/a.rom", 0},
		{"args: -object secret,id=s0,data=<redacted>", "args: -object secret,id=s0,data=<redacted>", 0},
	} {
		got, n := redactArgs(c.in)
		if got != c.want || n != c.n {
			t.Errorf("redactArgs(%q) = %q, %d; want %q, %d", c.in, got, n, c.want, c.n)
		}
	}
}

func TestProgramName(t *testing.T) {
	for in, want := range map[string]string{
		"/usr/bin/python3":                         "python3",
		"python3":                                  "python3",
		"postgres: app password=x [local] idle":    "postgres",
		"/usr/lib/postgresql/16/bin/postgres: x y": "postgres",
		"sshd: root@pts/0":                         "sshd",
		"nginx: worker process":                    "nginx",
		"/usr/bin/nvidia-persistenced":             "nvidia-persistenced",
		"VLLM::Worker_TP0":                         "VLLM",
		"(sd-pam)":                                 "",
		"/":                                        "",
		"..":                                       "",
		"":                                         "",
		"g++-13":                                   "g++-13",
	} {
		if got := programName(in); got != want {
			t.Errorf("programName(%q) = %q, want %q", in, got, want)
		}
	}
}

// Reducing a reduced config changes nothing: a snapshot of a snapshot is the same.
func TestReduceGuestTwice(t *testing.T) {
	m, _ := secretRoot()
	for _, p := range []string{"etc/pve/nodes/n/qemu-server/131.conf", "etc/pve/nodes/n/lxc/129.conf"} {
		once, _ := reduceGuest(p, []byte(m.Files[p]))
		twice, r := reduceGuest(p, once)
		if !bytes.Equal(once, twice) || len(r.LeftOut) != 0 {
			t.Errorf("%s: reduced again it changes (left out %v):\n%s\n---\n%s", p, r.LeftOut, once, twice)
		}
	}
	// CRLF lines and a last line without a newline keep their ends.
	got, _ := reduceGuest("x", []byte("cores: 2\r\nname: a\r\nmemory: 512"))
	if string(got) != "cores: 2\r\nmemory: 512" {
		t.Errorf("got %q", got)
	}
}
