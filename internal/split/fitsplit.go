package split

import (
	"path/filepath"

	"github.com/gpusplit/gpusplit/docs"
	"github.com/gpusplit/gpusplit/internal/fit"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// DemoConfig names the reference split that stands in for the sample host's desired
// state file, which it does not carry.
const DemoConfig = "docs/split.toml"

// FitSplit is the desired state that fit works out a guest's GPUs after: config from
// this machine, else the host's own; for the demo's sample host (demo), which carries
// none, the reference split of docs/split.toml. nil, without an error, when there is
// none.
func FitSplit(h *host.Host, config string, demo bool) (*fit.Split, error) {
	name, data, err := ReadConfig(h, config)
	switch {
	case err == nil:
	case config == "" && demo && !h.Exists(plan.DefaultConfig):
		name, data = DemoConfig, []byte(docs.SplitTOML)
	case config == "" && !h.Exists(plan.DefaultConfig):
		return nil, nil
	default:
		return nil, err
	}
	file, err := plan.ParseFile(name, data)
	if err != nil {
		return nil, err
	}
	return &fit.Split{Name: name, File: file, Demo: name == DemoConfig}, nil
}

// Models works out, for each group of the desired state file that names a model,
// whether the model fits on the GPUs the group holds once the split is done (nothing
// for --vfio, which names no model); measured is the GPUs' memory as the driver reports
// it. The model's path is on this machine, a relative one relative to the file's
// directory. A model's error is worded by advice in its entry.
func (pl *Planned) Models(measured func() map[pci.Address]int64, advice func(error) error) []fit.GroupModel {
	if pl.File == nil {
		return nil
	}
	dir := ""
	if pl.Source.Config != "" {
		dir = filepath.Dir(pl.Source.Config)
	}
	models := fit.GroupModels(pl.File, pl.Inv, pl.Plan, dir, measured)
	for i, m := range models {
		if m.Err != nil {
			models[i].Error = advice(m.Err).Error()
		}
	}
	return models
}
