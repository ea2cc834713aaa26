package health

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// gpu is the sample host's first GPU, on nvidia as minor 0, its link Gen5 x16.
var gpu = pci.Address{Bus: 0x01}

// gpuDir is where its sysfs directory lies in the unpacked sample host.
const gpuDir = "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0"

// shared is the sample host laid out once for the package (unpacking it takes seconds
// under the race detector); sample hands it to one test at a time and puts back what the
// test changed.
var shared struct {
	root     string
	pristine map[string]saved // what watched holds, relative to root
}

// watched are the paths a test may break: the sample GPU's files, its link in
// /sys/bus/pci/devices and the driver's information about it. Under dev and run a test
// only adds.
var watched = []string{"sys/bus/pci/devices/0000:01:00.0", "proc/driver/nvidia/gpus/0000:01:00.0/information"}

type saved struct {
	link string // a link's target; "" for a file
	data []byte
	mode os.FileMode
}

func TestMain(m *testing.M) {
	root, err := os.MkdirTemp("", "health-test")
	if err != nil {
		panic(err)
	}
	code := func() int {
		defer os.RemoveAll(root)
		if err := samplehost.Unpack(root); err != nil {
			panic(err)
		}
		names, err := os.ReadDir(filepath.Join(root, gpuDir))
		if err != nil {
			panic(err)
		}
		for _, n := range names {
			if !n.IsDir() {
				watched = append(watched, gpuDir+"/"+n.Name())
			}
		}
		shared.root, shared.pristine = root, map[string]saved{}
		for _, p := range watched {
			full := filepath.Join(root, p)
			fi, err := os.Lstat(full)
			if err != nil {
				panic(err)
			}
			s := saved{mode: fi.Mode().Perm()}
			if fi.Mode()&os.ModeSymlink != 0 {
				s.link, err = os.Readlink(full)
			} else {
				s.data, err = os.ReadFile(full)
			}
			if err != nil {
				panic(err)
			}
			shared.pristine[p] = s
		}
		return m.Run()
	}()
	os.Exit(code)
}

// sample returns the shared sample host, as it was unpacked, and a Host of it.
func sample(t *testing.T) (string, *host.Host) {
	t.Helper()
	root := shared.root
	t.Cleanup(func() {
		for _, p := range watched {
			full, s := filepath.Join(root, p), shared.pristine[p]
			os.Remove(full)
			var err error
			if s.link != "" {
				err = os.Symlink(s.link, full)
			} else {
				err = os.WriteFile(full, s.data, s.mode)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		os.RemoveAll(filepath.Join(root, "dev/nvidia0"))
		os.RemoveAll(filepath.Join(root, "run/gpusplit"))
	})
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, h
}

func write(t *testing.T, root, p, body string) {
	t.Helper()
	full := filepath.Join(root, p)
	os.Remove(full) // a link or a FIFO in the way
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, root, p string) {
	t.Helper()
	if err := os.Remove(filepath.Join(root, p)); err != nil {
		t.Fatal(err)
	}
}

// config returns the sample GPU's config space with its first two bytes replaced.
func config(t *testing.T, root string, b0, b1 byte) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, gpuDir, "config"))
	if err != nil {
		t.Fatal(err)
	}
	b[0], b[1] = b0, b1
	return string(b)
}

// checks returns the kinds of evidence, in order.
func checks(ev []Evidence) []string {
	var out []string
	for _, e := range ev {
		out = append(out, e.Check)
	}
	return out
}

var sampleBaseline = Baseline{Width: 16, Speed: "32.0 GT/s PCIe", MaxWidth: 16, MaxSpeed: "32.0 GT/s PCIe"}

func TestReadBaseline(t *testing.T) {
	root, h := sample(t)
	b, err := ReadBaseline(h, gpu)
	if err != nil || b != sampleBaseline {
		t.Fatalf("ReadBaseline = %+v, %v; want %+v", b, err, sampleBaseline)
	}
	// It goes in the hook's journal: JSON both ways.
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var back Baseline
	if err := json.Unmarshal(data, &back); err != nil || back != b {
		t.Errorf("JSON round trip %s gave %+v, %v", data, back, err)
	}

	// A conventional PCI device has no link files: an empty baseline, no error.
	for _, f := range []string{"current_link_width", "current_link_speed", "max_link_width", "max_link_speed"} {
		remove(t, root, gpuDir+"/"+f)
	}
	if b, err := ReadBaseline(h, gpu); err != nil || !b.Empty() {
		t.Errorf("without link files: %+v, %v; want an empty baseline", b, err)
	}
	if data, _ := json.Marshal(Baseline{}); string(data) != "{}" {
		t.Errorf("an empty baseline is %s in JSON", data)
	}

	if _, err := ReadBaseline(h, pci.Address{Bus: 0x05}); err == nil {
		t.Error("a device that is not there has a baseline")
	}
	write(t, root, gpuDir+"/current_link_width", "sixteen\n")
	if _, err := ReadBaseline(h, gpu); err == nil {
		t.Error("a width that is not a number gave no error")
	}
}

