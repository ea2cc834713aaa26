package persist

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// Boot is what install writes for a desired state, and the binary its unit runs.
type Boot struct {
	Files []File
	// Config is the desired state file the unit applies, by its absolute path.
	Config string
	Binary Binary
	// Checked says the binary was looked at: a snapshot holds no binaries.
	Checked bool
	// Refused is why install would not let the unit run the binary.
	Refused error
}

// BootOptions say what the unit runs.
type BootOptions struct {
	// Config is the desired state file as the user named it; "" for plan.DefaultConfig.
	Config string
	// Binary is the gpusplit the unit runs, as the host sees it; "" for DefaultBinary.
	Binary string
	// SyncProxmox: the desired state's sync_proxmox.
	SyncProxmox bool
	// Word gives a refused binary the caller's way out (the command line's flag), so
	// that what shows the binary says it as the error does; nil leaves it as it is.
	Word func(error) error
}

// ErrNothingToPin is returned for a desired state that pins no device to a driver.
var ErrNothingToPin = errors.New("the desired state pins no device to a driver: nothing to persist")

// PlanBoot works out the boot-time files that keep p's drivers across reboots, on the
// devices of tree, and checks the binary the unit runs (CheckBinary).
func PlanBoot(h *host.Host, p *plan.Plan, tree *pci.Tree, o BootOptions) (*Boot, error) {
	ids := map[pci.Address][2]uint16{}
	for _, d := range tree.Devices {
		ids[d.Address] = [2]uint16{d.VendorID, d.DeviceID}
	}
	pins := Pins(p, ids)
	if len(pins) == 0 {
		return nil, ErrNothingToPin
	}
	b := &Boot{Config: plan.DefaultConfig}
	if o.Config != "" {
		// The unit names the file by its absolute path.
		var err error
		if b.Config, err = filepath.Abs(o.Config); err != nil {
			return nil, err
		}
	}
	// The unit runs the installed gpusplit, never this executable by default: a copy in
	// a download or build directory is gone, or someone else's, by the next boot.
	named := o.Binary != ""
	path := o.Binary
	if !named {
		path = DefaultBinary
	}
	var err error
	b.Binary, err = CheckBinary(h, path, named)
	switch {
	case errors.Is(err, host.ErrReadOnly):
	case err != nil:
		b.Checked = true
		if exe, e := os.Executable(); e == nil && !named && h.Root() == "/" && exe != path {
			err = fmt.Errorf("%w (this gpusplit runs from %s; the unit does not run it from there)", err, exe)
		}
		if o.Word != nil {
			err = o.Word(err)
		}
		b.Refused = err
	default:
		b.Checked = true
	}
	b.Files, err = Files(pins, Options{Binary: path, Config: b.Config, SyncProxmox: o.SyncProxmox})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// BinaryReport is the binary a unit (or a hookscript snippet) runs and what the check
// found of it (docs/json.md).
type BinaryReport struct {
	Path     string   `json:"path"`
	Resolved string   `json:"resolved"`
	Checked  bool     `json:"checked"` // false on a snapshot, which holds no binaries
	OK       bool     `json:"ok"`
	Problems []string `json:"problems"`
	Notes    []string `json:"notes"`
}

// Report is the binary the unit runs and what install's check found of it.
func (b *Boot) Report() BinaryReport { return NewBinaryReport(b.Binary, b.Checked, b.Refused) }

// NewBinaryReport is what a check of binary b found (CheckBinary): checked is false on a
// snapshot, which holds no binaries; refused is why the binary may not be run, nil when
// it may. A boot unit and a hookscript snippet report theirs alike.
func NewBinaryReport(b Binary, checked bool, refused error) BinaryReport {
	out := BinaryReport{Path: b.Path, Resolved: b.Resolved, Checked: checked,
		OK: checked && refused == nil, Problems: []string{}, Notes: append([]string{}, b.Notes...)}
	var be *BinaryError
	switch {
	case errors.As(refused, &be):
		out.Problems = append(out.Problems, be.Problems...)
	case refused != nil:
		out.Problems = append(out.Problems, refused.Error())
	}
	return out
}

// FileReport is a boot-time file and whether it is installed as it is.
type FileReport struct {
	Path    string `json:"path"`
	Mode    string `json:"mode"`
	State   string `json:"state"` // installed, different, absent
	Content string `json:"content"`
}

// FileStates are the files with whether each is installed as it is on h.
func FileStates(h *host.Host, files []File) []FileReport {
	out := []FileReport{}
	for _, file := range files {
		state := "absent"
		if b, err := h.ReadFile(file.Path); err == nil {
			state = "different"
			if string(b) == file.Content {
				state = "installed"
			}
		}
		out = append(out, FileReport{file.Path, fmt.Sprintf("%04o", file.Mode), state, file.Content})
	}
	return out
}

// ShowReport is persist show: the binary the unit runs, and the files.
type ShowReport struct {
	Binary BinaryReport `json:"binary"`
	Files  []FileReport `json:"files"`
}

// ChangeReport is persist install and remove: what was (or, in a dry run, would be)
// written, what stops it, what was done to each file, the system commands.
type ChangeReport struct {
	DryRun   bool          `json:"dry_run"`
	Binary   *BinaryReport `json:"binary,omitempty"`
	Files    []FileReport  `json:"files"`
	Problems []string      `json:"problems"`
	Changes  []Change      `json:"changes"`
	Commands []Command     `json:"commands"`
	Notes    []string      `json:"notes"`
}

// Command is a system command persist ran, or did not run under another root.
type Command struct {
	Command string `json:"command"`
	Ran     bool   `json:"ran"`
	Error   string `json:"error"`
}

// Run runs system commands (systemctl, udevadm) on the live host; under another root
// it runs none and says so in each Command. A command that fails is not an error: the
// files are in place, and the command can be run by hand.
func Run(h *host.Host, cmds [][]string) []Command {
	out := []Command{}
	for _, c := range cmds {
		r := Command{Command: strings.Join(c, " ")}
		if h.Root() != "/" {
			out = append(out, r)
			continue
		}
		r.Ran = true
		if b, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			r.Error = strings.TrimSpace(fmt.Sprintf("%v %s", err, b))
		}
		out = append(out, r)
	}
	return out
}

