// Package hostile holds the end-to-end tests of gpusplit on crafted roots: directories
// and snapshot archives made to hang a reader or exhaust memory (FIFOs and devices where
// files belong, sparse multi-GB files, hard links multiplying a large member, a million
// entries, deep nesting). Each test runs the built binary on such a root and checks that
// every command finishes, with an error or warning that names the file, and stays under
// 100 MB of memory. The package has no code of its own.
package hostile
