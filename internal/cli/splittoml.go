package cli

import (
	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/docs"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// newSplitTOMLTopic is a help topic: gpusplit help split.toml prints the documented
// desired state file, which an installed binary carries with it.
func newSplitTOMLTopic() *cobra.Command {
	return &cobra.Command{
		Use:   "split.toml",
		Short: "The desired state file (" + plan.DefaultConfig + "), every key explained",
		Long: `The desired state file, as plan, apply, status and persist read it from
` + plan.DefaultConfig + ` (or --config). This is a complete example with every key
explained; save it with

  gpusplit help split.toml | sed -n '\|^# /etc/gpusplit/split.toml|,$p' > split.toml

and edit it, then check it with gpusplit plan --config split.toml.

` + docs.SplitTOML,
	}
}
