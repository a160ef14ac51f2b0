package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestRootCommandTakesCommands: a program's own command added to
// NewRootCommand's tree runs beside the trainer's, with the trainer's
// exit statuses (what MainCommand exits with): 0, 1 for its failure, 2
// for a bad flag.
func TestRootCommandTakesCommands(t *testing.T) {
	var out, errOut bytes.Buffer
	root := NewRootCommand(&out, &errOut)
	var fail bool
	hello := &cobra.Command{Use: "hello", RunE: func(cmd *cobra.Command, _ []string) error {
		if fail {
			return errors.New("it failed")
		}
		cmd.Println("hello")
		return nil
	}}
	hello.Flags().BoolVar(&fail, "fail", false, "fail")
	root.AddCommand(hello)
	for _, name := range []string{"train", "eval", "export", "inspect", "translate", "attention", "bleu", "curves", "sweep", "presets", "board"} {
		if c, _, err := root.Find([]string{name}); err != nil || c.Name() != name {
			t.Errorf("no %s command in the tree: %v", name, err)
		}
	}
	if code, err := execute(root, []string{"hello"}); code != 0 || err != nil || out.String() != "hello\n" {
		t.Errorf("hello: exit %d, %v, stdout %q", code, err, out.String())
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"hello", "--fail"}, 1, "trainer: it failed\n"},
		{[]string{"hello", "--nope"}, 2, "unknown flag: --nope"},
	} {
		errOut.Reset()
		root := NewRootCommand(&out, &errOut)
		fail = false
		root.AddCommand(hello)
		if code, _ := execute(root, c.args); code != c.code || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errOut.String(), c.code, c.want)
		}
	}
}

// TestCPUProfile: --cpuprofile writes a profile that the command's end
// finishes (a non-empty file), and leaves no profile running.
func TestCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	if code, _, stderr := runCLI(t, "--cpuprofile", path, "presets"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("profile %s: %v", path, err)
	}
	// A second profile starts: the first one was stopped.
	second := filepath.Join(t.TempDir(), "cpu2.prof")
	if code, _, stderr := runCLI(t, "--cpuprofile", second, "presets"); code != 0 {
		t.Fatalf("second profile: exit %d: %s", code, stderr)
	}
}
