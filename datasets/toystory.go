package datasets

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
)

// Two-sentence stories in the toy language's source side, for BERT's
// next-sentence prediction (Devlin et al. 2019, §3.1 "Task #2: Next
// Sentence Prediction"), where "S′ follows S" must mean something.
//
// A story's first sentence S is one toy clause (sampleToyClause: subject,
// verb, optional object and prepositional phrase). Its second sentence S′
// is another clause, drawn independently, whose subject refers back to
// S's subject and whose tense is S's:
//
//   - half the time the subject carries over as "the NOUN", in S's
//     number ("a big dog saw a cat" → "the dog ran");
//   - half the time a pronoun refers back: "they" for a plural subject;
//     in the singular "he" (man, king), "she" (woman, queen), "he" or
//     "she" at random (child, teacher, farmer) and "it" (the other nouns).
//
// The verb of S′ agrees with its subject, as in the toy grammar. Nothing
// else of S′ depends on S, so what tells a true successor from a random
// second sentence is its signature, (subject reference, tense), against
// S's (noun, number, tense). ToyStoryBestNSPAccuracy is the accuracy of
// the Bayes-optimal classifier on BERT's 50/50 mixture of true successors
// and second sentences of random other stories: 0.9520. A random second
// sentence is consistent with S by chance (the same pronoun class, or the
// same noun and number, and the same tense) often enough that no model can
// reach 100%; always guessing one class scores 50%.

// toyStoryStream is the PCG stream of ToyStories' generator ("toystory").
const toyStoryStream = 0x746f7973746f7279

// The toy grammar's probabilities that the Bayes-optimal accuracy depends
// on (sampleToyClause, sampleToyNP; TestToyStoryBestNSPAccuracy checks them
// against the generator).
const (
	toyPluralProb = 0.4
	toyPastProb   = 0.4
)

// toyPronouns are the pronouns of S′: index 0 to 3.
var toyPronouns = [...]string{"he", "she", "it", "they"}

// toyGender is a singular noun's pronoun choice: the pronoun indexes it
// can take, uniformly.
func toyGender(noun int) []int {
	switch toyNouns[noun].sg {
	case "man", "king":
		return []int{0}
	case "woman", "queen":
		return []int{1}
	case "child", "teacher", "farmer":
		return []int{0, 1}
	}
	return []int{2}
}

// Story is a two-sentence toy story: Second follows First.
type Story struct {
	First, Second []string
}

// StoryCorpus holds a story data set's splits.
type StoryCorpus struct {
	Train, Valid, Test []Story
}

// ToyStoryConfig sizes ToyStories' splits; Seed seeds the generator.
type ToyStoryConfig struct {
	Seed               uint64
	Train, Valid, Test int
}

// ToyStories draws two-sentence stories (see above). No story appears
// twice, within a split or across splits (the duplicates drawn, rare, are
// dropped). As ToyLanguage, the corpus is a function of cfg alone (a PCG
// seeded with (cfg.Seed, "toystory")) and the test split is drawn first,
// then the validation split. First sentences have 2 to 14 tokens, second
// ones 2 to 12.
func ToyStories(cfg ToyStoryConfig) (StoryCorpus, error) {
	if cfg.Train < 0 || cfg.Valid < 0 || cfg.Test < 0 {
		return StoryCorpus{}, fmt.Errorf("toy stories: negative split size (train %d, valid %d, test %d)", cfg.Train, cfg.Valid, cfg.Test)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, toyStoryStream))
	total := cfg.Test + cfg.Valid + cfg.Train
	maxDraws := 100*total + 10000
	seen := make(map[string]bool, total)
	stories := make([]Story, 0, total)
	for draws := 0; len(stories) < total; draws++ {
		if draws == maxDraws {
			return StoryCorpus{}, fmt.Errorf("toy stories: found %d distinct stories in %d draws, want %d", len(stories), draws, total)
		}
		s := sampleToyStory(rng)
		key := strings.Join(s.First, " ") + " | " + strings.Join(s.Second, " ")
		if seen[key] {
			continue
		}
		seen[key] = true
		stories = append(stories, s)
	}
	return StoryCorpus{
		Test:  stories[:cfg.Test:cfg.Test],
		Valid: stories[cfg.Test : cfg.Test+cfg.Valid : cfg.Test+cfg.Valid],
		Train: stories[cfg.Test+cfg.Valid:],
	}, nil
}

// sampleToyStory draws one story.
func sampleToyStory(rng *rand.Rand) Story {
	first := sampleToyClause(rng)
	second := sampleToyClause(rng)
	subj := first.subj
	second.past = first.past
	second.subj = toyNP{det: 0, noun: subj.noun, plural: subj.plural} // "the NOUN"
	src := toySentence{clauses: []toyClause{second}}.source()
	if rng.IntN(2) == 1 {
		pron := 3
		if !subj.plural {
			g := toyGender(subj.noun)
			pron = g[rng.IntN(len(g))]
		}
		src = append([]string{toyPronouns[pron]}, src[2:]...)
	}
	return Story{First: toySentence{clauses: []toyClause{first}}.source(), Second: src}
}

// toySignature is what of a second sentence depends on its first: the
// subject's reference ("the dog", "the dogs", a pronoun) and the tense.
type toySignature struct {
	ref  string
	past bool
}

// toyStorySignature returns the signature of a second sentence, its
// subject reference and tense, and false for a sentence that does not
// start as ToyStories' second sentences do.
func toyStorySignature(second []string) (toySignature, bool) {
	lex := newToyLexicon()
	if len(second) < 2 {
		return toySignature{}, false
	}
	ref, verbAt := second[0], 1
	if second[0] == "the" {
		ref, verbAt = "the "+second[1], 2
	}
	if verbAt >= len(second) {
		return toySignature{}, false
	}
	e, ok := lex[second[verbAt]]
	if !ok || e.class != toyClassVerb {
		return toySignature{}, false
	}
	return toySignature{ref: ref, past: e.past}, true
}

