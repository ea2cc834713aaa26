// Package errconst makes error values that cost nothing at package initialisation.
// errors.New is a call, which the package that declares the value runs as it starts,
// and which maps that package's code into memory at every start of the program; a
// pointer to a literal is data the linker lays out:
//
//	var ErrLaidOut error = &errconst.Error{Text: "already laid out"}
package errconst

// Error is an error of a fixed text. Each value is its own error: compare them, or use
// errors.Is, as with errors.New.
type Error struct{ Text string }

func (e *Error) Error() string { return e.Text }
