// Package lazyre compiles a regular expression on its first use rather than at package
// initialisation, so that a command pays only for the expressions it runs: a program
// that starts for one command must not compile every parser's patterns first.
package lazyre

import (
	"regexp"
	"sync"
)

// New returns a function that compiles expr the first time it is called, and returns
// the same *regexp.Regexp from then on. Like regexp.MustCompile, it panics on an
// expression that does not compile, at that first call; TestExpressionsCompile
// compiles every expression given to New in the module, so a bad one fails a test.
func New(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
