package datasets

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeTSVFile writes content to dir/name and returns the path.
func writeTSVFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadParallelTSV(t *testing.T) {
	dir := t.TempDir()
	for _, test := range []struct {
		name    string
		content string
		opt     TSVOptions
		want    []Pair
		stats   LoadStats
	}{
		{
			name:    "lf with trailing newline",
			content: "i m now your boss .\tje suis maintenant ton patron .\nhe is lazy .\til est paresseux .\n",
			want: []Pair{
				{Src: []string{"i", "m", "now", "your", "boss", "."}, Tgt: []string{"je", "suis", "maintenant", "ton", "patron", "."}},
				{Src: []string{"he", "is", "lazy", "."}, Tgt: []string{"il", "est", "paresseux", "."}},
			},
			stats: LoadStats{Lines: 2, Pairs: 2},
		},
		{
			name:    "crlf without trailing newline",
			content: "Go.\tVa !\r\nHi.\tSalut !",
			want: []Pair{
				{Src: []string{"Go."}, Tgt: []string{"Va", "!"}},
				{Src: []string{"Hi."}, Tgt: []string{"Salut", "!"}},
			},
			stats: LoadStats{Lines: 2, Pairs: 2},
		},
		{
			name:    "anki attribution column, lowercase, bom, blank lines",
			content: "\ufeffGo.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org\n\n  \nRun!\tCours !\t#906328\n",
			opt:     TSVOptions{Lowercase: true},
			want: []Pair{
				{Src: []string{"go."}, Tgt: []string{"va", "!"}},
				{Src: []string{"run!"}, Tgt: []string{"cours", "!"}},
			},
			stats: LoadStats{Lines: 4, Pairs: 2, Blank: 2},
		},
		{
			name:    "skip malformed",
			content: "a b\tc d\nno tab here\n\tempty source\nempty target\t \nx\ty\n",
			opt:     TSVOptions{SkipMalformed: true},
			want: []Pair{
				{Src: []string{"a", "b"}, Tgt: []string{"c", "d"}},
				{Src: []string{"x"}, Tgt: []string{"y"}},
			},
			stats: LoadStats{Lines: 5, Pairs: 2, Skipped: 3},
		},
		{
			name:    "empty file",
			content: "",
			stats:   LoadStats{},
		},
	} {
		path := writeTSVFile(t, dir, "corpus.tsv", test.content)
		got, stats, err := LoadParallelTSV(path, test.opt)
		if err != nil {
			t.Errorf("%s: %v", test.name, err)
			continue
		}
		if !reflect.DeepEqual(got, test.want) {
			t.Errorf("%s: pairs = %q, want %q", test.name, got, test.want)
		}
		if stats != test.stats {
			t.Errorf("%s: stats = %+v, want %+v", test.name, stats, test.stats)
		}
	}
}

func TestLoadParallelTSVErrors(t *testing.T) {
	dir := t.TempDir()
	for _, test := range []struct {
		name, content, want string
	}{
		{"no tab", "a\tb\nc d\n", "simple.train.tsv: line 2: no tab between source and target"},
		{"empty source", "a\tb\n\n \tb\n", "simple.train.tsv: line 3: empty source"},
		{"empty target", "a\t\r\n", "simple.train.tsv: line 1: empty target"},
	} {
		path := writeTSVFile(t, dir, "simple.train.tsv", test.content)
		_, _, err := LoadParallelTSV(path, TSVOptions{})
		if err == nil || !strings.HasSuffix(err.Error(), test.want) || !strings.HasPrefix(err.Error(), path) {
			t.Errorf("%s: error = %v, want %s", test.name, err, filepath.Join(dir, test.want))
		}
	}
	_, _, err := LoadParallelTSV(filepath.Join(dir, "missing.tsv"), TSVOptions{})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: error = %v, want one wrapping fs.ErrNotExist", err)
	}
}

func TestLoadParallelTSVSplits(t *testing.T) {
	dir := t.TempDir()
	writeTSVFile(t, dir, "toy.train.tsv", "a\tb\nc\td\n")
	writeTSVFile(t, dir, "toy.valid.tsv", "e\tf\n")
	writeTSVFile(t, dir, "toy.test.tsv", "g h\ti j\n\n")
	corpus, stats, err := LoadParallelTSVSplits(dir, "toy", TSVOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := ParallelCorpus{
		Train: []Pair{{Src: []string{"a"}, Tgt: []string{"b"}}, {Src: []string{"c"}, Tgt: []string{"d"}}},
		Valid: []Pair{{Src: []string{"e"}, Tgt: []string{"f"}}},
		Test:  []Pair{{Src: []string{"g", "h"}, Tgt: []string{"i", "j"}}},
	}
	if !reflect.DeepEqual(corpus, want) {
		t.Errorf("corpus = %q, want %q", corpus, want)
	}
	if wantStats := (LoadStats{Lines: 5, Pairs: 4, Blank: 1}); stats != wantStats {
		t.Errorf("stats = %+v, want %+v", stats, wantStats)
	}
	if _, _, err := LoadParallelTSVSplits(dir, "other", TSVOptions{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing splits: error = %v, want one wrapping fs.ErrNotExist", err)
	}
}

// engFraDir is the shared eng-fra corpus (see its README.md), relative to
// this package's directory. It is never copied into the repository.
const engFraDir = "../../shared/data/eng-fra"

func TestLoadEngFra(t *testing.T) {
	if _, err := os.Stat(engFraDir); err != nil {
		t.Skipf("shared eng-fra data not available at %s: %v", engFraDir, err)
	}
	corpus, stats, err := LoadParallelTSVSplits(engFraDir, "simple", TSVOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Sizes and maximum lengths from the corpus README.
	for _, split := range []struct {
		name  string
		pairs []Pair
		want  int
	}{{"train", corpus.Train, 10578}, {"valid", corpus.Valid, 587}, {"test", corpus.Test, 587}} {
		if len(split.pairs) != split.want {
			t.Errorf("%s: %d pairs, want %d", split.name, len(split.pairs), split.want)
		}
		for _, p := range split.pairs {
			if len(p.Src) > 10 || len(p.Tgt) > 10 {
				t.Fatalf("%s: pair %q longer than 10 tokens", split.name, p)
			}
		}
	}
	if want := (LoadStats{Lines: 11752, Pairs: 11752}); stats != want {
		t.Errorf("stats = %+v, want %+v", stats, want)
	}
	first := Pair{
		Src: strings.Fields("i m now your boss ."),
		Tgt: strings.Fields("je suis maintenant ton patron ."),
	}
	if !reflect.DeepEqual(corpus.Train[0], first) {
		t.Errorf("first training pair = %q, want %q", corpus.Train[0], first)
	}
}
