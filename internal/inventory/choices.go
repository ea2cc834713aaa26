package inventory

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/pciids"
)

// Choice is a selector to offer, with what it chooses.
type Choice struct {
	Value string
	Desc  string
}

// SelectorChoices are the selectors that choose among the host's GPUs (those sels count
// as GPUs): each GPU's address, the NUMA nodes and IOMMU groups that hold GPUs, their
// vendor:device ids and count:N, in that order. short are the forms offered once
// something is typed, not to offer every GPU three times: the addresses of domain 0000
// as lspci prints them, without the domain, then the GPU numbers as inventory and topo
// print them (gpu:N, which pci.Choose counts in the same address order). It reads only the PCI tree, not what holds
// the GPUs: a shell completion waits on it.
func SelectorChoices(h *host.Host, sels []pci.Selector) (choices, short []Choice, err error) {
	tree, err := pci.Scan(h, pciids.Default())
	if err != nil {
		return nil, nil, err
	}
	gpus, err := pci.GPUs(tree, sels)
	if err != nil {
		return nil, nil, err
	}
	numa, groups, ids := map[int]int{}, map[int][]string{}, map[string]int{}
	idName := map[string]string{}
	for _, gp := range gpus {
		desc := Model(gp.Device)
		if gp.NUMANode >= 0 {
			desc += ", NUMA node " + strconv.Itoa(gp.NUMANode)
			numa[gp.NUMANode]++
		}
		if gp.IOMMUGroup >= 0 {
			desc += ", IOMMU group " + strconv.Itoa(gp.IOMMUGroup)
			groups[gp.IOMMUGroup] = append(groups[gp.IOMMUGroup], gp.Address.String())
		}
		desc += ", " + orNone(gp.Driver)
		choices = append(choices, Choice{gp.Address.String(), desc})
		if a, ok := strings.CutPrefix(gp.Address.String(), "0000:"); ok {
			short = append(short, Choice{a, desc})
		}
		ids[gp.ID()]++
		idName[gp.ID()] = Model(gp.Device)
	}
	for i, gp := range gpus {
		short = append(short, Choice{fmt.Sprintf("gpu:%d", i), fmt.Sprintf("GPU%d, %s, %s", i, gp.Address, Model(gp.Device))})
	}
	for _, n := range slices.Sorted(maps.Keys(numa)) {
		choices = append(choices, Choice{fmt.Sprintf("numa:%d", n), "NUMA node " + strconv.Itoa(n) + ": " + gpusText(numa[n])})
	}
	for _, n := range slices.Sorted(maps.Keys(groups)) {
		choices = append(choices, Choice{fmt.Sprintf("group:%d", n), "IOMMU group of " + strings.Join(groups[n], ", ")})
	}
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		choices = append(choices, Choice{id, idName[id] + ": " + gpusText(ids[id])})
	}
	for n := 1; n <= len(gpus); n++ {
		choices = append(choices, Choice{fmt.Sprintf("count:%d", n), "any " + gpusText(n) + ", on as few NUMA nodes as possible"})
	}
	return choices, short, nil
}

func gpusText(n int) string {
	if n == 1 {
		return "1 GPU"
	}
	return strconv.Itoa(n) + " GPUs"
}
