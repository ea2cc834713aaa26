package cli

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/atomicfile"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/snapshot"
)

// snapshotFiles are the configuration files a snapshot keeps, by the names their
// packages give them.
var snapshotFiles = snapshot.Files{
	SplitConfig: plan.DefaultConfig,
	Mapping:     pve.MappingPath,
	Members:     pve.MembersPath,
	Storage:     pve.StoragePath,
	Whole:       []string{pve.HAResourcesPath, pve.HARulesPath, pve.HAGroupsPath, pve.ReplicationPath},
}

func newSnapshot(g *globals) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "snapshot [FILE]",
		Short: "Capture what gpusplit reads into a .tar.gz that --root reads back",
		Long: `Capture what gpusplit reads from this host into a snapshot archive: the PCI parts of
sysfs with their links, IOMMU groups, NUMA nodes, the nvidia driver's /proc files, the
processes holding GPUs (name, cgroup, program name; never their arguments), the kernel
log, /proc/cmdline, the boot configuration (/etc/default/grub*, /etc/kernel/cmdline,
/etc/modprobe.d), /etc/gpusplit/split.toml and the Proxmox files gpusplit uses
(/etc/pve/mapping/pci.cfg, the VM and container configs). Nothing else: never
/etc/pve/priv, never keys. Of a VM or container config only the keys gpusplit reads are
kept (hostpciN, devN, numa, numaN, machine, cores, sockets, memory, arch, ostype, bios,
hookscript, lock, lxc.cgroup2.devices.allow, the lxc.mount.entry lines of device nodes,
and args with every secret, password, key, token, data= and string= value replaced by
<redacted>), in every section; description, cipassword, sshkeys, lxc.environment, disks
and networks stay out. The kernel command line, in /proc/cmdline, the kernel log,
/etc/kernel/cmdline and the GRUB files alike, keeps every parameter, but the values of
those that carry secrets become <redacted>: dracut's iSCSI and CIFS credentials
(rd.iscsi.password, iscsi_in_password, cifspass, ...), rd.luks.key, systemd.set_credential,
dm-mod.create, any name with pass, key, token, secret or cred in it, and the user and
password of a URL (root=cifs://<redacted>@server/share). The archive is readable by its
owner only (0600), whatever the umask.

Every command then runs on it with --root FILE, which makes a snapshot the thing to
attach to a bug report. Run it as root, so that config space, the kernel log and every
process can be read.

FILE (or --file FILE) names the archive, - for standard output; the default is
gpusplit-<hostname>-<date>.tar.gz in the current directory. Whether it can be written is
checked before anything is captured. A summary of what was captured, and of what was left
out of which file (keys and counts, never the values), goes to standard error; with
-o json it goes to standard output as one JSON document instead, which needs the archive
in a file.`,
		Example: `  sudo gpusplit snapshot
  sudo gpusplit snapshot /tmp/kpro6.tar.gz
  sudo gpusplit snapshot --file kpro6.tar.gz -o json | jq .redacted
  gpusplit --demo snapshot demo.tar.gz && gpusplit --root demo.tar.gz topo`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if file != "" && file != args[0] {
					return fmt.Errorf("the archive is named twice, %s and --file %s: name it once", args[0], file)
				}
				file = args[0]
			}
			if file == "-" && g.json() {
				return errors.New("the archive (-) and the JSON summary (-o json) would both go to standard output: name a file for the archive, or leave out -o json to have the summary on standard error")
			}
			h, err := g.host()
			if err != nil {
				return err
			}
			if file == "" {
				name, _ := h.ReadString("/proc/sys/kernel/hostname")
				if name == "" {
					name = "host"
				}
				file = fmt.Sprintf("gpusplit-%s-%s.tar.gz", filepath.Base(name), time.Now().Format("20060102-150405"))
			}
			// Before anything is captured: a file that cannot be written is said to be now,
			// by its name, not after the capture by its temporary file's.
			if file != "-" {
				if err := checkWritable(file); err != nil {
					return err
				}
			}
			var buf bytes.Buffer
			sum, err := snapshot.Capture(h, &buf, snapshotFiles)
			if err != nil {
				return err
			}
			if file == "-" {
				if _, err := g.stdout.Write(buf.Bytes()); err != nil {
					return err
				}
			} else if err := atomicfile.Write(file, buf.Bytes(), archiveMode); err != nil {
				return archiveWriteError(file, err)
			}
			rep := snapshot.NewReport(file, sum)
			var werr error
			if g.json() {
				werr = g.writeJSON(rep)
			} else {
				rep.WriteText(g.stderr)
			}
			rep.WriteWarnings(g.stderr)
			return werr
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "the archive to write, - for standard output (default gpusplit-<hostname>-<date>.tar.gz)")
	return cmd
}

// archiveMode is the snapshot's: it holds the kernel log, which dmesg_restrict keeps from
// other users, and the guests' configs, so it is its owner's alone, whatever the umask.
// atomicfile.Write's temporary file has it from the start, and an archive it replaces
// goes with its mode.
const archiveMode = 0o600

// checkWritable says, before the capture, whether the snapshot can be written as
// --file: atomicfile.CheckWritable's obstacle, and the way past it.
func checkWritable(file string) error {
	if err := atomicfile.CheckWritable(file); err != nil {
		var we *atomicfile.WriteError
		if errors.As(err, &we) {
			return archiveAdvice(file, we)
		}
		return err
	}
	return nil
}

// archiveWriteError explains why the snapshot file cannot be written, naming the file and
// what is in the way, not the temporary file the error came from.
func archiveWriteError(file string, err error) error {
	return archiveAdvice(file, atomicfile.Explain(file, err))
}

// archiveAdvice adds to a WriteError the way past it, with --file.
func archiveAdvice(file string, we *atomicfile.WriteError) error {
	remedy := map[atomicfile.Obstacle]string{
		atomicfile.IsDir:        "name a file in it, e.g. --file " + filepath.Join(file, "snapshot.tar.gz"),
		atomicfile.StickyOwner:  "remove it as its owner, or choose another --file",
		atomicfile.NoPermission: "run as root or choose --file in a directory you can write",
		atomicfile.ReadOnly:     "choose --file on a writable file system",
		atomicfile.NoDir:        "create it, or choose --file in a directory that exists",
		atomicfile.NotDir:       "choose --file in a directory",
		atomicfile.Full:         "free some room, or choose --file on another file system",
	}[we.Obstacle]
	if remedy == "" {
		return we
	}
	return fmt.Errorf("%w; %s", we, remedy)
}
