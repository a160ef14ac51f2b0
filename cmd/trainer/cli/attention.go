package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/probformer/probformer/cmd/trainer/internal/figure"
)

func newAttentionCommand() *cobra.Command {
	var path, text, out, head string
	var layer int
	cmd := &cobra.Command{
		Use:   "attention",
		Short: "Draw where a seq2seq model looks while it translates a sentence",
		Long: `Translate --text (one sentence) greedily with a seq2seq checkpoint, then
draw the cross-attention weights of one decoder layer as a PNG heat map:
row i is the i-th output word (the last row <eos>, if the translation
ended), column j the j-th source word (<unk> for a word outside the
vocabulary), and cell (i, j) the weight the decoder put on source word j
while choosing output word i.

--layer is 0-based and defaults to the last decoder layer; --head picks one
attention head (0-based) or mean, the average over heads. The translation is
printed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			headIndex := -1 // the mean over heads
			if head != "mean" {
				h, err := strconv.Atoi(head)
				if err != nil || h < 0 {
					return badInput(fmt.Errorf("--head %q: want a head number from 0, or mean", head))
				}
				headIndex = h
			}
			if strings.ContainsAny(strings.TrimRight(text, "\r\n"), "\r\n") {
				return badInput(fmt.Errorf("--text: one sentence, on one line"))
			}
			t, task, err := loadSeq2SeqWarn(path, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			m := task.ModelConfig()
			if !cmd.Flags().Changed("layer") {
				layer = m.DecLayers - 1
			}
			if layer < 0 || layer >= m.DecLayers {
				return badInput(fmt.Errorf("--layer %d: the decoder has layers 0 to %d", layer, m.DecLayers-1))
			}
			if headIndex >= m.Heads {
				return badInput(fmt.Errorf("--head %d: the model has heads 0 to %d", headIndex, m.Heads-1))
			}
			words := task.SourceTokens(text)
			if len(words) == 0 {
				return badInput(fmt.Errorf("--text: no word to translate"))
			}
			if len(words) > task.MaxLen() {
				return badInput(fmt.Errorf("--text: %d words, the model reads at most %d (data.max_len)", len(words), task.MaxLen()))
			}
			a, err := task.CrossAttention(t.params, words, layer)
			if err != nil {
				return err
			}
			rows, cols, weights := a.Output, a.Source, a.Weights
			grid := meanHeads(weights)
			what := fmt.Sprintf("mean of %d heads", len(weights))
			if headIndex >= 0 {
				grid, what = weights[headIndex], fmt.Sprintf("head %d of %d", headIndex, len(weights))
			}
			// The title stays short: a heat map of a short sentence is only
			// 4 in wide, and a longer title would be cut at both ends.
			title := fmt.Sprintf("decoder layer %d of %d, %s", layer, m.DecLayers, what)
			if err := figure.WriteHeatmap(out, grid, rows, cols, title); err != nil {
				return badInput(err)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintln(w, strings.Join(a.Translation, " "))
			fmt.Fprintf(w, "wrote %s: cross-attention of %s, %d output × %d source words\n", out, title, len(rows), len(cols))
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "checkpoint", "", "seq2seq checkpoint file or run directory (required)")
	cmd.Flags().StringVar(&text, "text", "", "the sentence to translate (required)")
	cmd.Flags().StringVar(&out, "out", "", "PNG file to write (required)")
	cmd.Flags().IntVar(&layer, "layer", 0, "decoder layer, 0-based (default the last)")
	cmd.Flags().StringVar(&head, "head", "mean", "attention head, 0-based, or mean")
	for _, f := range []string{"checkpoint", "text", "out"} {
		cmd.MarkFlagRequired(f)
	}
	return cmd
}

// meanHeads averages weights [H][T][S] over heads.
func meanHeads(weights [][][]float64) [][]float64 {
	mean := make([][]float64, len(weights[0]))
	for i := range mean {
		mean[i] = make([]float64, len(weights[0][i]))
		for _, w := range weights {
			for j, v := range w[i] {
				mean[i][j] += v
			}
		}
		for j := range mean[i] {
			mean[i][j] /= float64(len(weights))
		}
	}
	return mean
}
