package graph

import "fmt"

// Evaluate compiles fn as an evaluation graph over params (train=false: no
// noise, no dropout, no gradient), runs it once and returns the values of
// the named outputs, row-major, in the order asked. It is the one-shot form
// of Compile, Run and Output for graphs whose inputs are all constants or
// parameters; a program that is fed and run repeatedly should be compiled
// once with Compile instead.
//
// A build or compile error, a failed run, and an output name that fn did not
// declare are all returned as errors (the last one naming the output).
//
// Example:
//
//	outs, err := graph.Evaluate(graph.NewParams(graph.Float64, 1), func(b *graph.Builder) error {
//		b.Output("y", graph.Exp(b.Constant("x", []int{2}, []float64{0, 1})))
//		return nil
//	}, "y")
//	// outs[0] = [1 e]
func Evaluate(params *Params, fn BuildFunc, outputs ...string) ([][]float64, error) {
	prog, err := Compile(params, fn, false)
	if err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	for _, name := range outputs {
		if _, ok := prog.outputs[name]; !ok {
			return nil, fmt.Errorf("evaluate: no output %q", name)
		}
	}
	if err := prog.Run(); err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	vals := make([][]float64, len(outputs))
	for i, name := range outputs {
		var err error
		if vals[i], _, err = prog.Output(name); err != nil {
			return nil, fmt.Errorf("evaluate: %w", err)
		}
	}
	return vals, nil
}
