package main

import (
	"slices"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/bootcfg"
	"github.com/gpusplit/gpusplit/internal/cli"
	"github.com/gpusplit/gpusplit/internal/health"
	"github.com/gpusplit/gpusplit/internal/hook"
	"github.com/gpusplit/gpusplit/internal/metrics"
	"github.com/gpusplit/gpusplit/internal/persist"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/vmlayout"
)

// This file holds the files each command reads and writes, for the FILES section of its
// man page. A test makes sure every command has its entry.

// File is a file, or a set of files, that a command reads or writes, as the host sees it
// (under --root when one is given).
type File struct {
	Path string // a path; * stands for any name
	Use  string // what the command does with it, a sentence
}

// Files returns the files of the command cmd. A command that only groups others has the
// files of its subcommands. The man page generator (internal/cmd/manpages) is its user,
// with what it calls (OwnFiles, holderFiles, scanFiles, concatFiles, commandFiles).
func Files(cmd *cobra.Command) []File {
	if fs, ok := OwnFiles(cmd); ok {
		return fs
	}
	var out []File
	for _, c := range cmd.Commands() {
		for _, f := range Files(c) {
			if !slices.ContainsFunc(out, func(o File) bool { return o.Path == f.Path }) {
				out = append(out, f)
			}
		}
	}
	return out
}

// OwnFiles returns the files the command itself declares; a command that only groups
// others declares none.
func OwnFiles(cmd *cobra.Command) ([]File, bool) {
	fs, ok := commandFiles()[cmd.CommandPath()]
	return fs, ok
}

// The files several commands share. Paths come from the packages that use them, so a
// path changed there changes here.
var (
	filePCIDevices = File{"/sys/bus/pci/devices/*", "Reads each PCI device: vendor, device and class, driver and driver_override, IOMMU group, NUMA node and local CPUs, PCIe link, BARs, config space (past its first 64 bytes only as root) and the device's parents up to the host bridge."}
	fileIOMMU      = File{"/sys/kernel/iommu_groups/*", "Reads the IOMMU groups, their members and their type."}
	fileNUMA       = File{"/sys/devices/system/node/node*", "Reads the NUMA nodes and their CPUs."}
	filePCIIDs     = File{"/usr/share/misc/pci.ids, /usr/share/hwdata/pci.ids", "Reads the names of devices; a copy built into gpusplit knows those they lack."}
	fileNvidiaProc = File{"/proc/driver/nvidia/gpus/*/information", "Reads the nvidia driver's minor number of each GPU (/dev/nvidiaN)."}
	fileRDMA       = File{"/sys/bus/pci/devices/*/infiniband", "Reads which devices are RDMA NICs, listed beside the GPUs."}
	fileDrivers    = File{"/sys/bus/pci/drivers/*, /lib/modules/*/modules.dep, /lib/modules/*/modules.builtin, /proc/sys/kernel/osrelease", "Reads which drivers are loaded, and which modules the running kernel can load, to check each driver the split names."}
	fileDesired    = File{plan.DefaultConfig, "Reads the desired state when no --vfio is given (--config names another file)."}

	fileProcesses = File{"/proc/*/fd, /proc/*/cgroup, /proc/*/comm, /proc/*/cmdline", "Reads which processes hold the devices' nodes open (/dev/nvidia*, /dev/vfio/*, /dev/dri/*, /dev/snd/*), and the Proxmox container or VM each belongs to; other users' processes only as root."}
	fileStorage   = File{"/sys/block/*, /proc/self/mountinfo, /proc/swaps, /run/udev/data/b*, /proc/spl/kstat/zfs/*, /sys/module/zfs", "Reads the file systems, swap, LVM, md, dm-crypt and ZFS pools on the devices' disks."}
	fileNet       = File{"/sys/class/net/*", "Reads the devices' network interfaces and whether they are up."}
	fileRunning   = File{"/run/qemu-server/*.pid, /run/qemu-server/pci-id-reservations, /sys/fs/cgroup/lxc/*", "Reads which Proxmox VMs and containers are running, and which devices each VM took when it started."}
	fileGuests    = File{"/etc/pve/nodes/*/qemu-server/*.conf, /etc/pve/nodes/*/lxc/*.conf", "Reads the guests' configs: the hostpciN, devN and lxc.mount.entry lines that give them devices (through /etc/pve/qemu-server, /etc/pve/lxc and /etc/pve/local for this node)."}
	fileMappings  = File{pve.MappingPath, "Reads Proxmox's PCI mappings, which a VM's hostpciN can name."}

	fileSysfsWrites = File{"/sys/bus/pci/devices/*/driver_override, /sys/bus/pci/drivers/*/unbind, /sys/bus/pci/drivers_probe", "Writes, to move each device to its driver by PCI address; then reads its driver link, and /dev/vfio/<group> for vfio-pci, to verify it."}
	fileLock        = File{bind.LockPath, "Locked while drivers change, so that two runs never interleave."}
	fileIdentity    = File{"/proc/sys/kernel/hostname, /etc/machine-id, /proc/sys/kernel/random/boot_id", "Reads which host and which boot the journal is of."}

	fileBackups  = File{pve.BackupDir + "/*", "Writes the previous version of each Proxmox file it replaces."}
	filePVELocks = File{"/etc/pve/priv/lock/file-mapping_pci_cfg, /var/lock/qemu-server/lock-*.conf, /run/lock/lxc/pve-config-*.lock", "Locked, as Proxmox's own tools lock them, while the files are checked and replaced."}
	fileNodeName = File{"/etc/hostname, /proc/sys/kernel/hostname", "Reads this node's name, as Proxmox knows it."}

	fileCmdline = File{"/proc/cmdline", "Reads the parameters the running kernel was booted with."}
	fileKmsg    = File{"/dev/kmsg", "Reads the kernel log on the live host (--kernel-log names a file instead; a snapshot has its own)."}

	filePersist   = File{persist.UdevRule + ", " + persist.Modprobe + ", " + persist.PinScript + ", " + persist.Unit, "The udev rule, modprobe.d hook, its script and the systemd unit that make the split last across reboots."}
	fileInitramfs = File{"/etc/initramfs-tools/modules", "Reads whether nvidia or vfio-pci load from the initramfs, which must then be rebuilt."}
)

