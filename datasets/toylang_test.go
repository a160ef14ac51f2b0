package datasets

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestToyLanguageSplits(t *testing.T) {
	cfg := ToyLangConfig{Seed: 7, Train: 3000, Valid: 300, Test: 300}
	corpus, err := ToyLanguage(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(corpus.Train) != cfg.Train || len(corpus.Valid) != cfg.Valid || len(corpus.Test) != cfg.Test {
		t.Fatalf("split sizes %d/%d/%d, want %d/%d/%d", len(corpus.Train), len(corpus.Valid), len(corpus.Test), cfg.Train, cfg.Valid, cfg.Test)
	}
	// No source sentence in two splits, nor twice in one.
	seen := make(map[string]string)
	srcVocab, tgtVocab := make(map[string]bool), make(map[string]bool)
	lengths := make(map[int]bool)
	for _, split := range []struct {
		name  string
		pairs []Pair
	}{{"train", corpus.Train}, {"valid", corpus.Valid}, {"test", corpus.Test}} {
		for _, p := range split.pairs {
			key := strings.Join(p.Src, " ")
			if prev, dup := seen[key]; dup {
				t.Fatalf("%q is in %s and %s", key, prev, split.name)
			}
			seen[key] = split.name
			if len(p.Src) < ToyMinLen || len(p.Src) > ToyMaxLen || len(p.Tgt) < ToyMinLen || len(p.Tgt) > ToyMaxLen {
				t.Errorf("%s: lengths %d, %d outside [%d, %d]: %q", split.name, len(p.Src), len(p.Tgt), ToyMinLen, ToyMaxLen, key)
			}
			lengths[len(p.Src)] = true
			for _, w := range p.Src {
				srcVocab[w] = true
			}
			for _, w := range p.Tgt {
				tgtVocab[w] = true
			}
			// The target is a function of the source.
			got, err := TranslateToy(p.Src)
			if err != nil {
				t.Fatalf("TranslateToy(%q): %v", key, err)
			}
			if !slices.Equal(got, p.Tgt) {
				t.Fatalf("TranslateToy(%q) = %q, pair has %q", key, got, p.Tgt)
			}
		}
	}
	// Every length of the range occurs.
	for n := ToyMinLen; n <= ToyMaxLen; n++ {
		if !lengths[n] {
			t.Errorf("no sentence of %d tokens", n)
		}
	}
	if len(srcVocab) < 50 || len(tgtVocab) < 50 {
		t.Errorf("vocabularies of %d source and %d target words, want at least 50 each", len(srcVocab), len(tgtVocab))
	}
}

func TestToyLanguageDeterminism(t *testing.T) {
	cfg := ToyLangConfig{Seed: 42, Train: 200, Valid: 50, Test: 50}
	a, err := ToyLanguage(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ToyLanguage(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Error("two corpora of the same config differ")
	}
	other, err := ToyLanguage(ToyLangConfig{Seed: 43, Train: 200, Valid: 50, Test: 50})
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(a.Train, other.Train) {
		t.Error("seeds 42 and 43 give the same training split")
	}
	// Test and validation splits do not depend on the training size.
	bigger, err := ToyLanguage(ToyLangConfig{Seed: 42, Train: 500, Valid: 50, Test: 50})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Test, bigger.Test) || !reflect.DeepEqual(a.Valid, bigger.Valid) {
		t.Error("changing Train changed the test or validation split")
	}
	if !reflect.DeepEqual(a.Train, bigger.Train[:200]) {
		t.Error("a larger training split does not extend the smaller one")
	}
}

func TestToyLanguageErrors(t *testing.T) {
	if _, err := ToyLanguage(ToyLangConfig{Train: -1}); err == nil {
		t.Error("negative split size: no error")
	}
	empty, err := ToyLanguage(ToyLangConfig{})
	if err != nil || len(empty.Train)+len(empty.Valid)+len(empty.Test) != 0 {
		t.Errorf("empty config: %v, %d/%d/%d pairs", err, len(empty.Train), len(empty.Valid), len(empty.Test))
	}
}

func TestTranslateToy(t *testing.T) {
	for _, test := range []struct{ src, want string }{
		// SVO → SOV, prepositions → postpositions, adjective after noun.
		{"the big dog sees a small cat in the house", "lo kado gora un mivu tiki lo kusa ni vida"},
		// Plural: noun -n, adjective -s, verb -n; the past is -ta, and a
		// past source verb has no number but the target verb has.
		{"the big dogs saw some red cats", "lo kadon goras su mivun rusis vidatan"},
		{"the big dog saw some red cats", "lo kado gora su mivun rusis vidata"},
		{"the dogs saw the cat", "lo kadon lo mivu vidatan"},
		{"dogs see cats", "kadon mivun vidan"},
		// Two adjectives are mirrored.
		{"a big red ball waits", "un pora rusi gora bedo"},
		// Intransitive clauses, conjunctions, bare plurals.
		{"dogs sleep and the old king laughed near the river", "kadon doren e lo loto vemo lo voli ra risota"},
		{"every child runs but those tall women swam while a cat waits", "ol piko kuri ma ko selan pemis nupatan ya un mivu bedo"},
		{"many farmers know this queen behind these trees", "mu barin ki nema ke firan be nelin"},
	} {
		got, err := TranslateToy(strings.Fields(test.src))
		if err != nil {
			t.Errorf("TranslateToy(%q): %v", test.src, err)
			continue
		}
		if strings.Join(got, " ") != test.want {
			t.Errorf("TranslateToy(%q) = %q, want %q", test.src, strings.Join(got, " "), test.want)
		}
	}
}

func TestTranslateToyErrors(t *testing.T) {
	for _, test := range []struct{ src, want string }{
		{"", "sentence ends where a noun phrase is expected"},
		{"the dog", "sentence ends where a verb is expected"},
		{"the dog sees", "sentence ends where a noun phrase is expected"},
		{"the dog sees the", "sentence ends where a noun is expected"},
		{"the dog barks", `token 2 "barks": unknown word`},
		{"dog sees the cat", `token 0 "dog": singular noun without determiner`},
		{"a dogs see the cat", `token 1 "dogs": noun does not agree with its determiner`},
		{"these dog sees the cat", `token 1 "dog": noun does not agree with its determiner`},
		{"the dogs sees the cat", `token 2 "sees": verb does not agree with its subject`},
		{"the dog see the cat", `token 2 "see": verb does not agree with its subject`},
		{"the dog sleeps the cat", `token 3 "the": object of the intransitive verb "sleep"`},
		{"the dog sees the cat the", `token 5 "the": want a preposition, a conjunction or the end of the sentence`},
		{"the dog sleeps and", "sentence ends where a noun phrase is expected"},
		{"the dog the cat", `token 2 "the": want a verb`},
		{"the big in", `token 2 "in": want a noun`},
	} {
		got, err := TranslateToy(strings.Fields(test.src))
		if err == nil || !strings.Contains(err.Error(), test.want) {
			t.Errorf("TranslateToy(%q) = %q, %v, want error %q", test.src, got, err, test.want)
		}
	}
}

// The lexicon is one-to-one on both sides: no source or target word form is
// listed twice, and the counts match the package documentation.
func TestToyLexicon(t *testing.T) {
	src := newToyLexicon() // panics on a duplicate source form
	if len(src) != 118 {
		t.Errorf("%d source word forms, want 118", len(src))
	}
	tgt := make(map[string]string)
	add := func(form, from string) {
		if prev, dup := tgt[form]; dup {
			t.Errorf("target form %q comes from %s and %s", form, prev, from)
		}
		tgt[form] = from
	}
	for _, n := range toyNouns {
		add(n.tgt, n.sg)
		add(n.tgt+toyNounPlural, n.pl)
	}
	for _, a := range toyAdjectives {
		add(a.tgt, a.src)
		add(a.tgt+toyAdjPlural, a.src+" (plural)")
	}
	for _, v := range toyVerbs {
		add(v.tgt, v.third)
		add(v.tgt+toyVerbPlural, v.base)
		add(v.tgt+toyVerbPast, v.past+" (singular)")
		add(v.tgt+toyVerbPast+toyVerbPlural, v.past+" (plural)")
	}
	for _, d := range toyDets {
		add(d.tgt, d.src)
	}
	for _, w := range slices.Concat(toyPreps[:], toyConjs[:]) {
		add(w.tgt, w.src)
	}
	if len(tgt) != 146 {
		t.Errorf("%d target word forms, want 146", len(tgt))
	}
}

// The corpus of a seed is part of a run's reproducibility: these are the
// pairs of seed 1, test split first. A change here changes every toy run.
// (The values rely on math/rand/v2's PCG, Float64 and IntN.)
func TestToyLanguageGolden(t *testing.T) {
	corpus, err := ToyLanguage(ToyLangConfig{Seed: 1, Train: 2, Valid: 1, Test: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{
		{"that small horse sees the bird", "ka golu tiki lo tepo vida"},
		{"this teacher helped that bird", "ki dume ka tepo jureta"},
		{"some tables follow many tall books", "su hinan mu lusen pemis sekun"},
		{"the young car followed that teacher", "lo zeki nalu ka dume sekuta"},
		{"the king carried those farmers while a bird runs", "lo loto ko barin potita ya un tepo kuri"},
	}
	got := slices.Concat(corpus.Test, corpus.Valid, corpus.Train)
	for i, w := range want {
		if src, tgt := strings.Join(got[i].Src, " "), strings.Join(got[i].Tgt, " "); src != w[0] || tgt != w[1] {
			t.Errorf("pair %d = %q → %q, want %q → %q", i, src, tgt, w[0], w[1])
		}
	}
}
