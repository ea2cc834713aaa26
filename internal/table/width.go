package table

import (
	"io"
	"os"
	"strconv"
)

// Default is the width of a table when neither a terminal nor $COLUMNS gives one.
const Default = 100

// Width is the width to lay tables out at on out: the terminal's when out is one, else
// $COLUMNS (read through getenv) when it holds a number, else Default.
func Width(out io.Writer, getenv func(string) string) int {
	if f, ok := out.(*os.File); ok {
		if cols, ok := terminalWidth(f); ok {
			return cols
		}
	}
	if n, err := strconv.Atoi(getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return Default
}
