package configs_test

import (
	"fmt"
	_ "github.com/probformer/probformer/cmd/trainer/tasks"
	"github.com/probformer/probformer/configs"
	"testing"
	"time"
)

// parseDeadline is how long one fuzz case may take; a well-behaved parse
// takes microseconds.
const parseDeadline = time.Second

// FuzzParse: no input makes the parser panic or run long, and whatever it
// accepts survives a round trip.
func FuzzParse(f *testing.F) {
	for _, name := range configs.Presets() {
		data, _ := configs.PresetYAML(name)
		f.Add(data)
	}
	f.Add([]byte("task: [x\n"))
	f.Add([]byte("training: {steps: -1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		done := make(chan string, 1)
		go func() {
			defer func() {
				if r := recover(); r != nil {
					done <- "panic: " + fmt.Sprint(r)
				}
			}()
			cfg, err := configs.Parse(data)
			if err != nil {
				done <- ""
				return
			}
			if _, err := configs.Parse(cfg.YAML()); err != nil {
				done <- "accepted config does not round trip: " + err.Error()
				return
			}
			done <- ""
		}()
		select {
		case msg := <-done:
			if msg != "" {
				t.Fatalf("%s\ninput: %q", msg, data)
			}
		case <-time.After(parseDeadline):
			t.Fatalf("Parse has not returned after %v\ninput: %q", parseDeadline, data)
		}
	})
}