// Each check of CheckReturn, made to fire on a sample host broken as a real one breaks;
// with the check removed, its case finds nothing and fails.
func TestCheckReturn(t *testing.T) {
	cases := []struct {
		name   string
		base   Baseline
		break_ func(t *testing.T, root string)
		want   []string
	}{
		{"healthy", sampleBaseline, func(*testing.T, string) {}, nil},
		// An idle NVIDIA GPU drops its link to 2.5 GT/s: not a fault.
		{"idle at 2.5 GT/s", sampleBaseline, func(t *testing.T, root string) {
			write(t, root, gpuDir+"/current_link_speed", "2.5 GT/s PCIe\n")
		}, nil},
		{"healthy without a baseline", Baseline{}, func(*testing.T, string) {}, nil},
		{"gone from sysfs", sampleBaseline, func(t *testing.T, root string) {
			remove(t, root, "sys/bus/pci/devices/0000:01:00.0")
		}, []string{Gone}},
		{"config space reads ffff", sampleBaseline, func(t *testing.T, root string) {
			write(t, root, gpuDir+"/config", config(t, root, 0xff, 0xff))
		}, []string{ConfigSpace}},
		{"config space reads 0000", sampleBaseline, func(t *testing.T, root string) {
			write(t, root, gpuDir+"/config", config(t, root, 0, 0))
		}, []string{ConfigSpace}},
		{"config space names another vendor", sampleBaseline, func(t *testing.T, root string) {
			write(t, root, gpuDir+"/config", config(t, root, 0x02, 0x10))
		}, []string{ConfigSpace}},
		{"config space empty", sampleBaseline, func(t *testing.T, root string) {
			write(t, root, gpuDir+"/config", "")
		}, []string{ConfigSpace}},
		{"config space a FIFO", sampleBaseline, func(t *testing.T, root string) {
			p := filepath.Join(root, gpuDir, "config")
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{ConfigSpace}},
		{"vendor file reads 0xffff", sampleBaseline, func(t *testing.T, root string) {
			write(t, root, gpuDir+"/vendor", "0xffff\n")
			write(t, root, gpuDir+"/config", config(t, root, 0xff, 0xff))
		}, []string{VendorFile, ConfigSpace}},
		{"vendor file alone reads 0xffff", sampleBaseline, func(t *testing.T, root string) {
			write(t, root, gpuDir+"/vendor", "0xffff\n")
		}, []string{VendorFile}},
		{"link width 0", sampleBaseline, func(t *testing.T, root string) {
			write(t, root, gpuDir+"/current_link_width", "0\n")
		}, []string{LinkDown}},
		{"link speed Unknown", sampleBaseline, func(t *testing.T, root string) {
			write(t, root, gpuDir+"/current_link_speed", "Unknown\n")
		}, []string{LinkDown}},
		{"link down, as the kernel shows it", sampleBaseline, func(t *testing.T, root string) {
			write(t, root, gpuDir+"/current_link_width", "0\n")
			write(t, root, gpuDir+"/current_link_speed", "Unknown speed\n")
		}, []string{LinkDown, LinkDown}},
		{"link speed unparseable", sampleBaseline, func(t *testing.T, root string) {
			write(t, root, gpuDir+"/current_link_speed", "fast\n")
		}, []string{LinkDown}},
		{"narrower than at the start", sampleBaseline, func(t *testing.T, root string) {
			write(t, root, gpuDir+"/current_link_width", "8\n")
		}, []string{LinkWidth}},
		{"narrower than it can, without a baseline", Baseline{}, func(t *testing.T, root string) {
			write(t, root, gpuDir+"/current_link_width", "8\n")
		}, []string{LinkWidth}},
		// x8 at the start (a riser), x8 now: what it had is what it gets back.
		{"as narrow as at the start", Baseline{Width: 8, Speed: "32.0 GT/s PCIe", MaxWidth: 16, MaxSpeed: "32.0 GT/s PCIe"}, func(t *testing.T, root string) {
			write(t, root, gpuDir+"/current_link_width", "8\n")
		}, nil},
		{"link files gone", sampleBaseline, func(t *testing.T, root string) {
			remove(t, root, gpuDir+"/current_link_width")
		}, []string{LinkDown}},
		{"conventional PCI", Baseline{}, func(t *testing.T, root string) {
			for _, f := range []string{"current_link_width", "current_link_speed", "max_link_width", "max_link_speed"} {
				remove(t, root, gpuDir+"/"+f)
			}
		}, nil},
	}
	// What the evidence says, where another check would find the same fault.
	texts := map[string]string{
		"config space reads ffff":    "config space reads ffff",
		"config space reads 0000":    "vendor id 0x0000",
		"link speed Unknown":         `the PCIe link is down: current_link_speed reads "Unknown"`,
		"link speed unparseable":     "the PCIe link has no speed",
		"gone from sysfs":            "0000:01:00.0 is gone from /sys/bus/pci/devices",
		"narrower than at the start": "x8, narrower than the x16 it had at the VM's start",
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, h := sample(t)
			c.break_(t, root)
			done := make(chan []Evidence)
			go func() { done <- CheckReturn(h, gpu, c.base) }()
			var ev []Evidence
			select {
			case ev = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("CheckReturn hangs")
			}
			if got := checks(ev); !slices.Equal(got, c.want) {
				t.Errorf("checks %v, want %v: %v", got, c.want, Lines(ev))
			}
			if text := strings.Join(Lines(ev), "\n"); !strings.Contains(text, texts[c.name]) {
				t.Errorf("the evidence lacks %q:\n%s", texts[c.name], text)
			}
			if c.want == nil && ev != nil {
				t.Errorf("a healthy device gave %#v, want nil", ev)
			}
			for _, e := range ev {
				if e.Check != Gone && !hasPrefix(e.Text, "0000:01:00.0: ") {
					t.Errorf("evidence does not name the device: %q", e.Text)
				}
			}
		})
	}
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// Each check of CheckBound: the driver, the minor, the device node.
func TestCheckBound(t *testing.T) {
	cases := []struct {
		name   string
		driver string
		break_ func(t *testing.T, root string)
		want   []string
	}{
		{"on nvidia with its node", "nvidia", func(*testing.T, string) {}, nil},
		{"no /dev/nvidia0", "nvidia", func(t *testing.T, root string) { remove(t, root, "dev/nvidia0") }, []string{DeviceNode}},
		{"no minor reported", "nvidia", func(t *testing.T, root string) {
			remove(t, root, "proc/driver/nvidia/gpus/0000:01:00.0/information")
		}, []string{DeviceNode}},
		{"unbound", "nvidia", func(t *testing.T, root string) { remove(t, root, gpuDir+"/driver") }, []string{Driver}},
		{"on another driver", "nvidia", func(t *testing.T, root string) {
			remove(t, root, gpuDir+"/driver")
			if err := os.Symlink("../../../../bus/pci/drivers/vfio-pci", filepath.Join(root, gpuDir, "driver")); err != nil {
				t.Fatal(err)
			}
		}, []string{Driver}},
		// vfio-pci has no device nodes of nvidia's to check.
		{"on vfio-pci as wanted", "vfio-pci", func(t *testing.T, root string) {
			remove(t, root, gpuDir+"/driver")
			os.MkdirAll(filepath.Join(root, "sys/bus/pci/drivers/vfio-pci"), 0o755)
			if err := os.Symlink("../../../../bus/pci/drivers/vfio-pci", filepath.Join(root, gpuDir, "driver")); err != nil {
				t.Fatal(err)
			}
			remove(t, root, "dev/nvidia0")
		}, nil},
		{"gone", "nvidia", func(t *testing.T, root string) { remove(t, root, "sys/bus/pci/devices/0000:01:00.0") }, []string{Gone}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, h := sample(t)
			write(t, root, "dev/nvidia0", "")
			c.break_(t, root)
			ev := CheckBound(h, gpu, c.driver)
			if got := checks(ev); !slices.Equal(got, c.want) {
				t.Errorf("checks %v, want %v: %v", got, c.want, Lines(ev))
			}
		})
	}
}
