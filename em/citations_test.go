package em

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestCitationsResolveInRepository walks the repository and checks that
// every citation of a Markdown document can be followed by someone who has
// only cloned it:
//
//   - a token ending in .md (a bare name such as MATH.md or a path such as
//     em/MATH.md), resolved against the repository root and against the
//     citing file's folder, names a file inside the repository;
//   - a section that follows it (" §3", " §1–§6", " §3, §4", " §4 and §5")
//     is a numbered heading of that document ("## 3. …" or "## §3 …"), and
//     an anchor ("#some-heading") is the GitHub anchor of one of its
//     headings;
//   - no file names a path on a development machine or in the shared
//     folder next to the repository, except the data folder allowed below.
//
// It reads .go, .md, .yaml, .c and .h files and Makefiles, and skips the
// .git folder, testdata folders and the git-ignored run output (bin,
// checkpoints). Each failure names the file and line.
func TestCitationsResolveInRepository(t *testing.T) {
	root := moduleRoot(t)
	docs := map[string]*docHeadings{} // by path relative to root
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
		if !scanned(d.Name()) {
			return nil
		}
		checked++
		checkFile(t, root, rel, docs)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("scanned only %d files under %s: is the module root right?", checked, root)
	}
}

// moduleRoot walks up from the package folder to the folder holding go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the em package")
		}
		dir = parent
	}
}

// skipDir reports the folders that hold no citations to check: git's
// own, test fixtures (which may quote anything on purpose), and the run
// output that .gitignore keeps out of the repository.
func skipDir(rel, name string) bool {
	switch {
	case name == ".git", name == "testdata":
		return true
	case rel == "bin", rel == "checkpoints":
		return true
	}
	return false
}

// scanned reports the files whose text is checked.
func scanned(name string) bool {
	if name == "Makefile" {
		return true
	}
	switch filepath.Ext(name) {
	case ".go", ".md", ".yaml", ".c", ".h":
		return true
	}
	return false
}

// citationRE matches a Markdown document's name or path, then optionally
// the sections or the anchor cited in it: "MATH.md §3", "layers/BAYES.md
// §3, §4", "MATH.md §1–§6", "README.md#results".
var citationRE = regexp.MustCompile(`([A-Za-z0-9_.][A-Za-z0-9_./-]*\.md)\b(?:(\s§\d+(?:(?:–|-|, | and )§\d+)*)|#([A-Za-z0-9_-]+))?`)

var sectionRE = regexp.MustCompile(`§(\d+)`)

// notCitations lists the .md names that the repository uses as file names,
// not as documents to read; they are not looked up.
var notCitations = map[string]string{
	// trainer sweep writes its table to <out>/results.md (README, sweep.go).
	"results.md": "an output file of trainer sweep",
}

// pending lists documents that the code cites but that have not been
// brought into the repository yet. Each entry is a known gap, not an
// allowance: delete it when the document lands, and this test then checks
// its citations like any other.
var pending = map[string]string{}

// Paths outside the repository that no file may name. The strings are
// split so that this file does not name them itself.
var (
	machinePath = "/wo" + "rk/"
	sharedPath  = "sha" + "red/"
)

// allowedShared are the folders of the shared area that files may name:
// the English–French corpus that the eng-fra tests, the Makefile and the
// README read (../shared/data/eng-fra relative to the repository), and
// the PyTorch reference benchmarks that `make bench` runs beside the Go
// ones (../shared/bench). They are data and tools, used at run time, not
// documents to cite, and are deliberately never copied into the
// repository.
var allowedShared = []string{"sha" + "red/data/eng-fra", "sha" + "red/bench"}

