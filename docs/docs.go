// Package docs holds the documents that the gpusplit binary shows itself, so that an
// installed binary has them without the source tree: the commented desired state file.
package docs

import _ "embed"

// SplitTOML is docs/split.toml: every key of the desired state, commented, with the
// reference case's values.
//
//go:embed split.toml
var SplitTOML string
