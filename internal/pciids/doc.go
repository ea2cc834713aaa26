// Package pciids reads the pci.ids database of PCI vendor, device,
// subsystem and class names (the file pciutils ships as
// /usr/share/misc/pci.ids) and looks names up in it.
//
// A [DB] answers from one file: [Open] opens a host's file, [Embedded] is a
// trimmed copy embedded in the binary. [Names] chains several databases so
// that the first one that knows an id answers; [Default] puts the host's
// own file (see [SystemPaths]) in front of the embedded copy. The host's
// file goes first because it is the one the administrator keeps up to
// date; the embedded copy fills in what an old distribution file lacks,
// such as the newest GPUs.
//
// Neither of those two is parsed whole: a run names a few dozen
// devices of a file that lists tens of thousands. [Names.Load] looks up all
// that a scan is about to ask in one pass of a parser that keeps only those
// names, and a lookup answers from what it kept. A host's file is read
// through a 64 KB buffer.
//
// # Format
//
// Lines starting with '#' are comments and blank lines are ignored.
//
//	vvvv  Vendor name
//		dddd  Device name
//			ssss ssss  Subsystem name (subvendor, subdevice)
//	C cc  Class name
//		ss  Subclass name
//			pp  Prog-if name
//
// Ids are hexadecimal (either case), indentation is by tabs only, and an
// id is followed by one or more spaces or tabs and a non-empty name.
// Parsing is lenient: a line that does not fit is skipped, and so is
// everything indented under it, so that a name is never filed under the
// wrong parent. A CR before the line end is dropped. When an id occurs
// twice under the same parent, the first name wins.
//
// # Embedded database
//
// The embedded file pci.ids beside this package is cut from the upstream
// file of the PCI ID Project (https://pci-ids.ucw.cz/, distributed with
// pciutils under GPL-2.0-or-later or BSD-3-Clause). It keeps NVIDIA
// complete with subsystems; AMD (1002 and 1022) and Intel devices without
// subsystems; ASPEED, Mellanox, Broadcom/LSI, PLX, Red Hat (QEMU and
// virtio), Samsung, Micron, Broadcom, Amazon and Microsoft complete; and
// the whole class list. Its header records the upstream version. To update
// it, fetch the current pci.ids and run, from the module root:
//
//	go run ./internal/cmd/pciids-trim -in /path/to/pci.ids -out internal/pciids/pci.ids -commit <pciids commit>
//
// The -commit flag is optional and only recorded in the header. The list of
// kept vendors is a table in internal/cmd/pciids-trim/main.go.
package pciids
