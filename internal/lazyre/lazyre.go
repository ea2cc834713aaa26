// Package lazyre compiles a regular expression on its first use, as the Go tree's own
// internal/lazyregexp does: a command pays only for the expressions it runs, and a
// parser's patterns are not all compiled before the first line of output.
package lazyre

import (
	"regexp"
	"sync"
)

// Regexp is a regular expression compiled the first time one of its methods is called.
type Regexp struct {
	expr string
	once sync.Once
	rx   *regexp.Regexp
}

// New returns expr, to be compiled at its first use. Like regexp.MustCompile, it panics
// on an expression that does not compile, at that first use; TestExpressionsCompile
// compiles every expression given to New in the module, so a bad one fails a test.
func New(expr string) *Regexp { return &Regexp{expr: expr} }

// re returns the compiled expression, the same *regexp.Regexp at every call.
func (r *Regexp) re() *regexp.Regexp {
	r.once.Do(func() { r.rx = regexp.MustCompile(r.expr) })
	return r.rx
}

// MatchString is regexp's MatchString.
func (r *Regexp) MatchString(s string) bool { return r.re().MatchString(s) }

// FindStringSubmatch is regexp's FindStringSubmatch.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.re().FindStringSubmatch(s) }

// FindAllStringSubmatch is regexp's FindAllStringSubmatch.
func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	return r.re().FindAllStringSubmatch(s, n)
}

// ReplaceAllString is regexp's ReplaceAllString.
func (r *Regexp) ReplaceAllString(src, repl string) string { return r.re().ReplaceAllString(src, repl) }
