package vmtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A boot that QEMU's emulation killed before the test ran is recognised (and retried by
// Run); any other failure is not, so a real bug never gets a second chance to pass.
func TestStartupPanic(t *testing.T) {
	real, err := os.ReadFile("testdata/timer-panic-vmnet-helper-34.log")
	if err != nil {
		t.Fatal(err)
	}
	remapped := "[    0.312000] ..MP-BIOS bug: 8254 timer not connected to IO-APIC\n" +
		"[    0.401000] Kernel panic - not syncing: timer doesn't work through Interrupt-remapped IO-APIC\n"
	for _, tc := range []struct {
		name, console, want string
	}{
		{"real IO-APIC timer panic", string(real), "IO-APIC + timer doesn't work!"},
		{"behind interrupt remapping", remapped, "timer doesn't work through Interrupt-remapped IO-APIC"},
		{"after the script started", "@@READY\n" + remapped, ""},
		{"another panic", "[    1.0] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\n", ""},
		{"the words without a panic", "[    0.5] ..... failed.\n[    0.6] IO-APIC + timer doesn't work!\n", ""},
		{"clean boot", "@@READY\n@@DONE\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := startupPanic(tc.console)
			if tc.want == "" {
				if got != "" {
					t.Fatalf("recognised %q as a start-up failure", got)
				}
				return
			}
			if !strings.Contains(got, tc.want) || !strings.HasPrefix(got, "[") {
				t.Fatalf("got %q, want the kernel's line with %q", got, tc.want)
			}
		})
	}
}

// The timer check that panics under a loaded TCG host is skipped in every guest.
func TestCmdlineSkipsTimerCheck(t *testing.T) {
	for _, topo := range []Topology{TwoSockets(), {Name: "plain"}} {
		if !strings.Contains(" "+topo.cmdline()+" ", " no_timer_check ") {
			t.Errorf("%s: %q lacks no_timer_check", topo.Name, topo.cmdline())
		}
	}
}

// Run boots a second time after a start-up panic and says so; it does not after any other
// failure. The QEMU here is a script that plays back the consoles of successive boots.
func TestRunRetriesStartupPanicOnce(t *testing.T) {
	panicked, err := os.ReadFile("testdata/timer-panic-vmnet-helper-34.log")
	if err != nil {
		t.Fatal(err)
	}
	clean := "@@READY\n@@BEGIN out\naGk=\n@@END out 0\n@@DONE\n"
	broken := "@@READY\n[    2.0] Oops: general protection fault\n"
	for _, tc := range []struct {
		name     string
		consoles []string
		boots    int
		ok       bool
		retried  bool
	}{
		{"panic then clean", []string{string(panicked), clean}, 2, true, true},
		{"panic twice", []string{string(panicked), string(panicked)}, 2, false, true},
		{"clean", []string{clean}, 1, true, false},
		{"a failure of the code under test", []string{broken, clean}, 1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for i, c := range tc.consoles {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("console%d", i+1)), []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			qemu := "#!/bin/sh\nd=" + dir + "\nn=$(($(cat $d/boots 2>/dev/null || echo 0) + 1))\necho $n > $d/boots\ncat $d/console$n\n"
			if err := os.WriteFile(filepath.Join(dir, "qemu-system-x86_64"), []byte(qemu), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
			for _, f := range []string{"busybox", "gpusplit", "vmlinuz"} {
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			vm := &VM{
				Kernel:  &Kernel{Image: filepath.Join(dir, "vmlinuz"), Modules: t.TempDir()},
				Busybox: filepath.Join(dir, "busybox"), Binary: filepath.Join(dir, "gpusplit"),
				Timeout: time.Minute,
			}
			res, err := vm.Run(context.Background(), Topology{Name: "stand-in"}, "")
			if (err == nil) != tc.ok {
				t.Fatalf("error %v, want ok=%v", err, tc.ok)
			}
			boots, _ := os.ReadFile(filepath.Join(dir, "boots"))
			if got := strings.TrimSpace(string(boots)); got != fmt.Sprint(tc.boots) {
				t.Fatalf("%s boots, want %d", got, tc.boots)
			}
			if (res.Retried != "") != tc.retried {
				t.Fatalf("Retried = %q, want retried=%v", res.Retried, tc.retried)
			}
			if tc.retried && !tc.ok && !strings.Contains(err.Error(), "first boot had already failed") {
				t.Fatalf("the error hides the first boot's failure: %v", err)
			}
			if tc.ok && string(res.Files["out"]) != "hi" {
				t.Fatalf("outputs %q", res.Files)
			}
		})
	}
}
