//go:build !(cuda && linux && (amd64 || arm64))

package cuda

import "github.com/gpusplit/gpusplit/internal/p2p"

// Open reports that this build has no CUDA binding.
func Open() (p2p.Driver, error) { return nil, ErrStatic }
