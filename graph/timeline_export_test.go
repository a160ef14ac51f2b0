package graph

import (
	"fmt"
	"io"
	"reflect"
)

// SetTimeline sets the test-only switch of program.go: programs compiled
// after it log each instruction to w as it starts. nil turns it off.
func SetTimeline(w io.Writer) { timeline = w }

// ProgramText is the tape machine's program, one instruction a line in
// order (Gorgonia's program.String), so that the n of a logged "PC n" can
// be named.
func ProgramText(p *Program) string {
	m := reflect.ValueOf(p.vm).MethodByName("Prog")
	if !m.IsValid() {
		return ""
	}
	return fmt.Sprint(m.Call(nil)[0].Interface())
}
