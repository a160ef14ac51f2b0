package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/probformer/probformer/losses"
)

func newBLEUCommand() *cobra.Command {
	var tokenize, smooth string
	var scoreOnly bool
	cmd := &cobra.Command{
		Use:   "bleu HYP REF [REF...]",
		Short: "Score a hypothesis file against reference files with corpus BLEU, as sacreBLEU does",
		Long: `Score the hypothesis file HYP, one sentence a line, against one or more
reference files, each one reference stream with as many lines as HYP: line i
of every REF is a reference translation of line i of HYP. An empty reference
line means that stream has no reference for that sentence.

The score is sacreBLEU 2.x's corpus BLEU (case-sensitive, no effective
order) with the chosen tokenizer and smoothing. It is printed as sacreBLEU
prints it, then the signature that makes it reproducible:

  BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)
  signature: nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:probformer

--score-only prints the score alone with two decimals (sacrebleu -b -w 2).`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if tokenize != losses.Tokenizer13a && tokenize != losses.TokenizerNone {
				return badInput(fmt.Errorf("--tokenize %q: want %s or %s", tokenize, losses.Tokenizer13a, losses.TokenizerNone))
			}
			if smooth != losses.BLEUSmoothExp && smooth != losses.BLEUSmoothNone {
				return badInput(fmt.Errorf("--smooth %q: want %s or %s", smooth, losses.BLEUSmoothExp, losses.BLEUSmoothNone))
			}
			hypFile, refFiles := args[0], args[1:]
			hyps, err := readTextLines(hypFile)
			if err != nil {
				return badInput(err)
			}
			if len(hyps) == 0 {
				return badInput(fmt.Errorf("bleu: %s holds no line", hypFile))
			}
			refs := make([][]string, len(refFiles))
			for k, f := range refFiles {
				if refs[k], err = readTextLines(f); err != nil {
					return badInput(err)
				}
				if len(refs[k]) != len(hyps) {
					return badInput(fmt.Errorf("bleu: %s has %d lines, %s has %d", f, len(refs[k]), hypFile, len(hyps)))
				}
			}
			score, err := losses.CorpusBLEU(hyps, refs, losses.BLEUOptions{Tokenize: tokenize, Smooth: smooth})
			if err != nil {
				return badInput(fmt.Errorf("bleu %s: %w", hypFile, err))
			}
			w := cmd.OutOrStdout()
			if scoreOnly {
				fmt.Fprintf(w, "%.2f\n", score.Score)
				return nil
			}
			fmt.Fprintf(w, "%s\nsignature: %s\n", score, score.Signature)
			return nil
		},
	}
	cmd.Flags().StringVar(&tokenize, "tokenize", losses.Tokenizer13a, "tokenizer: 13a (mteval-v13a, sacreBLEU's default) or none (split on spaces)")
	cmd.Flags().StringVar(&smooth, "smooth", losses.BLEUSmoothExp, "smoothing of zero n-gram matches: exp or none")
	cmd.Flags().BoolVarP(&scoreOnly, "score-only", "b", false, "print only the score")
	return cmd
}

// readTextLines returns the lines of a text file without their line ends
// (LF or CRLF); a final line without a newline counts, an empty file has
// no line.
func readTextLines(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bleu: %w", err)
	}
	lines := splitLines(string(data))
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines, nil
}