// checkFile checks every line of the file rel (relative to root).
func checkFile(t *testing.T, root, rel string, docs map[string]*docHeadings) {
	t.Helper()
	f, err := os.Open(filepath.Join(root, rel))
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		where := rel + ":" + strconv.Itoa(n)
		if strings.Contains(line, machinePath) {
			t.Errorf("%s names a path on a development machine (%q): cite the document in the repository", where, machinePath)
		}
		rest := line
		for _, a := range allowedShared {
			rest = strings.ReplaceAll(rest, a, "")
		}
		if strings.Contains(rest, sharedPath) {
			t.Errorf("%s names the shared folder outside the repository (%q): cite the document in the repository", where, sharedPath)
		}
		for _, m := range citationRE.FindAllStringSubmatch(line, -1) {
			checkCitation(t, root, rel, where, m, docs)
		}
	}
	if err := sc.Err(); err != nil {
		t.Errorf("%s: %v", rel, err)
	}
}

// checkCitation checks one match of citationRE in the file rel.
func checkCitation(t *testing.T, root, rel, where string, m []string, docs map[string]*docHeadings) {
	t.Helper()
	token, sections, anchor := m[1], m[2], m[3]
	base := filepath.Base(token)
	if _, ok := notCitations[base]; ok {
		return
	}
	if _, ok := pending[base]; ok {
		return
	}
	target, ok := resolve(root, rel, token)
	if !ok {
		t.Errorf("%s cites %s, which is not a file in the repository", where, token)
		return
	}
	h := docs[target]
	if h == nil {
		var err error
		if h, err = readHeadings(filepath.Join(root, target)); err != nil {
			t.Errorf("%s cites %s: %v", where, token, err)
			return
		}
		docs[target] = h
	}
	for _, s := range sectionRE.FindAllStringSubmatch(sections, -1) {
		if !h.sections[s[1]] {
			t.Errorf("%s cites %s §%s, but %s has no heading numbered %s", where, token, s[1], target, s[1])
		}
	}
	if anchor != "" && !h.anchors[strings.ToLower(anchor)] {
		t.Errorf("%s cites %s#%s, but %s has no heading with that anchor", where, token, anchor, target)
	}
}

// resolve finds the cited document relative to the repository root or to
// the citing file's folder, and returns its path relative to the root. A
// path that leads out of the repository does not count, even if it exists.
func resolve(root, rel, token string) (string, bool) {
	for _, dir := range []string{".", filepath.Dir(rel)} {
		candidate := filepath.Clean(filepath.Join(dir, filepath.FromSlash(token)))
		if candidate == ".." || strings.HasPrefix(candidate, ".."+string(filepath.Separator)) || filepath.IsAbs(candidate) {
			continue
		}
		if info, err := os.Stat(filepath.Join(root, candidate)); err == nil && !info.IsDir() {
			return filepath.ToSlash(candidate), true
		}
	}
	return "", false
}

// docHeadings holds what can be cited in a Markdown document: the numbers
// of its numbered headings and the anchors of all its headings.
type docHeadings struct {
	sections map[string]bool
	anchors  map[string]bool
}

// numberedHeadingRE matches the headings that a "§N" citation points to:
// "## 3. Value inference" or "## §3 Value inference" (any level).
var numberedHeadingRE = regexp.MustCompile(`^#{1,6}\s+§?(\d+)[.\s]`)

var headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)

// readHeadings reads the headings of the Markdown file at path, outside
// fenced code blocks.
func readHeadings(path string) (*docHeadings, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	h := &docHeadings{sections: map[string]bool{}, anchors: map[string]bool{}}
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if m := numberedHeadingRE.FindStringSubmatch(line); m != nil {
			h.sections[m[1]] = true
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			h.anchors[anchorOf(m[1])] = true
		}
	}
	return h, nil
}

// anchorOf returns GitHub's anchor for a heading's text: lower case,
// spaces to hyphens, and punctuation other than hyphens and underscores
// dropped (duplicate headings' -1, -2 suffixes are not modelled).
func anchorOf(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-', r == '_', r >= '0' && r <= '9', r >= 'a' && r <= 'z', r > 127 && isLetterLike(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isLetterLike keeps non-ASCII letters and digits (GitHub keeps them) and
// drops non-ASCII punctuation such as "§", "—" or "–".
func isLetterLike(r rune) bool {
	return !strings.ContainsRune("§—–‘’“”…·", r)
}
