package graph

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsPointOneWay keeps the project's floors in order: graph and
// its rooms import no other package of the project (the kernels not even
// graph); em and losses use graph; layers uses graph and em; datasets
// uses none of the project's packages; configs may use layers (the
// attention config is layers'); the commands wire them all. Test files
// are left out: a test may build whatever it checks against.
func TestImportsPointOneWay(t *testing.T) {
	const module = "github.com/probformer/probformer/"
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// allowed[floor] lists the floors a package of that floor may import.
	allowed := map[string][]string{
		"graph/internal/kernels": {},
		"graph":                  {"graph"},
		"em":                     {"graph"},
		"losses":                 {"graph"},
		"layers":                 {"graph", "em"},
		"datasets":               {},
		"configs":                {"layers"},
	}
	floorOf := func(pkg string) string {
		if strings.HasPrefix(pkg, "graph/internal/kernels") {
			return "graph/internal/kernels"
		}
		first, _, _ := strings.Cut(pkg, "/")
		return first
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "bin", "checkpoints":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		floor := floorOf(pkg)
		may, ruled := allowed[floor]
		if !ruled {
			return nil // the commands
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			own, ok := strings.CutPrefix(p, module)
			if !ok {
				continue
			}
			to := floorOf(own)
			ok = false
			for _, m := range may {
				ok = ok || to == m || (m == "graph" && strings.HasPrefix(own, "graph/"))
			}
			if !ok {
				t.Errorf("%s imports %s: package %s (floor %s) may import only %v of the project", filepath.ToSlash(path[len(root)+1:]), own, pkg, floor, may)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d files: is the module root right?", checked)
	}
}
