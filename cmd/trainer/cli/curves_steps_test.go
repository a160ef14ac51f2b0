package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
)

// TestCurvesRefusesStepsOutOfRange: a metrics.jsonl step that is not a
// whole number of steps is an error naming the file and line; before,
// 1e30 printed as -9223372036854775808 and 1.5 as 1.
func TestCurvesRefusesStepsOutOfRange(t *testing.T) {
	for _, line := range []string{`{"step":1e30,"x":1}`, `{"step":1.5,"x":1}`, `{"step":-3,"x":1}`} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, train.MetricsFile), []byte(`{"step":1,"x":2}`+"\n"+line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runCLI(t, "curves", dir, "--metric", "x")
		if code != 2 || !strings.Contains(stderr, "metrics.jsonl: line 2: step") {
			t.Errorf("curves on %s: exit %d, stderr %q; want 2 naming line 2's step", line, code, stderr)
		}
	}
}
