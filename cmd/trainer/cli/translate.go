package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/probformer/probformer/cmd/trainer/tasks"
	"github.com/probformer/probformer/configs"
)

// maxTranslateInput bounds what translate reads from standard input,
// which may never end (/dev/zero, yes): every line is kept, with its
// tokens and translation, until all are done.
const maxTranslateInput = 16 << 20

func newTranslateCommand() *cobra.Command {
	var path, text string
	var beam int
	var strict bool
	cmd := &cobra.Command{
		Use:   "translate",
		Short: "Translate sentences with a seq2seq checkpoint",
		Long: `Translate each line of standard input, or of --text, with a seq2seq
checkpoint (a file, or a run directory whose best checkpoint is used), and
print one translation per line. Standard input is read to its end first.
The checkpoint holds the vocabularies and the config: no data file is read.

A line is split on whitespace, and lowercased first if the model was trained
with data.lowercase; only the first data.max_len words are read. Words
outside the model's source vocabulary read as <unk>: each line that has
some is reported on standard error with the words, as

  trainer: line 1: 2 of 5 words unknown to the source vocabulary: eats, apple

and --strict refuses such input instead (exit status 2, nothing
translated). --beam 1 is greedy decoding; a wider beam (at most 64, and at
most the target vocabulary's size) ranks hypotheses with the config's
training.length_penalty. An empty line gives an empty
translation.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if beam < 1 || beam > configs.MaxBeam {
				return badInput(fmt.Errorf("--beam %d: want a beam in [1, %d] (1: greedy decoding)", beam, configs.MaxBeam))
			}
			// The checkpoint first: a bad one fails before anyone types.
			t, task, err := loadSeq2SeqWarn(path, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if words := task.ModelConfig().TgtVocab; beam > words {
				return badInput(fmt.Errorf("--beam %d: want a beam in [1, %d], the model's target vocabulary", beam, words))
			}
			input := text
			if !cmd.Flags().Changed("text") {
				data, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxTranslateInput+1))
				if err != nil {
					return fmt.Errorf("read standard input: %w", err)
				}
				if len(data) > maxTranslateInput {
					return badInput(fmt.Errorf("standard input: more than %d MiB, the most translate reads at once; give it the text in parts", maxTranslateInput>>20))
				}
				input = string(data)
			}
			lines := splitLines(input)
			srcs := make([][]string, len(lines))
			var warnings, unknown []string
			for i, l := range lines {
				srcs[i] = task.SourceTokens(l)
				read := srcs[i]
				if len(read) > task.MaxLen() {
					warnings = append(warnings, fmt.Sprintf("line %d has %d words; the model reads the first %d (data.max_len)",
						i+1, len(read), task.MaxLen()))
					read = read[:task.MaxLen()]
				}
				if unk := task.UnknownWords(read); len(unk) > 0 {
					msg := fmt.Sprintf("line %d: %d of %d words unknown to the source vocabulary: %s",
						i+1, len(unk), len(read), strings.Join(distinct(unk), ", "))
					warnings, unknown = append(warnings, msg), append(unknown, msg)
				}
			}
			if strict && len(unknown) > 0 {
				more := ""
				if len(unknown) > 1 {
					more = fmt.Sprintf(" (and %d more lines with unknown words)", len(unknown)-1)
				}
				return badInput(fmt.Errorf("--strict: %s%s", unknown[0], more))
			}
			for _, msg := range warnings {
				fmt.Fprintf(cmd.ErrOrStderr(), "trainer: %s\n", msg)
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
	cmd.Flags().BoolVar(&strict, "strict", false, "refuse input with words outside the source vocabulary (exit status 2)")
	cmd.MarkFlagRequired("checkpoint")
	return cmd
}

// distinct returns words without repeats, in the order they first occur.
func distinct(words []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range words {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// loadSeq2Seq loads a checkpoint as loadForEval does and returns its
// seq2seq task; a checkpoint of another task is bad input.
func loadSeq2Seq(path string) (*trainer, *tasks.Seq2Seq, error) {
	return loadSeq2SeqWarn(path, os.Stderr)
}

// loadSeq2SeqWarn is loadSeq2Seq with the warning of a checkpoint
// fallback (loadCheckpointWarn) on warn.
func loadSeq2SeqWarn(path string, warn io.Writer) (*trainer, *tasks.Seq2Seq, error) {
	t, file, err := loadCheckpointWarn(path, nil, nil, warn)
	if err != nil {
		return nil, nil, err
	}
	task, ok := t.task.(*tasks.Seq2Seq)
	if !ok {
		return nil, nil, badInput(fmt.Errorf("checkpoint %s: a %s model, not seq2seq: translate and attention work on seq2seq checkpoints only", file, t.cfg.Task))
	}
	return t, task, nil
}
