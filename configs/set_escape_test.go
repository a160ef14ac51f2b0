package configs

import (
	"strings"
	"testing"
)

// TestSetErrorsAreSafeToPrint: a --set error never carries raw bytes that
// are not valid UTF-8 or a terminal's escape sequences, nor a long key or
// value in full; a value that is not UTF-8 says so (it read as "empty").
func TestSetErrorsAreSafeToPrint(t *testing.T) {
	cfg, err := Load(DefaultPreset, nil)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("a", 100_000)
	for _, c := range []struct{ set, want string }{
		{long + "=1", "… (100000 bytes): not a key"},
		{"x\x1b[2J=1", `--set x\x1b[2J: not a key`},
		{"training.steps=" + long, "… (100000 bytes): want"},
		{"seed=a\xff\x1b[31m", `--set seed=a\xff\x1b[31m: not valid UTF-8`},
		{"\x1b[31m", `--set \x1b[31m: want key=value`},
		// a long key within the bound is looked up, not refused as a key
		{strings.Repeat("k", 60) + "=1", "unknown key"},
	} {
		err := cfg.Set(c.set)
		if err == nil {
			t.Errorf("--set %q accepted", c.set)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.want) || strings.ContainsAny(msg, "\x1b\xff") || len(msg) > 300 {
			t.Errorf("--set %.60q: error %q; want %q, printable and short", c.set, msg, c.want)
		}
	}
}