// InitramfsAdvice says to rebuild the initramfs when a GPU driver or vfio-pci is in it.
func InitramfsAdvice(h *host.Host) []string {
	b, err := h.ReadFile("/etc/initramfs-tools/modules")
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "vfio") || strings.HasPrefix(line, "nvidia") || strings.HasPrefix(line, "amdgpu") {
			return []string{fmt.Sprintf("/etc/initramfs-tools/modules loads %s early: rebuild the initramfs so it has the same hook: update-initramfs -u -k all", line)}
		}
	}
	return nil
}

// VFIOConfigMark begins a desired state file written from --vfio.
const VFIOConfigMark = "# Written by gpusplit from"

// FromVFIO says a desired state file was written from --vfio (by this release, or by
// persist install of an earlier one), so that a later --vfio may replace it; any other
// file is a person's.
func FromVFIO(content string) bool {
	return strings.HasPrefix(content, VFIOConfigMark+" --vfio ") || strings.HasPrefix(content, "# Written by gpusplit persist install --vfio ")
}

// VFIOConfig is the desired state file install writes for persist install --vfio: the
// GPUs the vfio selectors choose go to vfio-pci, the others to, or stay on, their vendor's
// driver; devices and allowShared are the file's devices and allow_shared_groups.
func VFIOConfig(devices string, vfio []string, allowShared bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s --vfio %s\n", VFIOConfigMark, strings.Join(vfio, " --vfio "))
	b.WriteString("# The GPUs of the group go to vfio-pci; the others to, or stay on, their vendor's driver.\n")
	if devices != "" {
		fmt.Fprintf(&b, "devices = %s\n", strconv.Quote(devices))
	}
	if allowShared {
		b.WriteString("allow_shared_groups = true\n")
	}
	b.WriteString("\n[[group]]\nname = \"vfio\"\nselect = [")
	for i, v := range vfio {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(v))
	}
	b.WriteString("]\ndriver = \"vfio-pci\"\n")
	return b.String()
}
