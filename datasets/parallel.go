package datasets

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Pair is one sentence pair of a parallel corpus, as tokens.
type Pair struct {
	Src, Tgt []string
}

// ParallelCorpus holds the three splits of a translation task.
type ParallelCorpus struct {
	Train, Valid, Test []Pair
}

// TSVOptions controls LoadParallelTSV.
type TSVOptions struct {
	// Lowercase lowercases both sides before tokenizing.
	Lowercase bool
	// SkipMalformed skips (and counts) lines without a tab or with an empty
	// side instead of failing on the first one.
	SkipMalformed bool
}

// LoadStats counts what LoadParallelTSV read.
type LoadStats struct {
	// Lines is the number of lines in the file, blank ones included.
	Lines int
	// Pairs is the number of pairs returned.
	Pairs int
	// Blank is the number of lines holding only whitespace; they are always
	// skipped.
	Blank int
	// Skipped is the number of malformed lines skipped under
	// TSVOptions.SkipMalformed.
	Skipped int
}

// add returns the field-wise sum of s and o.
func (s LoadStats) add(o LoadStats) LoadStats {
	return LoadStats{
		Lines:   s.Lines + o.Lines,
		Pairs:   s.Pairs + o.Pairs,
		Blank:   s.Blank + o.Blank,
		Skipped: s.Skipped + o.Skipped,
	}
}

// LoadParallelTSV reads a tab-separated parallel corpus, one pair a line:
//
//	source<TAB>target[<TAB>anything]
//
// the format of the Tatoeba/Anki exports (the third column, attribution,
// is ignored). Each side is split on whitespace, after lowercasing if
// opt.Lowercase. LF and CRLF line ends, a missing final newline, a UTF-8
// byte-order mark and blank lines are accepted. A line without a tab or with
// a side that has no token is malformed: LoadParallelTSV returns an error
// "path:line: ..." unless opt.SkipMalformed, which skips it and counts it in
// LoadStats.Skipped.
func LoadParallelTSV(path string, opt TSVOptions) ([]Pair, LoadStats, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, LoadStats{}, fmt.Errorf("load parallel corpus: %w", err)
	}
	defer f.Close()
	pairs, stats, err := readParallelTSV(f, path, opt)
	if err != nil {
		return nil, stats, err
	}
	return pairs, stats, nil
}

// readParallelTSV parses r as LoadParallelTSV does; name prefixes errors.
func readParallelTSV(r io.Reader, name string, opt TSVOptions) ([]Pair, LoadStats, error) {
	var (
		pairs []Pair
		stats LoadStats
	)
	// A bufio.Reader rather than a Scanner: no limit on the line length.
	br := bufio.NewReader(r)
	for {
		line, readErr := br.ReadString('\n')
		if readErr != nil && !errors.Is(readErr, io.EOF) {
			return nil, stats, fmt.Errorf("%s:%d: %w", name, stats.Lines+1, readErr)
		}
		if line == "" && readErr != nil {
			break
		}
		stats.Lines++
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if stats.Lines == 1 {
			line = strings.TrimPrefix(line, "\ufeff")
		}
		if strings.TrimSpace(line) == "" {
			stats.Blank++
		} else if p, err := parseTSVPair(line, opt.Lowercase); err == nil {
			pairs = append(pairs, p)
		} else if opt.SkipMalformed {
			stats.Skipped++
		} else {
			return nil, stats, fmt.Errorf("%s:%d: %w", name, stats.Lines, err)
		}
		if readErr != nil {
			break
		}
	}
	stats.Pairs = len(pairs)
	return pairs, stats, nil
}

// parseTSVPair splits one non-blank line into a pair.
func parseTSVPair(line string, lowercase bool) (Pair, error) {
	fields := strings.SplitN(line, "\t", 3)
	if len(fields) < 2 {
		return Pair{}, errors.New("no tab between source and target")
	}
	if lowercase {
		fields[0], fields[1] = strings.ToLower(fields[0]), strings.ToLower(fields[1])
	}
	p := Pair{Src: strings.Fields(fields[0]), Tgt: strings.Fields(fields[1])}
	switch {
	case len(p.Src) == 0:
		return Pair{}, errors.New("empty source")
	case len(p.Tgt) == 0:
		return Pair{}, errors.New("empty target")
	}
	return p, nil
}

// LoadParallelTSVSplits loads dir/name.train.tsv, dir/name.valid.tsv and
// dir/name.test.tsv (the layout of the shared eng-fra data: name "simple")
// with LoadParallelTSV, and returns the splits with the summed statistics.
func LoadParallelTSVSplits(dir, name string, opt TSVOptions) (ParallelCorpus, LoadStats, error) {
	var (
		corpus ParallelCorpus
		total  LoadStats
	)
	for _, split := range []struct {
		suffix string
		dst    *[]Pair
	}{
		{"train", &corpus.Train},
		{"valid", &corpus.Valid},
		{"test", &corpus.Test},
	} {
		pairs, stats, err := LoadParallelTSV(filepath.Join(dir, name+"."+split.suffix+".tsv"), opt)
		if err != nil {
			return ParallelCorpus{}, total, err
		}
		*split.dst = pairs
		total = total.add(stats)
	}
	return corpus, total, nil
}
