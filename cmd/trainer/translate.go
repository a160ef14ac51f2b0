package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/probformer/probformer/cmd/trainer/tasks"
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
The checkpoint holds the vocabularies and the config: no data file is read.

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
				srcs[i] = task.SourceTokens(l)
				if len(srcs[i]) > task.MaxLen() {
					fmt.Fprintf(cmd.ErrOrStderr(), "trainer: line %d has %d words; the model reads the first %d (data.max_len)\n",
						i+1, len(srcs[i]), task.MaxLen())
				}
			}
			out, err := task.Translate(t.params, srcs, beam)
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
func loadSeq2Seq(path string) (*trainer, *tasks.Seq2Seq, error) {
	t, file, err := loadForEval(path)
	if err != nil {
		return nil, nil, err
	}
	task, ok := t.task.(*tasks.Seq2Seq)
	if !ok {
		return nil, nil, badInput(fmt.Errorf("checkpoint %s: a %s model, not seq2seq", file, t.cfg.Task))
	}
	return t, task, nil
}
