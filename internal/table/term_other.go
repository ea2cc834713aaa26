//go:build !linux

package table

import "os"

// terminalWidth knows no terminal off Linux, where gpusplit reads no host: tables take
// $COLUMNS or Default.
func terminalWidth(*os.File) (int, bool) { return 0, false }
