package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"probformer/graph"
)

func newTranslateCommand() *cobra.Command {
	var path, text string
	var beam int
	cmd := &cobra.Command{
		Use:   "translate",
		Short: "Translate sentences with a seq2seq checkpoint",
		Long: `Translate each line of standard input, or of --text, with a seq2seq
checkpoint (a file, or a run directory whose best checkpoint is used), and
print one translation per line. Standard input is read to its end first.

A line is split on whitespace, and lowercased first if the model was trained
with data.lowercase; words outside the model's vocabulary read as <unk>,
and only the first data.max_len words are read. --beam 1 is greedy
decoding; a wider beam ranks hypotheses with the config's
training.length_penalty. An empty line gives an empty translation.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if beam < 1 {
				return badInput(fmt.Errorf("--beam %d: want a beam of at least 1", beam))
			}
			// The checkpoint first: a bad one fails before anyone types.
			t, task, err := loadSeq2Seq(path)
			if err != nil {
				return err
			}
			input := text
			if !cmd.Flags().Changed("text") {
				data, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return fmt.Errorf("read standard input: %w", err)
				}
				input = string(data)
			}
			lines := splitLines(input)
			srcs := make([][]string, len(lines))
			for i, l := range lines {
				srcs[i] = task.sourceTokens(l)
				if len(srcs[i]) > task.srcLen {
					fmt.Fprintf(cmd.ErrOrStderr(), "trainer: line %d has %d words; the model reads the first %d (data.max_len)\n",
						i+1, len(srcs[i]), task.srcLen)
				}
			}
			out, err := task.translateLines(t.params, srcs, beam)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, words := range out {
				fmt.Fprintln(w, strings.Join(words, " "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "checkpoint", "", "seq2seq checkpoint file or run directory (required)")
	cmd.Flags().StringVar(&text, "text", "", "text to translate, one sentence a line, instead of standard input")
	cmd.Flags().IntVar(&beam, "beam", 1, "beam size; 1 is greedy decoding")
	cmd.MarkFlagRequired("checkpoint")
	return cmd
}

// loadSeq2Seq loads a checkpoint as loadForEval does and returns its
// seq2seq task; a checkpoint of another task is bad input.
func loadSeq2Seq(path string) (*trainer, *seq2seqTask, error) {
	t, file, err := loadForEval(path)
	if err != nil {
		return nil, nil, err
	}
	task, ok := t.task.(*seq2seqTask)
	if !ok {
		return nil, nil, badInput(fmt.Errorf("checkpoint %s: a %s model, not seq2seq", file, t.cfg.Task))
	}
	return t, task, nil
}

// sourceTokens splits a line of input as the training data was: on
// whitespace, lowercased first if data.lowercase is set.
func (t *seq2seqTask) sourceTokens(line string) []string {
	if t.cfg.Data.Lowercase {
		line = strings.ToLower(line)
	}
	return strings.Fields(line)
}

// translateLines is translate for sentences some of which may be empty:
// those have no source to attend to, so they are not decoded and their
// translation is empty.
func (t *seq2seqTask) translateLines(params *graph.Params, srcs [][]string, beam int) ([][]string, error) {
	out := make([][]string, len(srcs))
	var nonEmpty [][]string
	var at []int
	for i, s := range srcs {
		if len(s) > 0 {
			nonEmpty, at = append(nonEmpty, s), append(at, i)
		}
	}
	if len(nonEmpty) == 0 {
		return out, nil
	}
	hyps, err := t.translate(params, nonEmpty, beam)
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		out[i] = hyps[j]
	}
	return out, nil
}
