package fit

import "fmt"

// MiB is 2^20 bytes, the unit nvidia-smi and the engines' logs count GPU memory in.
const (
	MiB = int64(1) << 20
	GiB = int64(1) << 30
)

// Known is a GPU of the table: its memory and where the figure comes from.
type Known struct {
	Name string
	// Bytes is the memory the CUDA driver reports (cuDeviceTotalMem) where a public
	// capture of it exists, else what nvidia-smi reports, else the nominal size: Kind
	// says which.
	Bytes  int64
	Kind   string
	Source string
}

// Memory kinds, from the most exact.
const (
	KindCUDA      = "CUDA total"
	KindNvidiaSMI = "nvidia-smi total"
	KindSibling   = "a sibling's measured total"
	KindNominal   = "nominal"
)

// deviceQuery is a public set of deviceQuery (CUDA samples) captures: each gives
// cuDeviceTotalMem in bytes on its "Total amount of global memory" line.
const deviceQuery = "github.com/thamada/nvidia-smi @ c4c8a463a61e4ac67e3d7956da104b302760a498, "

// known is the table of NVIDIA GPUs by PCI device id (vendor 10de; names as pci.ids
// gives them, github.com/pciutils/pciids). gpusplit reads GPUs from sysfs whatever their
// driver, so the memory of a GPU on vfio-pci comes from here, not from the driver.
var known = []struct {
	id uint16
	Known
}{
	// RTX PRO 6000 Blackwell: 96 GB of GDDR7; nvidia-smi reports 97,887 MiB (95.6 GiB)
	// on the Workstation and the Server Edition.
	{0x2bb1, Known{"RTX PRO 6000 Blackwell Workstation Edition", 97887 * MiB, KindNvidiaSMI,
		"raw.githubusercontent.com/MarcoPizeta/flash-next-rtxpro6000-bench/main/HARDWARE.md"}},
	{0x2bb4, Known{"RTX PRO 6000 Blackwell Max-Q Workstation Edition", 97887 * MiB, KindSibling,
		"the Workstation Edition's 97,887 MiB: the same 96 GB of GDDR7"}},
	{0x2bb5, Known{"RTX PRO 6000 Blackwell Server Edition", 97887 * MiB, KindNvidiaSMI,
		"huggingface.co/datasets/uclanecl/NECL_GPUs alderaan.csv (\"97887MB\")"}},
	// Hopper.
	{0x2330, Known{"H100 SXM5 80GB", 85045477376, KindCUDA, deviceQuery + "gls/H100SXMx8_deviceQuery.py"}},
	{0x2331, Known{"H100 PCIe", 85045477376, KindSibling, "the H100 SXM5's CUDA total: the same 80 GB of HBM"}},
	{0x2321, Known{"H100L 94GB (H100 NVL)", 99861594112, KindCUDA, deviceQuery + "gls/H100NVLx2_deviceQuery.py"}},
	{0x2335, Known{"H200 SXM 141GB", 141_000_000_000, KindNominal, "NVIDIA mig-parted config-default.yaml (H200 141GB), MLCommons inference v4.1 H200-SXM-141GBx8"}},
	{0x233b, Known{"H200 NVL", 141_000_000_000, KindNominal, "NVIDIA mig-parted config-default.yaml groups it with the H200 141GB"}},
	// Ada and Ampere.
	{0x26b9, Known{"L40S", 47803596800, KindCUDA, deviceQuery + "gls/L40S_deviceQuery.py"}},
	{0x26b5, Known{"L40", 47803596800, KindSibling, "the L40S's CUDA total: the same 48 GB of GDDR6 with ECC"}},
	{0x27b8, Known{"L4", 23570219008, KindCUDA, deviceQuery + "gls/L4_deviceQuery.py"}},
	{0x26b1, Known{"RTX 6000 Ada Generation", 51002867712, KindCUDA, deviceQuery + "gls/RTX6000Ada_x8_deviceQuery.py"}},
	{0x2235, Known{"A40", 47608692736, KindCUDA, deviceQuery + "gls/A40x10_deviceQuery.py"}},
	{0x20b2, Known{"A100 SXM4 80GB", 85100068864, KindCUDA, deviceQuery + "gls/A100SXMx4_deviceQuery.py"}},
	{0x20b5, Known{"A100 PCIe 80GB", 85100068864, KindSibling, "the A100 SXM4 80GB's CUDA total: the same 80 GB of HBM2e"}},
	{0x20b0, Known{"A100 SXM4 40GB", 40_000_000_000, KindNominal, "NVIDIA mig-parted config-default.yaml (A100-40GB)"}},
	{0x20b1, Known{"A100 PCIe 40GB", 40_000_000_000, KindNominal, "NVIDIA mig-parted config-default.yaml (A100-40GB)"}},
	{0x20f1, Known{"A100 PCIe 40GB", 40_000_000_000, KindNominal, "NVIDIA mig-parted config-default.yaml (A100-40GB)"}},
	// GeForce.
	{0x2b85, Known{"GeForce RTX 5090", 32_000_000_000, KindNominal, "32 GB of GDDR7, NVIDIA's product page"}},
	{0x2684, Known{"GeForce RTX 4090", 25386352640, KindCUDA, deviceQuery + "gls/RTX4090_deviceQuery.py"}},
	{0x2204, Known{"GeForce RTX 3090", 25327697920, KindCUDA, deviceQuery + "gls/RTX3090_deviceQuery.py"}},
	// Blackwell data centre.
	{0x2901, Known{"B200", 180_000_000_000, KindNominal, "NVIDIA mig-parted config-default.yaml (B200 MIG profiles up to 180 GB)"}},
}

// Lookup returns the table's figure for a GPU.
func Lookup(vendor, device uint16) (Known, bool) {
	if vendor != 0x10de {
		return Known{}, false
	}
	for _, k := range known {
		if k.id == device {
			return k.Known, true
		}
	}
	return Known{}, false
}

// Describe words a figure for the report: "97,887 MiB (nvidia-smi total: …)".
func (k Known) Describe() string {
	return fmt.Sprintf("%s (%s: %s)", MiBText(k.Bytes), k.Kind, k.Source)
}

// MiBText words bytes in MiB with thousands separated: "97,887 MiB".
func MiBText(b int64) string { return Thousands(b/MiB) + " MiB" }

// Thousands writes n with commas between thousands: 262,144.
func Thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var out []byte
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, c)
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
