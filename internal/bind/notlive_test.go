package bind

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A copy of a host is not a running kernel: the error says which root and why, and
// leaves the way to the host itself to the caller, naming no flag.
func TestNotLiveError(t *testing.T) {
	h, dir := tempHost(t)
	os.MkdirAll(filepath.Join(dir, "sys/bus/pci/devices"), 0o755)
	_, err := Live(h)
	var nl *NotLiveError
	if !errors.As(err, &nl) || nl.Root != dir || strings.Contains(err.Error(), "--") ||
		err.Error() != dir+" is not a running kernel (its /sys is not a sysfs mount but a copy); drivers move only through the kernel's own /sys, so apply and rollback run on the host itself" {
		t.Errorf("a directory copy: %v", err)
	}
}