// holderFiles are what is looked at to tell whether something uses a device.
func holderFiles() []File {
	return []File{fileProcesses, fileStorage, fileNet, fileRunning, fileGuests, fileMappings}
}

// scanFiles are what every command that finds the GPUs reads.
func scanFiles() []File {
	return []File{filePCIDevices, fileIOMMU, fileNUMA, filePCIIDs, fileNvidiaProc}
}

func concatFiles(groups ...[]File) []File { return slices.Concat(groups...) }

// commandFiles maps each command's path to its files. A function, not a variable, so
// that it sees persist.DefaultBinary as the build set it.
func commandFiles() map[string][]File {
	journal := func(use string) File { return File{bind.JournalPath, use} }
	binary := File{persist.DefaultBinary, "Checked as the binary the unit runs (--binary names another): a regular executable file that only root can change, in directories only root can change."}
	pveWrites := []File{
		{pve.MappingPath, "Reads Proxmox's PCI mappings; once confirmed writes the mappings of the split."},
		{"/etc/pve/nodes/*/qemu-server/*.conf, /etc/pve/nodes/*/lxc/*.conf", "Reads this node's guest configs; once confirmed writes the device entries and NUMA settings of the guests that use the GPUs."},
		fileBackups, filePVELocks, fileNodeName,
	}
	files := map[string][]File{
		"gpusplit inventory": concatFiles(scanFiles(), holderFiles()),
		"gpusplit topo":      concatFiles(scanFiles(), []File{fileRDMA}),
		"gpusplit plan":      concatFiles(scanFiles(), []File{fileDesired, fileDrivers}, holderFiles()),
		"gpusplit apply": concatFiles(scanFiles(), []File{
			fileDesired, fileDrivers, fileLock,
			journal("Written, with the prior driver of every device to move, before the first change; gpusplit rollback reads it."),
			fileIdentity, fileSysfsWrites,
		}, holderFiles(), []File{
			{pve.MappingPath + ", /etc/pve/nodes/*/qemu-server/*.conf, /etc/pve/nodes/*/lxc/*.conf", "On a Proxmox node, unless the desired state says sync_proxmox = false: written after the GPUs moved, as gpusplit pve sync writes them."},
			fileBackups, filePVELocks,
		}),
		"gpusplit status": concatFiles(scanFiles(), []File{fileDesired, fileDrivers}),
		"gpusplit rollback": concatFiles(scanFiles(), []File{
			journal("Reads the prior drivers of the devices the last apply moved."),
			fileIdentity, fileDrivers, fileLock, fileSysfsWrites,
		}, holderFiles()),
		"gpusplit persist install": concatFiles(scanFiles(), []File{
			{plan.DefaultConfig, "Reads the desired state the files are made from (--config names another file); with --vfio, written from it."},
			{filePersist.Path, "Written, all four or none, each with its previous version put back if a later one fails; then systemctl daemon-reload, systemctl enable gpusplit.service and udevadm control --reload run."},
			binary, fileDrivers, fileInitramfs,
		}),
		"gpusplit persist remove": {
			{filePersist.Path, "Removed, after systemctl disable gpusplit.service; then systemctl daemon-reload and udevadm control --reload run."},
			{plan.DefaultConfig, "Kept: remove leaves the desired state, and the drivers bound now, as they are."},
			fileInitramfs,
		},
		"gpusplit persist show": concatFiles(scanFiles(), []File{
			{plan.DefaultConfig, "Reads the desired state the files are made from (--config names another file)."},
			{filePersist.Path, "Reads whether each is installed, and whether it differs from what install would write."},
			binary, fileDrivers,
		}),
		"gpusplit pve mappings": concatFiles(scanFiles(), []File{fileMappings, fileNodeName}),
		"gpusplit pve sync":     concatFiles(scanFiles(), []File{fileDesired, fileDrivers}, pveWrites, []File{fileRunning}),
		"gpusplit pve vm-layout": concatFiles(scanFiles(), []File{
			{"/etc/pve/nodes/*/qemu-server/ID.conf", "Reads the config of the VM --vm names; once confirmed writes its new layout."},
			fileMappings, fileBackups,
			{"/var/lock/qemu-server/lock-ID.conf", "Locked, as qemu-server locks it, while the VM's config is checked and replaced."},
			fileNodeName,
		}),
		"gpusplit hook": concatFiles(scanFiles(), []File{
			{"/etc/pve/nodes/*/qemu-server/ID.conf, /etc/pve/nodes/*/lxc/ID.conf", "Reads the guest's config: a VM's hostpci entries, a container's devN entries."},
			fileMappings,
			{vmlayout.ReservationsPath, "Reads qemu-server's reservations: which running VM holds which device."},
			{bind.LockPath, "Locked while a phase runs, as apply locks it: two guests starting at once, or a start during an apply, take turns."},
			{bind.HookJournalDir + "/vm-ID.json", "Written at a VM's pre-start: what its devices were on, for its post-stop, which gives them back and removes it. Never apply's journal."},
			{"nvidia-persistenced.service", "Asked of systemd (systemctl is-active); stopped while GPUs leave nvidia at a VM's start, and started again after."},
			{health.Dir + "/ADDRESS.json", "Written at a VM's post-stop for each GPU that came back broken (quarantined); removed by gpusplit hook release ADDRESS."},
			{hook.HandOffDir + "/ID.json", "Written at the end of each phase that has work to do: its result, duration and time, and the guest's counts since the boot, which gpusplit metrics reports."},
			fileNodeName,
		}),
		"gpusplit pve hook install": {
			{"/etc/pve/nodes/*/qemu-server/ID.conf, /etc/pve/nodes/*/lxc/ID.conf", "Reads the guest's config; once confirmed writes its hookscript line, under Proxmox's locks, with a backup."},
			{pve.StoragePath, "Reads which storage of this node holds snippets."},
			{"STORAGE/snippets/" + pve.HookSnippet + ", STORAGE/snippets/" + pve.HookSnippet + "-ID", "Written once confirmed, on this node only (snippets are per node unless the storage is shared): the snippet that runs gpusplit hook (and, for a guest that had a hookscript or a --deadline, its own, which names the guest and runs that hookscript after it); taken back if the config cannot be written."},
			{persist.DefaultBinary, "Checked as the binary the snippet runs (--binary names another): a regular executable file that only root can change, in directories only root can change."},
			{pve.MembersPath + ", " + pve.HAResourcesPath + ", " + pve.HARulesPath + ", " + pve.ReplicationPath, "Reads the other nodes where the guest may start, which need the snippet too."},
			filePVELocks, fileBackups, fileNodeName,
		},
		"gpusplit pve hook remove": {
			{"/etc/pve/nodes/*/qemu-server/ID.conf, /etc/pve/nodes/*/lxc/ID.conf", "Reads the guest's config; once confirmed takes gpusplit's hookscript away, putting back the one it chained."},
			{pve.StoragePath, "Reads where the snippets are."},
			{"STORAGE/snippets/" + pve.HookSnippet + ", STORAGE/snippets/" + pve.HookSnippet + "-ID", "Removed, once confirmed, when no guest config on any node, snapshots included, names it (a clone's names its original's); kept otherwise."},
			{"/etc/pve/nodes/*/qemu-server/*.conf, /etc/pve/nodes/*/lxc/*.conf", "Reads every node's guest configs: which still name the snippet."},
			filePVELocks, fileBackups, fileNodeName,
		},
		"gpusplit pve hook show": {
			{"/etc/pve/nodes/*/qemu-server/ID.conf, /etc/pve/nodes/*/lxc/ID.conf", "Reads the guest's hookscript line."},
			{pve.StoragePath + ", STORAGE/snippets/*", "Reads whether the hookscript is gpusplit's snippet, the guest it was made for, the binary it runs (checked), and what it chains."},
			{pve.MembersPath + ", " + pve.HAResourcesPath + ", " + pve.HARulesPath + ", " + pve.ReplicationPath, "Reads the other nodes where the guest may start, which need the snippet too."},
		},
		"gpusplit pve p2p-clique": concatFiles(scanFiles(), []File{
			{"/etc/pve/nodes/*/qemu-server/ID.conf", "Reads the config of the VM --vm names; once confirmed writes its args with the clique."},
			fileMappings, fileBackups,
			{"/var/lock/qemu-server/lock-ID.conf", "Locked, as qemu-server locks it, while the VM's config is checked and replaced."},
			{"/dev/kmsg", "Read, for the host's evidence on peer-to-peer (IOMMU faults, SEV-SNP)."},
			{"FILE of --p2p", "Read: a gpusplit p2p result saved on this host."},
			fileNodeName,
		}),
		"gpusplit pve cluster": {
			{pve.MembersPath, "Reads the cluster's nodes, as pmxcfs lists them, and which node this is."},
			{pve.MappingPath, "Reads every PCI mapping, with the entries of every node."},
			{pve.NodesDir + "/*/qemu-server/*.conf, " + pve.NodesDir + "/*/lxc/*.conf", "Reads every node's guest configs: the hostpciN entries that name a mapping, a container's /dev/nvidia* entries and cgroup lines, and template."},
			{pve.HAResourcesPath + ", " + pve.HARulesPath + ", " + pve.HAGroupsPath, "Reads the HA resources, their node-affinity rules or HA groups, and the negative resource-affinity rules."},
			{pve.ReplicationPath, "Reads the replication jobs, whose targets are nodes a guest is kept ready to move to."},
			{fileNodeName.Path, "Reads this node's name where " + pve.MembersPath + " is missing."},
		},
		"gpusplit pve backups": {
			{pve.BackupDir + "/*, " + pve.BackupDir + "/*.json", "Reads the backups and, beside each, which file it is of, when it was replaced and by which command."},
		},
		"gpusplit pve backups restore": {
			{pve.BackupDir + "/ID", "Reads the backup to put back; the version it replaces is backed up beside it first."},
			{pve.MappingPath + ", /etc/pve/nodes/*/qemu-server/*.conf, /etc/pve/nodes/*/lxc/*.conf", "Written: the one file the backup is of, checked and replaced as gpusplit pve sync replaces it."},
			filePVELocks,
		},
		"gpusplit demo reset": {
			{"$XDG_CACHE_HOME/gpusplit/demo (~/.cache/gpusplit/demo)", "Written: the demo's scratch copy of the sample host, thrown away and made afresh; nothing else is read or written."},
		},
		"gpusplit demo path": {
			{"$XDG_CACHE_HOME/gpusplit/demo (~/.cache/gpusplit/demo)", "Reads whether the demo's scratch copy exists, and that it is the user's own private directory."},
		},
		"gpusplit pve backups prune": {
			{pve.BackupDir + "/*", "Removes the oldest backups of each file beyond the last --keep."},
		},
		"gpusplit doctor": concatFiles(scanFiles(), []File{
			fileCmdline,
			{bootcfg.GrubFile + ", " + bootcfg.GrubDropIn + "/*.cfg, " + bootcfg.KernelCmdlineFile, "Reads the kernel command line the boot loader will pass (GRUB, or systemd-boot through proxmox-boot-tool)."},
			fileKmsg,
			{"/sys/module/nvidia/version, /proc/driver/nvidia/version, /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "Reads the versions of the nvidia driver and of its user-space library."},
			{"/sys/module/kvm_amd/parameters/sev_snp, /proc/cpuinfo, /sys/class/dmi/id/*", "Reads the CPU and platform features that change how the IOMMU and passthrough behave."},
			fileDesired,
		}, holderFiles()),
		"gpusplit nccl-topo": concatFiles(scanFiles(), []File{
			fileRDMA, fileCmdline, fileKmsg,
			{"/etc/pve/nodes/*/qemu-server/ID.conf", "With --vm: reads the VM's hostpciN entries, and the mappings they name."},
			{"FILE of --manifest, FILE of --check", "Reads the manifest written on the host with --vm, or a topology file to check."},
			{"FILE of --file", "Written with the topology (or the manifest); standard output without --file."},
		}),
		"gpusplit snapshot": {
			{"/sys, /proc, /etc/default/grub*, /etc/kernel/cmdline, /etc/modprobe.d, /etc/gpusplit/split.toml, /etc/pve/mapping/pci.cfg, /etc/pve/nodes/*/qemu-server/*.conf, /etc/pve/nodes/*/lxc/*.conf, /dev/kmsg", "Reads what gpusplit reads of them, and nothing else: the PCI parts of sysfs, the processes holding GPUs, the kernel log, the boot configuration, the desired state, and of the guest configs only the keys gpusplit reads, with secrets redacted."},
			{"gpusplit-HOST-DATE.tar.gz", "Written: the archive, in the current directory unless the command line names another file (- for standard output)."},
		},
		"gpusplit fit": concatFiles(scanFiles(), []File{
			{"DIR of --model: config.json, hf_quant_config.json, model.safetensors.index.json, *.safetensors", "Reads the model's config and index, and of each safetensors shard its header alone (the 8-byte length and the JSON it announces, at most 100 MB); never a tensor. Only regular files inside DIR: a relative link that stays inside is followed, a link out of it (or an absolute one) is refused."},
			{plan.DefaultConfig, "With --ct or --vm: reads the desired state, for the GPUs the guest keeps after the split (--config names another file)."},
			{"/etc/pve/nodes/*/lxc/ID.conf, /etc/pve/nodes/*/qemu-server/ID.conf", "With --ct or --vm: reads the guest's config, for the GPUs it has now."},
			fileMappings, fileNodeName, fileKmsg,
		}),
		"gpusplit p2p": concatFiles(scanFiles(), []File{
			{"/dev/nvidia*, libcuda.so.1", "Opened through the CUDA driver, to copy between the GPUs."},
			{cli.CUDABinary, "The CUDA build that the static gpusplit hands p2p over to, beside it or on the PATH."},
			{"FILE of --save", "Written: the result as -o json gives it, replaced atomically."},
		}),
	}
	// metrics counts what the doctor finds, and reads what status and the hooks leave.
	files["gpusplit metrics"] = concatFiles(files["gpusplit doctor"], []File{
		fileDrivers,
		{"/sys/bus/pci/devices/*/aer_dev_correctable, aer_dev_nonfatal, aer_dev_fatal", "Reads the AER error counters of the GPUs and of the ports above them."},
		{health.Dir + "/*.json", "Reads the quarantined devices; only root may (left out and counted otherwise)."},
		{hook.HandOffDir + "/*.json", "Reads each guest's last hand-off through the hookscript; only root may (left out and counted otherwise)."},
		{"DIR/" + metrics.TextfileName, "Written with --textfile DIR, replaced atomically, for node_exporter's textfile collector; standard output without it."},
	})
	return files
}
