package em

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocumentedTestPatternsMatch reads every Markdown document of the
// repository for the `go test PACKAGES … -run P` and `-bench P` commands
// it tells a reader to run, and checks that each pattern P selects at
// least one test (Test, Example or Fuzz function) or benchmark of those
// packages: a renamed or moved test would otherwise leave a command
// that runs nothing and says "ok". The pattern's first level is matched
// against the top-level names, as go test does; "^$" (run no test) is
// skipped.
func TestDocumentedTestPatternsMatch(t *testing.T) {
	root := moduleRoot(t)
	checked := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if skipDir(rel, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if filepath.Ext(path) != ".md" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, cmd := range goTestCommands(string(data)) {
			checked++
			checkTestCommand(t, root, rel, cmd)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("found only %d go test commands in the documents: is the parser right?", checked)
	}
}

// goTestCommandRE matches a go test command inside backquotes, which may
// wrap over lines in the Markdown source.
var goTestCommandRE = regexp.MustCompile("`(go test [^`]*)`")

// goTestCommands returns the go test commands quoted in a document, each
// on one line.
func goTestCommands(doc string) []string {
	var out []string
	for _, m := range goTestCommandRE.FindAllStringSubmatch(doc, -1) {
		out = append(out, strings.Join(strings.Fields(m[1]), " "))
	}
	return out
}

// testCommand is what a go test command selects: its packages (./x or
// ./x/...), and its -run and -bench patterns.
type testCommand struct {
	pkgs       []string
	run, bench string
}

// parseTestCommand reads a go test command's packages and patterns,
// unquoting 'single' and "double" quoted patterns.
func parseTestCommand(cmd string) testCommand {
	var c testCommand
	fields := strings.Fields(strings.TrimPrefix(cmd, "go test"))
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		switch {
		case strings.HasPrefix(f, "./"):
			c.pkgs = append(c.pkgs, f)
		case (f == "-run" || f == "-bench") && i+1 < len(fields):
			// A quoted pattern may hold spaces: take fields up to the
			// closing quote.
			p := fields[i+1]
			i++
			if q := p[:1]; (q == "'" || q == `"`) && (len(p) == 1 || !strings.HasSuffix(p, q)) {
				for i+1 < len(fields) {
					i++
					p += " " + fields[i]
					if strings.HasSuffix(fields[i], q) {
						break
					}
				}
			}
			p = strings.Trim(p, `'"`)
			if f == "-run" {
				c.run = p
			} else {
				c.bench = p
			}
		}
	}
	return c
}

// testFuncRE matches the declaration of a test, example, fuzz target or
// benchmark.
var testFuncRE = regexp.MustCompile(`(?m)^func ((Test|Example|Fuzz|Benchmark)\w*)\(`)

// checkTestCommand checks one documented command, found in file rel.
func checkTestCommand(t *testing.T, root, rel, cmd string) {
	t.Helper()
	c := parseTestCommand(cmd)
	if len(c.pkgs) == 0 {
		return // go test with no package named: the reader's folder
	}
	var tests, benches []string
	for _, pkg := range c.pkgs {
		dir := filepath.Join(root, strings.TrimSuffix(strings.TrimPrefix(pkg, "./"), "/..."))
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s: `%s` names %s, which does not exist", rel, cmd, pkg)
			return
		}
		walk := func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" || (path != dir && !strings.HasSuffix(pkg, "/...")) {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, "_test.go") {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range testFuncRE.FindAllStringSubmatch(string(data), -1) {
				if m[2] == "Benchmark" {
					benches = append(benches, m[1])
				} else {
					tests = append(tests, m[1])
				}
			}
			return nil
		}
		if err := filepath.WalkDir(dir, walk); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []struct {
		flag, pattern string
		names         []string
	}{{"-run", c.run, tests}, {"-bench", c.bench, benches}} {
		if p.pattern == "" || p.pattern == "^$" {
			continue
		}
		first, _, _ := strings.Cut(p.pattern, "/")
		re, err := regexp.Compile(first)
		if err != nil {
			t.Errorf("%s: `%s`: %s %q is no regular expression: %v", rel, cmd, p.flag, p.pattern, err)
			continue
		}
		found := false
		for _, n := range p.names {
			found = found || re.MatchString(n)
		}
		if !found {
			t.Errorf("%s: `%s`: %s %q matches no function of %s", rel, cmd, p.flag, p.pattern, strings.Join(c.pkgs, " "))
		}
	}
}
