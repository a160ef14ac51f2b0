package kernels

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCgoPreamblesIncludeThroughSRCDIR checks that no cgo preamble includes
// a header of this package in quotes. cgo compiles its probe of the C
// names from a file in $TMPDIR, and a quoted include looks in that file's
// directory first, so a stray kernels.h there (an old copy in /tmp) hid
// the package's own declarations on an uncached build ("could not
// determine what C.pf_… refers to"). Angle brackets with
// `#cgo CFLAGS: -I${SRCDIR}` search only the package's directory.
func TestCgoPreamblesIncludeThroughSRCDIR(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	quoted := regexp.MustCompile(`^//\s*#include\s*"`)
	checked, angled, withI := 0, "", false
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), "\nimport \"C\"") {
			continue
		}
		checked++
		withI = withI || strings.Contains(string(src), "#cgo CFLAGS: -I${SRCDIR}")
		for i, line := range strings.Split(string(src), "\n") {
			if quoted.MatchString(line) {
				t.Errorf("%s:%d: %s: include the package's headers as <name.h> with #cgo CFLAGS: -I${SRCDIR}", f, i+1, strings.TrimSpace(line))
			}
			if strings.Contains(line, "#include <kernels.h>") {
				angled = f
			}
		}
	}
	// CFLAGS lines add up over the package's files: one -I is enough.
	if angled != "" && !withI {
		t.Errorf("%s includes <kernels.h>, but no file of the package has #cgo CFLAGS: -I${SRCDIR}", angled)
	}
	if checked == 0 {
		t.Fatal("no cgo file found: the test looks in the wrong place")
	}
}
