package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"probformer/datasets"
	"probformer/graph"
	"probformer/layers"
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
			t, task, err := loadSeq2Seq(path)
			if err != nil {
				return err
			}
			m := task.model.Config
			if !cmd.Flags().Changed("layer") {
				layer = m.DecLayers - 1
			}
			if layer < 0 || layer >= m.DecLayers {
				return badInput(fmt.Errorf("--layer %d: the decoder has layers 0 to %d", layer, m.DecLayers-1))
			}
			if headIndex >= m.Heads {
				return badInput(fmt.Errorf("--head %d: the model has heads 0 to %d", headIndex, m.Heads-1))
			}
			words := task.sourceTokens(text)
			if len(words) == 0 {
				return badInput(fmt.Errorf("--text: no word to translate"))
			}
			if len(words) > task.srcLen {
				return badInput(fmt.Errorf("--text: %d words, the model reads at most %d (data.max_len)", len(words), task.srcLen))
			}
			src := task.src.Encode(words)
			outIDs, weights, err := task.crossAttention(t.params, src, layer)
			if err != nil {
				return err
			}

			rows := make([]string, len(outIDs))
			for i, id := range outIDs {
				rows[i] = task.tgt.Word(id)
			}
			cols := make([]string, len(src))
			for j, id := range src {
				cols[j] = task.src.Word(id)
			}
			grid := meanHeads(weights)
			what := fmt.Sprintf("mean of %d heads", len(weights))
			if headIndex >= 0 {
				grid, what = weights[headIndex], fmt.Sprintf("head %d of %d", headIndex, len(weights))
			}
			// The title stays short: a heat map of a short sentence is only
			// 4 in wide, and a longer title would be cut at both ends.
			title := fmt.Sprintf("decoder layer %d of %d, %s", layer, m.DecLayers, what)
			if err := writeHeatmap(out, grid, rows, cols, title); err != nil {
				return badInput(err)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintln(w, strings.Join(task.tgt.Decode(outIDs), " "))
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

// crossAttention decodes src (ids, no padding) greedily and returns the
// generated ids, <eos> included if the translation ended, and the
// cross-attention weights of decoder layer `layer` behind them:
// weights[h][i][j] is head h's weight on source word j while generating
// token i.
//
// Decoder position i reads <bos> y1 … y_i and predicts token i + 1, so
// the weights come from one teacher-forced pass over <bos> and the
// generated tokens but the last, at the sentence's own lengths; without
// padding there is nothing to mask.
func (t *seq2seqTask) crossAttention(params *graph.Params, src []int, layer int) ([]int, [][][]float64, error) {
	tr, err := t.decoder(params, 1)
	if err != nil {
		return nil, nil, err
	}
	hyps, err := layers.Greedy(tr, [][]int{src}, t.tgtLen)
	if err != nil {
		return nil, nil, err
	}
	out := hyps[0].Tokens
	if hyps[0].Finished {
		out = append(out, datasets.EOSID)
	}
	tgtIn := append([]int{datasets.BOSID}, out[:len(out)-1]...)
	S, T := len(src), len(tgtIn)
	prog, err := graph.Compile(params, func(b *graph.Builder) error {
		w := t.model.CrossAttention(b, b.IndexInput("src", 1, S), b.Input("src_mask", 1, S),
			b.IndexInput("tgt_in", 1, T), b.Input("tgt_mask", 1, T), layer)
		if w == nil {
			return fmt.Errorf("attention kind %q does not expose its weights", t.cfg.Model.Attention.Kind)
		}
		b.Output("weights", w)
		return nil
	}, false)
	if err != nil {
		return nil, nil, fmt.Errorf("build cross-attention graph: %w", err)
	}
	feeds := []error{prog.FeedIndices("src", src), prog.Feed("src_mask", onesSlice(S)),
		prog.FeedIndices("tgt_in", tgtIn), prog.Feed("tgt_mask", onesSlice(T))}
	for _, err := range feeds {
		if err != nil {
			return nil, nil, err
		}
	}
	if err := prog.Run(); err != nil {
		return nil, nil, fmt.Errorf("cross-attention: %w", err)
	}
	flat, shape := prog.Output("weights") // [1, H, T, S]
	if len(shape) != 4 || shape[0] != 1 || shape[2] != T || shape[3] != S {
		return nil, nil, fmt.Errorf("cross-attention: weights of shape %v, want [1 H %d %d]", shape, T, S)
	}
	weights := make([][][]float64, shape[1])
	for h := range weights {
		weights[h] = make([][]float64, T)
		for i := range T {
			at := (h*T + i) * S
			weights[h][i] = flat[at : at+S : at+S]
		}
	}
	return out, weights, nil
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

func onesSlice(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = 1
	}
	return v
}
