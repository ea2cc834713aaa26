package topo

import "github.com/gpusplit/gpusplit/internal/pci"

// Report is the JSON form of topo: gpus (addresses, in row order), nics, and matrix
// (rows of strings, GPUs then NICs, columns in the same order). See docs/json.md.
type Report struct {
	GPUs         []pci.Address `json:"gpus"`
	NICs         []NICReport   `json:"nics"`
	Matrix       [][]string    `json:"matrix"`
	CPUAffinity  []string      `json:"cpu_affinity"`  // each GPU's local_cpulist in sysfs
	NUMAAffinity []int         `json:"numa_affinity"` // each GPU's numa_node in sysfs
	// GPUNUMAID is each GPU's memory's own NUMA node, where the nvidia driver states it
	// (/proc/driver/nvidia/gpus/<address>/numa_status), else -1.
	GPUNUMAID []int `json:"gpu_numa_id"`
	Flat      bool  `json:"flat"`
}

// NICReport is an RDMA NIC of the matrix.
type NICReport struct {
	Name    string      `json:"name"`
	Address pci.Address `json:"address"`
}

// Report is the matrix's JSON form.
func (m *Matrix) Report() Report {
	doc := Report{GPUs: []pci.Address{}, NICs: []NICReport{}, Matrix: [][]string{}, CPUAffinity: []string{}, NUMAAffinity: []int{}, GPUNUMAID: []int{}, Flat: m.Flat()}
	for i, d := range m.GPUs {
		doc.GPUs = append(doc.GPUs, d.Address)
		id := -1
		if i < len(m.GPUNUMAIDs) {
			id = m.GPUNUMAIDs[i]
		}
		doc.GPUNUMAID = append(doc.GPUNUMAID, id)
		doc.CPUAffinity = append(doc.CPUAffinity, d.LocalCPUs.String())
		doc.NUMAAffinity = append(doc.NUMAAffinity, d.NUMANode)
	}
	for _, n := range m.NICs {
		doc.NICs = append(doc.NICs, NICReport{Name: n.Name, Address: n.Device.Address})
	}
	for _, row := range m.Cells {
		r := make([]string, len(row))
		for i, c := range row {
			r[i] = string(c)
		}
		doc.Matrix = append(doc.Matrix, r)
	}
	return doc
}
