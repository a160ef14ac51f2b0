package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/probformer/probformer/graph/fileio"
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
line means that stream has no reference for that sentence. HYP and every
REF must be regular files of at most 256 MiB with lines of at most 64 KiB;
a device, a named pipe or a directory is refused at once (exit status 2).

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

// The caps on bleu's input files: a line of a hypothesis or reference
// file may have at most maxBLEULine bytes and a file at most maxBLEUFile.
// A sentence is a few hundred bytes; the caps only refuse what is not a
// file of sentences (before, `trainer bleu /dev/zero r.txt` read for ever).
const (
	maxBLEULine = 64 << 10
	maxBLEUFile = 256 << 20
)

// readTextLines returns the lines of a text file without their line ends
// (LF or CRLF); a final line without a newline counts, an empty file has
// no line. Only a regular file is read: a device, a named pipe or a
// directory is refused before any byte is read, without blocking (fileio.OpenRegular). A file over
// maxBLEUFile bytes or with a line over maxBLEULine is refused, naming the
// file and the line.
func readTextLines(path string) ([]string, error) {
	f, size, err := fileio.OpenRegular(path)
	if err != nil {
		return nil, fmt.Errorf("bleu: %s: %w", path, err)
	}
	defer f.Close()
	if size > maxBLEUFile {
		return nil, fmt.Errorf("bleu: %s has %d bytes, more than the %d MiB a hypothesis or reference file may have",
			path, size, maxBLEUFile>>20)
	}
	// Read at most one byte past the cap, in case the file grew since the
	// stat.
	r := bufio.NewReaderSize(io.LimitReader(f, maxBLEUFile+1), 64<<10)
	var lines []string
	var read int64
	for n := 1; ; n++ {
		line, err := readLine(r, maxBLEULine+2) // room for the CRLF
		read += int64(len(line))
		if read > maxBLEUFile {
			return nil, fmt.Errorf("bleu: %s has more than the %d MiB a hypothesis or reference file may have", path, maxBLEUFile>>20)
		}
		if errors.Is(err, errLongLine) {
			return nil, fmt.Errorf("bleu: %s: line %d has more than %d bytes (%d KiB a line at most)", path, n, maxBLEULine, maxBLEULine>>10)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("bleu: %s: line %d: %w", path, n, err)
		}
		if len(line) > 0 {
			text := strings.TrimSuffix(strings.TrimSuffix(string(line), "\n"), "\r")
			if len(text) > maxBLEULine {
				return nil, fmt.Errorf("bleu: %s: line %d has more than %d bytes (%d KiB a line at most)", path, n, maxBLEULine, maxBLEULine>>10)
			}
			lines = append(lines, text)
		}
		if err != nil { // io.EOF
			return lines, nil
		}
	}
}

var errLongLine = errors.New("line too long")

// readLine reads one line with its newline, of at most limit bytes
// (errLongLine past it, without reading the rest); at the end of the
// input it returns what is left and io.EOF.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > limit {
			return nil, errLongLine
		}
		line = append(line, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}
