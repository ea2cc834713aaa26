package lazyre

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// sources parses every non-test Go file of the module.
func sources(t *testing.T) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != "../.." || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		files[p] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 50 {
		t.Fatalf("only %d source files found: not the module's tree", len(files))
	}
	return fset, files
}

// Every expression given to lazyre.New compiles, though the first call may lie on a path no
// other test takes.
func TestExpressionsCompile(t *testing.T) {
	fset, files := sources(t)
	// The string constants of each package, which expressions are built from.
	consts := map[string]map[string]ast.Expr{}
	for p, f := range files {
		dir := filepath.Dir(p)
		if consts[dir] == nil {
			consts[dir] = map[string]ast.Expr{}
		}
		for _, decl := range f.Decls {
			if gd, ok := decl.(*ast.GenDecl); ok && gd.Tok == token.CONST {
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							consts[dir][name.Name] = vs.Values[i]
						}
					}
				}
			}
		}
	}
	n := 0
	for p, f := range files {
		constant := func(e ast.Expr) (string, bool) { return constant(e, consts[filepath.Dir(p)]) }
		ast.Inspect(f, func(x ast.Node) bool {
			call, ok := x.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "New" {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "lazyre" {
				return true
			}
			expr, ok := "", len(call.Args) == 1
			if ok {
				expr, ok = constant(call.Args[0])
			}
			if !ok {
				t.Errorf("%s: lazyre.New of an expression that is not a string constant", fset.Position(call.Pos()))
				return true
			}
			n++
			if _, err := regexp.Compile(expr); err != nil {
				t.Errorf("%s: %v", fset.Position(call.Pos()), err)
			}
			return true
		})
	}
	if n < 50 {
		t.Errorf("only %d expressions found", n)
	}
}

// constant is the value of a string literal, of a package's string constant, or of
// those joined with +.
func constant(e ast.Expr, consts map[string]ast.Expr) (string, bool) {
	switch v := e.(type) {
	case *ast.Ident:
		if c, ok := consts[v.Name]; ok {
			return constant(c, consts)
		}
		return "", false
	case *ast.BasicLit:
		if v.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(v.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if v.Op != token.ADD {
			return "", false
		}
		a, ok1 := constant(v.X, consts)
		b, ok2 := constant(v.Y, consts)
		return a + b, ok1 && ok2
	case *ast.ParenExpr:
		return constant(v.X, consts)
	}
	return "", false
}

func TestRegexp(t *testing.T) {
	re := New(`^a(b+)$`)
	if re.re() != re.re() {
		t.Error("a second call compiled again")
	}
	if m := re.FindStringSubmatch("abb"); len(m) != 2 || m[1] != "bb" {
		t.Errorf("match %q", m)
	}
}
