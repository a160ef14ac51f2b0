package cli

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/probformer/probformer/graph/ckpt"
)

func newInspectCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect PATH",
		Short: "Print a checkpoint's step, config, metrics and parameters",
		Long: `Print what a checkpoint holds: step, format version, dtype, config, latest
metrics, and every parameter's name, shape, size and L2 norm. PATH is a
checkpoint file or a run directory (its latest checkpoint).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file, err := resolveCheckpoint(args[0], false)
			if err != nil {
				return err
			}
			ck, err := ckpt.ReadCheckpoint(file)
			if err != nil {
				return badInput(err)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "checkpoint: %s\nformat:     version %d\nstep:       %d\ndtype:      %s\nparameters: %d tensors, %d values\n",
				file, ckpt.CheckpointVersion, ck.Step, ck.DType, len(ck.Params), paramCount(ck))
			fmt.Fprintf(w, "\nmetrics:\n")
			keys := make([]string, 0, len(ck.Metrics))
			for k := range ck.Metrics {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				fmt.Fprintf(w, "  %-20s %.6g\n", k, ck.Metrics[k])
			}
			fmt.Fprintf(w, "\nconfig:\n")
			if len(bytes.TrimSpace(ck.Config)) == 0 {
				fmt.Fprintf(w, "  none (a library run that left train.Settings.Config empty: eval and export cannot read it)\n")
			}
			for _, line := range splitLines(string(ck.Config)) {
				fmt.Fprintf(w, "  %s\n", line)
			}
			fmt.Fprintf(w, "\nparameters:\n")
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "  name\tshape\tsize\tnorm")
			for _, p := range ck.Params {
				var sq float64
				for _, v := range p.Values {
					sq += v * v
				}
				fmt.Fprintf(tw, "  %s\t%v\t%d\t%.6g\n", p.Name, p.Shape, len(p.Values), math.Sqrt(sq))
			}
			return tw.Flush()
		},
	}
}

func paramCount(ck *ckpt.Checkpoint) int {
	n := 0
	for _, p := range ck.Params {
		n += len(p.Values)
	}
	return n
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i, c := range s {
		if c == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
