package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"probformer/cmd/trainer/train"
	"probformer/configs"
	"probformer/graph"
)

func newExportCommand() *cobra.Command {
	var path, format, out string
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write a checkpoint's parameters in a format other tools read",
		Long: `Write a checkpoint's parameters as a safetensors file, which PyTorch, NumPy
and Hugging Face load. Tensors are named by their hierarchical parameter
names (enc.0.mab.q.w); __metadata__ holds the run's config as JSON, the step
and "format": "pt". --checkpoint takes a file or a run directory (its best
checkpoint).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "safetensors" {
				return badInput(fmt.Errorf("--format %q: only safetensors is supported", format))
			}
			file, err := resolveCheckpoint(path, true)
			if err != nil {
				return err
			}
			ck, err := graph.ReadCheckpoint(file)
			if err != nil {
				return badInput(err)
			}
			if err := train.UseAverage(ck); err != nil {
				return badInput(fmt.Errorf("checkpoint %s: %w", file, err))
			}
			cfg, err := configs.Parse(ck.Config)
			if err != nil {
				return badInput(fmt.Errorf("checkpoint %s: config: %w", file, err))
			}
			cfgJSON, err := cfg.JSON()
			if err != nil {
				return err
			}
			meta := map[string]string{"format": "pt", "config": string(cfgJSON), "step": strconv.Itoa(ck.Step), "source": "probformer"}
			tensors := make([]graph.SafeTensor, len(ck.Params))
			for i, p := range ck.Params {
				tensors[i] = graph.SafeTensor{Name: p.Name, Shape: p.Shape}
				if ck.DType == graph.Float32 {
					tensors[i].F32 = make([]float32, len(p.Values))
					for j, v := range p.Values {
						tensors[i].F32[j] = float32(v)
					}
				} else {
					tensors[i].F64 = p.Values
				}
			}
			if err := graph.WriteFileAtomic(out, func(w io.Writer) error {
				return graph.WriteSafetensors(w, tensors, meta)
			}); err != nil {
				return badInput(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d tensors (%s, step %d) to %s\n", len(tensors), ck.DType, ck.Step, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "checkpoint", "", "checkpoint file or run directory (required)")
	cmd.Flags().StringVar(&format, "format", "safetensors", "output format: safetensors")
	cmd.Flags().StringVar(&out, "out", "", "output file (required)")
	cmd.MarkFlagRequired("checkpoint")
	cmd.MarkFlagRequired("out")
	return cmd
}
