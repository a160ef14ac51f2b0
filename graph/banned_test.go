package graph

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyGraphImportsGorgonia keeps Gorgonia behind this package: no other
// package of the module may import it, so none can call its broken ops. The
// packages under graph/ (optim, ckpt, fileio, graphtest, internal/kernels)
// are other packages too.
func TestOnlyGraphImportsGorgonia(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	self := filepath.Join(root, "graph")
	checked, under := 0, 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "checkpoints") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || filepath.Dir(path) == self {
			return nil
		}
		if strings.HasPrefix(path, self+string(filepath.Separator)) {
			under++
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, "gorgonia.org/") {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s imports %s; only package graph may", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 || under == 0 {
		t.Fatalf("%d Go files found outside package graph, %d of them under graph/", checked, under)
	}
}

// banned lists the Gorgonia names that are silently wrong in v0.9.18
// (GORGONIA.md), and the one file allowed to use each.
var banned = map[string]string{
	"SoftMax":            "",
	"LogSoftMax":         "",
	"LogSumExp":          "",
	"InverseSqrt":        "gorgonia_test.go", // only to show the gradient checker fails on it
	"Dropout":            "",
	"Reshape":            "reshape.go",
	"Ravel":              "",
	"GaussianRandomNode": "",
	"UniformRandomNode":  "",
	"NewAdamW":           "",
	"NewAdamSolver":      "",
	"BindDualValues":     "",
	"ExecuteFwdOnly":     "",
	"GlorotU":            "",
	"GlorotN":            "",
	"Gaussian":           "",
	"Uniform":            "",
}

// TestGraphAvoidsBrokenGorgoniaOps checks that this package itself calls
// none of the broken Gorgonia functions except through its wrappers.
func TestGraphAvoidsBrokenGorgoniaOps(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		alias := ""
		for _, imp := range f.Imports {
			if imp.Path.Value == `"gorgonia.org/gorgonia"` {
				alias = "gorgonia"
				if imp.Name != nil {
					alias = imp.Name.Name
				}
			}
		}
		if alias == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == alias {
				if allowed, bad := banned[sel.Sel.Name]; bad && allowed != e.Name() {
					t.Errorf("%s uses gorgonia.%s, which is broken in v0.9.18", e.Name(), sel.Sel.Name)
				}
			}
			return true
		})
	}
}
