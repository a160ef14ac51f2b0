package datasets

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestToyStoryBestNSPAccuracy: the documented best achievable NSP accuracy
// is what the Bayes-optimal rule scores on BERT's 50/50 pairs of generated
// stories, within three standard errors; it also checks the grammar's
// probabilities the exact value assumes.
func TestToyStoryBestNSPAccuracy(t *testing.T) {
	exact := ToyStoryBestNSPAccuracy()
	if math.Abs(exact-0.9520) > 5e-5 {
		t.Errorf("best NSP accuracy %.6f, documented 0.9520", exact)
	}
	corpus, err := ToyStories(ToyStoryConfig{Seed: 3, Train: 40000})
	if err != nil {
		t.Fatal(err)
	}
	marginal := toySignatureMarginal()
	rng := rand.New(rand.NewPCG(4, 5))
	var right, follows float64
	for i := range corpus.Train {
		a, b, isNext := NSPPair(rng, corpus.Train, i)
		if isNext {
			follows++
		}
		guess, err := toyStoryBayesFollows(a, b, marginal)
		if err != nil {
			t.Fatal(err)
		}
		if guess == isNext {
			right++
		}
	}
	n := float64(len(corpus.Train))
	acc := right / n
	se := math.Sqrt(exact * (1 - exact) / n)
	if math.Abs(acc-exact) > 3*se {
		t.Errorf("Bayes rule scores %.4f on %g pairs, exact %.4f (SE %.4f)", acc, n, exact, se)
	}
	if math.Abs(follows/n-0.5) > 3*math.Sqrt(0.25/n) {
		t.Errorf("%.4f of the pairs are true successors, want 0.5", follows/n)
	}
}

// TestToyStories: the splits are deterministic and disjoint, and every
// second sentence is a toy clause whose subject refers back to the first
// sentence's, in its tense.
func TestToyStories(t *testing.T) {
	cfg := ToyStoryConfig{Seed: 1, Train: 300, Valid: 50, Test: 50}
	a, err := ToyStories(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ToyStories(cfg)
	if len(a.Train) != 300 || len(a.Valid) != 50 || len(a.Test) != 50 {
		t.Fatalf("split sizes %d %d %d", len(a.Train), len(a.Valid), len(a.Test))
	}
	seen := map[string]bool{}
	pronouns := map[string]int{}
	for i, s := range slices.Concat(a.Test, a.Valid, a.Train) {
		key := strings.Join(s.First, " ") + "|" + strings.Join(s.Second, " ")
		if seen[key] {
			t.Fatalf("story %q twice", key)
		}
		seen[key] = true
		if i < len(a.Test) && (!slices.Equal(s.First, b.Test[i].First) || !slices.Equal(s.Second, b.Test[i].Second)) {
			t.Fatal("same config, other stories")
		}
		if len(s.First) < 2 || len(s.First) > 14 || len(s.Second) < 2 || len(s.Second) > 12 {
			t.Errorf("story %q: lengths %d and %d", key, len(s.First), len(s.Second))
		}
		first, err := TranslateToy(s.First)
		if err != nil || len(first) == 0 {
			t.Fatalf("first sentence %q: %v", s.First, err)
		}
		sig, ok := toyStorySignature(s.Second)
		if !ok {
			t.Fatalf("second sentence %q has no signature", s.Second)
		}
		p := toyParser{lex: newToyLexicon(), toks: s.First}
		c, _ := p.clause()
		if (toySubjectKey{c.subj.noun, c.subj.plural, c.past}).signatureDist()[sig] == 0 {
			t.Errorf("story %q: %v does not refer back", key, sig)
		}
		second := s.Second
		if s.Second[0] != "the" {
			pronouns[s.Second[0]]++
			noun := toyNouns[c.subj.noun].sg
			if c.subj.plural {
				noun = toyNouns[c.subj.noun].pl
			}
			second = append([]string{"the", noun}, s.Second[1:]...)
		}
		if _, err := TranslateToy(second); err != nil {
			t.Errorf("second sentence %q, its pronoun resolved: %v", s.Second, err)
		}
	}
	for _, p := range toyPronouns {
		if pronouns[p] == 0 {
			t.Errorf("no story uses %q", p)
		}
	}
}

func TestEncodePair(t *testing.T) {
	ids, segs, mask, ok := EncodePair([]int{7, 8}, []int{9}, 2, 3, 8)
	if !ok {
		t.Fatal("pair does not fit")
	}
	if !slices.Equal(ids, []int{2, 7, 8, 3, 9, 3, 0, 0}) || !slices.Equal(segs, []int{0, 0, 0, 0, 1, 1, 0, 0}) ||
		!slices.Equal(mask, []float64{1, 1, 1, 1, 1, 1, 0, 0}) {
		t.Errorf("ids %v segments %v mask %v", ids, segs, mask)
	}
	if _, _, _, ok := EncodePair([]int{7, 8}, []int{9, 9}, 2, 3, 6); ok {
		t.Error("a pair of 7 tokens fits 6")
	}
}