// toySubjectKey is what of a first sentence its successor depends on.
type toySubjectKey struct {
	noun   int
	plural bool
	past   bool
}

// signatureDist is p(signature | key) as ToyStories draws it.
func (k toySubjectKey) signatureDist() map[toySignature]float64 {
	n := toyNouns[k.noun]
	d := map[toySignature]float64{}
	np := "the " + n.sg
	if k.plural {
		np = "the " + n.pl
	}
	d[toySignature{np, k.past}] += 0.5
	if k.plural {
		d[toySignature{"they", k.past}] += 0.5
		return d
	}
	g := toyGender(k.noun)
	for _, p := range g {
		d[toySignature{toyPronouns[p], k.past}] += 0.5 / float64(len(g))
	}
	return d
}

// toySubjectKeys enumerates the keys with their probabilities.
func toySubjectKeys() map[toySubjectKey]float64 {
	keys := map[toySubjectKey]float64{}
	for noun := range toyNouns {
		for _, plural := range []bool{false, true} {
			for _, past := range []bool{false, true} {
				p := 1 / float64(len(toyNouns))
				p *= map[bool]float64{false: 1 - toyPluralProb, true: toyPluralProb}[plural]
				p *= map[bool]float64{false: 1 - toyPastProb, true: toyPastProb}[past]
				keys[toySubjectKey{noun, plural, past}] = p
			}
		}
	}
	return keys
}

// toySignatureMarginal is p(signature) of a random story's second sentence.
func toySignatureMarginal() map[toySignature]float64 {
	m := map[toySignature]float64{}
	for k, pk := range toySubjectKeys() {
		for s, ps := range k.signatureDist() {
			m[s] += pk * ps
		}
	}
	return m
}

// ToyStoryBestNSPAccuracy is the accuracy of the Bayes-optimal
// next-sentence classifier on ToyStories (up to its rare duplicates): half
// the pairs are true successors, half the second sentence of a random
// story, and the best decision says "follows" exactly when the second
// sentence's signature is likelier after S than at random,
//
//	acc = ½ Σ_k p(k) Σ_σ max(p(σ | k), p(σ)),
//
// k the first sentence's (noun, number, tense), σ the second's (subject
// reference, tense). It is about 0.9520.
func ToyStoryBestNSPAccuracy() float64 {
	marginal := toySignatureMarginal()
	var acc float64
	for k, pk := range toySubjectKeys() {
		cond := k.signatureDist()
		for s, ps := range marginal {
			acc += 0.5 * pk * max(cond[s], ps)
		}
	}
	return acc
}

// toyMarginal caches toySignatureMarginal.
var toyMarginal = sync.OnceValue(toySignatureMarginal)

// ToyStoryBayesFollows is the Bayes-optimal next-sentence decision on a
// pair of ToyStories' sentences (first one of its first sentences, second
// one of its second sentences): true when second's signature is likelier
// after first than at random. Its accuracy on NSPPair's pairs is
// ToyStoryBestNSPAccuracy in expectation.
func ToyStoryBayesFollows(first, second []string) (bool, error) {
	return toyStoryBayesFollows(first, second, toyMarginal())
}

func toyStoryBayesFollows(first, second []string, marginal map[toySignature]float64) (bool, error) {
	p := toyParser{lex: newToyLexicon(), toks: first}
	c, err := p.clause()
	if err == nil && p.pos != len(first) {
		err = fmt.Errorf("%q is not one clause", strings.Join(first, " "))
	}
	if err != nil {
		return false, fmt.Errorf("toy stories: %w", err)
	}
	s, ok := toyStorySignature(second)
	if !ok {
		return false, fmt.Errorf("toy stories: %q is no second sentence", strings.Join(second, " "))
	}
	k := toySubjectKey{noun: c.subj.noun, plural: c.subj.plural, past: c.past}
	return k.signatureDist()[s] > marginal[s], nil
}

// NSPPair draws BERT's sentence pair from story i of stories: with
// probability ½ its own second sentence (isNext true), else the second
// sentence of another story drawn uniformly (false). It needs at least
// two stories.
func NSPPair(rng *rand.Rand, stories []Story, i int) (first, second []string, isNext bool) {
	if rng.IntN(2) == 0 || len(stories) < 2 {
		return stories[i].First, stories[i].Second, true
	}
	j := rng.IntN(len(stories) - 1)
	if j >= i {
		j++
	}
	return stories[i].First, stories[j].Second, false
}

// EncodePair lays out a sentence pair as BERT's input, [CLS] a [SEP] b
// [SEP] padded to length: ids, the segment (token type) of every
// position (0 for [CLS], a and the first [SEP]; 1 for b and the last
// [SEP]; 0 on padding) and the mask (1 real, 0 padding). It returns false
// when the pair does not fit.
func EncodePair(a, b []int, cls, sep, length int) (ids, segments []int, mask []float64, ok bool) {
	n := len(a) + len(b) + 3
	if n > length {
		return nil, nil, nil, false
	}
	ids, segments, mask = make([]int, length), make([]int, length), make([]float64, length)
	ids[0] = cls
	copy(ids[1:], a)
	ids[1+len(a)] = sep
	copy(ids[2+len(a):], b)
	ids[n-1] = sep
	for i := range n {
		mask[i] = 1
		if i >= 2+len(a) {
			segments[i] = 1
		}
	}
	return ids, segments, mask, true
}
