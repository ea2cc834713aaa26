// Package lazyre compiles a regular expression on its first use rather than at package
// initialisation, so that a command pays only for the expressions it runs: a program
// that starts for one command must not compile every parser's patterns first.
package lazyre

import (
	"regexp"
	"sync"
)

// Regexp is a regular expression compiled the first time it is used. Declared as a
// pointer to a literal,
//
//	var version = &lazyre.Regexp{Expr: `^(\d+)\.(\d+)$`}
//
// it is data that the linker lays out: the package's initialisation does nothing for
// it, not even run a call.
type Regexp struct {
	Expr string
	once sync.Once
	re   *regexp.Regexp
}

// Get returns the compiled expression, the same *regexp.Regexp at every call. Like
// regexp.MustCompile, it panics on an expression that does not compile, at the first
// call; TestExpressionsCompile compiles every expression of the module, so a bad one
// fails a test.
func (r *Regexp) Get() *regexp.Regexp {
	r.once.Do(func() { r.re = regexp.MustCompile(r.Expr) })
	return r.re
}
