package datasets

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Length bounds of toy sentences, in tokens, on both sides.
const (
	ToyMinLen = 3
	ToyMaxLen = 15
)

// toyLangStream is the PCG stream of ToyLanguage's generator ("toylang").
const toyLangStream = 0x746f796c616e67

// Target suffixes. Stems are four letters (consonant-vowel-consonant-vowel)
// and function words one or two, so a suffixed form never equals another
// word (TestToyLexicon checks it).
const (
	toyNounPlural = "n"  // noun of a plural noun phrase
	toyAdjPlural  = "s"  // adjective of a plural noun phrase
	toyVerbPast   = "ta" // past tense, before the number suffix
	toyVerbPlural = "n"  // verb of a plural subject
)

// toyNumber is the grammatical number a determiner allows.
type toyNumber int

const (
	toyAnyNumber toyNumber = iota
	toySingular
	toyPlural
)

// toyNoun is a noun: source singular and plural, target stem.
type toyNoun struct{ sg, pl, tgt string }

// toyVerb is a verb: source base form (plural present), third-person
// singular present and past, target stem.
type toyVerb struct {
	base, third, past, tgt string
	transitive             bool
}

// toyDet is a determiner and the number of the nouns it goes with.
type toyDet struct {
	src, tgt string
	number   toyNumber
}

// toyWord is an uninflected word: adjective, preposition or conjunction.
type toyWord struct{ src, tgt string }

var toyNouns = [...]toyNoun{
	{"dog", "dogs", "kado"}, {"cat", "cats", "mivu"}, {"bird", "birds", "tepo"},
	{"horse", "horses", "golu"}, {"man", "men", "rano"}, {"woman", "women", "sela"},
	{"child", "children", "piko"}, {"teacher", "teachers", "dume"}, {"farmer", "farmers", "bari"},
	{"king", "kings", "loto"}, {"queen", "queens", "nema"}, {"house", "houses", "kusa"},
	{"tree", "trees", "fira"}, {"river", "rivers", "voli"}, {"garden", "gardens", "tami"},
	{"book", "books", "luse"}, {"ball", "balls", "pora"}, {"car", "cars", "zeki"},
	{"city", "cities", "mado"}, {"table", "tables", "hina"},
}

var toyAdjectives = [...]toyWord{
	{"big", "gora"}, {"small", "tiki"}, {"old", "vemo"}, {"young", "nalu"},
	{"red", "rusi"}, {"green", "lepa"}, {"happy", "joki"}, {"sad", "mure"},
	{"quick", "fesu"}, {"slow", "dova"}, {"tall", "pemi"}, {"dark", "nori"},
}

var toyVerbs = [...]toyVerb{
	{"see", "sees", "saw", "vida", true},
	{"like", "likes", "liked", "sima", true},
	{"find", "finds", "found", "tovu", true},
	{"follow", "follows", "followed", "seku", true},
	{"help", "helps", "helped", "jure", true},
	{"watch", "watches", "watched", "mire", true},
	{"carry", "carries", "carried", "poti", true},
	{"call", "calls", "called", "voka", true},
	{"know", "knows", "knew", "neli", true},
	{"take", "takes", "took", "rako", true},
	{"sleep", "sleeps", "slept", "dore", false},
	{"run", "runs", "ran", "kuri", false},
	{"sing", "sings", "sang", "kanu", false},
	{"wait", "waits", "waited", "bedo", false},
	{"swim", "swims", "swam", "nupa", false},
	{"laugh", "laughs", "laughed", "riso", false},
}

var toyDets = [...]toyDet{
	{"the", "lo", toyAnyNumber},
	{"a", "un", toySingular}, {"this", "ki", toySingular},
	{"that", "ka", toySingular}, {"every", "ol", toySingular},
	{"these", "ke", toyPlural}, {"those", "ko", toyPlural},
	{"some", "su", toyPlural}, {"many", "mu", toyPlural},
}

var toyPreps = [...]toyWord{
	{"in", "ni"}, {"on", "po"}, {"near", "ra"},
	{"under", "si"}, {"behind", "be"}, {"with", "do"},
}

var toyConjs = [...]toyWord{{"and", "e"}, {"but", "ma"}, {"while", "ya"}}

// toyNP is a noun phrase; det is -1 for a bare plural.
type toyNP struct {
	det    int
	adjs   []int
	noun   int
	plural bool
}

// toyClause is subject, verb, optional object and optional prepositional
// phrase (prep -1 for none).
type toyClause struct {
	subj toyNP
	verb int
	past bool
	obj  toyNP // used when toyVerbs[verb].transitive
	prep int
	pp   toyNP
}

// toySentence is clauses joined by conjunctions: conjs[i] joins clauses i
// and i+1.
type toySentence struct {
	clauses []toyClause
	conjs   []int
}

// source returns the source tokens of s.
func (s toySentence) source() []string {
	var out []string
	for i, c := range s.clauses {
		if i > 0 {
			out = append(out, toyConjs[s.conjs[i-1]].src)
		}
		out = c.subj.appendSource(out)
		v := toyVerbs[c.verb]
		switch {
		case c.past:
			out = append(out, v.past)
		case c.subj.plural:
			out = append(out, v.base)
		default:
			out = append(out, v.third)
		}
		if v.transitive {
			out = c.obj.appendSource(out)
		}
		if c.prep >= 0 {
			out = append(out, toyPreps[c.prep].src)
			out = c.pp.appendSource(out)
		}
	}
	return out
}

// target returns the translation of s: per clause, subject, object,
// postpositional phrase, verb.
func (s toySentence) target() []string {
	var out []string
	for i, c := range s.clauses {
		if i > 0 {
			out = append(out, toyConjs[s.conjs[i-1]].tgt)
		}
		out = c.subj.appendTarget(out)
		v := toyVerbs[c.verb]
		if v.transitive {
			out = c.obj.appendTarget(out)
		}
		if c.prep >= 0 {
			out = c.pp.appendTarget(out)
			out = append(out, toyPreps[c.prep].tgt)
		}
		verb := v.tgt
		if c.past {
			verb += toyVerbPast
		}
		if c.subj.plural {
			verb += toyVerbPlural
		}
		out = append(out, verb)
	}
	return out
}

// appendSource appends "[det] adj... noun".
func (np toyNP) appendSource(out []string) []string {
	if np.det >= 0 {
		out = append(out, toyDets[np.det].src)
	}
	for _, a := range np.adjs {
		out = append(out, toyAdjectives[a].src)
	}
	if np.plural {
		return append(out, toyNouns[np.noun].pl)
	}
	return append(out, toyNouns[np.noun].sg)
}

// appendTarget appends "[det] noun adj..." with the adjectives mirrored and
// plural suffixes on noun and adjectives.
func (np toyNP) appendTarget(out []string) []string {
	if np.det >= 0 {
		out = append(out, toyDets[np.det].tgt)
	}
	nounSuffix, adjSuffix := "", ""
	if np.plural {
		nounSuffix, adjSuffix = toyNounPlural, toyAdjPlural
	}
	out = append(out, toyNouns[np.noun].tgt+nounSuffix)
	for i := len(np.adjs) - 1; i >= 0; i-- {
		out = append(out, toyAdjectives[np.adjs[i]].tgt+adjSuffix)
	}
	return out
}

// ToyLangConfig sizes the splits of ToyLanguage.
type ToyLangConfig struct {
	// Seed selects the sentences; the language itself never changes.
	Seed uint64
	// Train, Valid and Test are the numbers of pairs of each split.
	Train, Valid, Test int
}

// ToyLanguage returns cfg.Train, cfg.Valid and cfg.Test pairs of the toy
// translation language, a fixed synthetic language pair for the seq2seq-toy
// preset: a small English-like source grammar and a target language that
// differs in three ways a model has to learn.
//
//   - Word order: the source is SVO with prepositions and adjectives before
//     the noun; the target is SOV with postpositions and adjectives after
//     the noun, in mirrored order: "the big dog sees a small cat in the
//     house" → "lo kado gora un mivu tiki lo kusa ni vida".
//   - Agreement: the target marks plural nouns (-n), adjectives of plural
//     nouns (-s) and verbs of plural subjects (-n), also in the past tense
//     (-ta), where the source verb shows no number: "the dogs saw the cat"
//     → "lo kadon lo mivu vidatan".
//   - Vocabulary: every source word form has one target word form
//     (two-syllable stems for content words, one syllable for function
//     words): 118 source and 146 target forms in all.
//
// A sentence has one to three clauses joined by "and", "but" or "while"; a
// clause is a subject, a verb, an object (for transitive verbs only) and an
// optional prepositional phrase; a noun phrase is an optional determiner
// (required in the singular), up to two adjectives and a noun. Sentences
// have ToyMinLen to ToyMaxLen tokens, and a target has as many tokens as its
// source. The translation is a function of the source tokens (TranslateToy
// parses them and the grammar is unambiguous), so a model can reach BLEU 100.
//
// No source sentence appears twice, within a split or across splits. The
// corpus is a function of cfg alone: its generator is a PCG seeded with
// (cfg.Seed, "toylang"), independent of the training run's RNG, so resuming a
// run rebuilds the same data. The test split is drawn first and the
// validation split second, so they do not change when only cfg.Train does.
func ToyLanguage(cfg ToyLangConfig) (ParallelCorpus, error) {
	if cfg.Train < 0 || cfg.Valid < 0 || cfg.Test < 0 {
		return ParallelCorpus{}, fmt.Errorf("toy language: negative split size (train %d, valid %d, test %d)", cfg.Train, cfg.Valid, cfg.Test)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, toyLangStream))
	total := cfg.Test + cfg.Valid + cfg.Train
	// The language has billions of sentences; the limit only stops a
	// request for more than the generator can find.
	maxDraws := 100*total + 10000
	seen := make(map[string]bool, total)
	pairs := make([]Pair, 0, total)
	for draws := 0; len(pairs) < total; draws++ {
		if draws == maxDraws {
			return ParallelCorpus{}, fmt.Errorf("toy language: found %d distinct sentences in %d draws, want %d", len(pairs), draws, total)
		}
		s := sampleToySentence(rng)
		src := s.source()
		key := strings.Join(src, " ")
		if len(src) < ToyMinLen || len(src) > ToyMaxLen || seen[key] {
			continue
		}
		seen[key] = true
		pairs = append(pairs, Pair{Src: src, Tgt: s.target()})
	}
	return ParallelCorpus{
		Test:  pairs[:cfg.Test:cfg.Test],
		Valid: pairs[cfg.Test : cfg.Test+cfg.Valid : cfg.Test+cfg.Valid],
		Train: pairs[cfg.Test+cfg.Valid:],
	}, nil
}

// sampleToySentence draws a sentence from the toy grammar, of any length.
func sampleToySentence(rng *rand.Rand) toySentence {
	n := 1
	switch r := rng.Float64(); {
	case r < 0.05:
		n = 3
	case r < 0.35:
		n = 2
	}
	var s toySentence
	for i := range n {
		if i > 0 {
			s.conjs = append(s.conjs, rng.IntN(len(toyConjs)))
		}
		s.clauses = append(s.clauses, sampleToyClause(rng))
	}
	return s
}

func sampleToyClause(rng *rand.Rand) toyClause {
	c := toyClause{subj: sampleToyNP(rng), past: rng.Float64() < 0.4, prep: -1}
	transitive := rng.Float64() < 0.65
	var verbs []int
	for i, v := range toyVerbs {
		if v.transitive == transitive {
			verbs = append(verbs, i)
		}
	}
	c.verb = verbs[rng.IntN(len(verbs))]
	if transitive {
		c.obj = sampleToyNP(rng)
	}
	if rng.Float64() < 0.35 {
		c.prep = rng.IntN(len(toyPreps))
		c.pp = sampleToyNP(rng)
	}
	return c
}

func sampleToyNP(rng *rand.Rand) toyNP {
	np := toyNP{noun: rng.IntN(len(toyNouns)), plural: rng.Float64() < 0.4}
	switch r := rng.Float64(); {
	case r < 0.12:
		np.adjs = []int{rng.IntN(len(toyAdjectives))}
		if second := rng.IntN(len(toyAdjectives) - 1); second >= np.adjs[0] {
			np.adjs = append(np.adjs, second+1) // two different adjectives
		} else {
			np.adjs = append(np.adjs, second)
		}
	case r < 0.45:
		np.adjs = []int{rng.IntN(len(toyAdjectives))}
	}
	// Determiners that agree with the noun: "the" and four of each number;
	// a plural may also be bare ("dogs").
	var dets []int
	for i, d := range toyDets {
		if d.number == toyAnyNumber || (d.number == toyPlural) == np.plural {
			dets = append(dets, i)
		}
	}
	np.det = dets[rng.IntN(len(dets))]
	if np.plural && rng.Float64() < 0.25 {
		np.det = -1
	}
	return np
}

// TranslateToy returns the target-language translation of a toy source
// sentence, or an error naming the first token that the toy grammar does not
// allow (unknown word, missing determiner, determiner or verb that does not
// agree with its noun, object of an intransitive verb, ...). For every pair
// of ToyLanguage, TranslateToy(p.Src) equals p.Tgt.
func TranslateToy(src []string) ([]string, error) {
	p := toyParser{lex: newToyLexicon(), toks: src}
	s, err := p.sentence()
	if err != nil {
		return nil, fmt.Errorf("toy language: %w", err)
	}
	return s.target(), nil
}

// toyWordClass is the part of speech of a source word.
type toyWordClass int

const (
	toyClassNoun toyWordClass = iota
	toyClassAdj
	toyClassVerb
	toyClassDet
	toyClassPrep
	toyClassConj
)

// toyEntry is a source word form: its class, its index in the class's
// table and, for nouns and verbs, its form.
type toyEntry struct {
	class  toyWordClass
	index  int
	plural bool // noun: plural form; verb: base (plural present) form
	third  bool // verb: third-person singular present
	past   bool // verb: past
}

// newToyLexicon indexes every source word form. The tables are fixed, so a
// form listed twice is a bug in this file and panics.
func newToyLexicon() map[string]toyEntry {
	lex := make(map[string]toyEntry)
	add := func(w string, e toyEntry) {
		if _, dup := lex[w]; dup {
			panic("toy language: source word " + w + " listed twice")
		}
		lex[w] = e
	}
	for i, n := range toyNouns {
		add(n.sg, toyEntry{class: toyClassNoun, index: i})
		add(n.pl, toyEntry{class: toyClassNoun, index: i, plural: true})
	}
	for i, v := range toyVerbs {
		add(v.base, toyEntry{class: toyClassVerb, index: i, plural: true})
		add(v.third, toyEntry{class: toyClassVerb, index: i, third: true})
		add(v.past, toyEntry{class: toyClassVerb, index: i, past: true})
	}
	for i, w := range toyAdjectives {
		add(w.src, toyEntry{class: toyClassAdj, index: i})
	}
	for i, d := range toyDets {
		add(d.src, toyEntry{class: toyClassDet, index: i})
	}
	for i, w := range toyPreps {
		add(w.src, toyEntry{class: toyClassPrep, index: i})
	}
	for i, w := range toyConjs {
		add(w.src, toyEntry{class: toyClassConj, index: i})
	}
	return lex
}

// toyParser is a recursive-descent parser of the toy grammar:
//
//	sentence = clause { conj clause }
//	clause   = np verb [ np ] [ prep np ]   (object iff the verb is transitive)
//	np       = [ det ] { adj } noun          (no det only for plurals)
//
// Every word form belongs to one class, so one token of lookahead decides
// every choice and the parse is unique.
type toyParser struct {
	lex  map[string]toyEntry
	toks []string
	pos  int // index of the next token
}

// peek returns the entry of the next token; ok is false at the end.
func (p *toyParser) peek() (e toyEntry, ok bool, err error) {
	if p.pos == len(p.toks) {
		return toyEntry{}, false, nil
	}
	e, known := p.lex[p.toks[p.pos]]
	if !known {
		return toyEntry{}, true, p.errAt(p.pos, "unknown word")
	}
	return e, true, nil
}

// next returns the entry of the next token, which must be of class want,
// and advances.
func (p *toyParser) next(want toyWordClass, what string) (toyEntry, error) {
	e, ok, err := p.peek()
	switch {
	case err != nil:
		return e, err
	case !ok:
		return e, fmt.Errorf("sentence ends where %s is expected", what)
	case e.class != want:
		return e, p.errAt(p.pos, "want "+what)
	}
	p.pos++
	return e, nil
}

func (p *toyParser) errAt(i int, msg string) error {
	return fmt.Errorf("token %d %q: %s", i, p.toks[i], msg)
}

func (p *toyParser) sentence() (toySentence, error) {
	var s toySentence
	for {
		c, err := p.clause()
		if err != nil {
			return s, err
		}
		s.clauses = append(s.clauses, c)
		if p.pos == len(p.toks) {
			return s, nil
		}
		conj, err := p.next(toyClassConj, "a conjunction or the end of the sentence")
		if err != nil {
			return s, err
		}
		s.conjs = append(s.conjs, conj.index)
	}
}

func (p *toyParser) clause() (toyClause, error) {
	c := toyClause{prep: -1}
	var err error
	if c.subj, err = p.np(); err != nil {
		return c, err
	}
	v, err := p.next(toyClassVerb, "a verb")
	if err != nil {
		return c, err
	}
	if (v.third && c.subj.plural) || (v.plural && !c.subj.plural) {
		return c, p.errAt(p.pos-1, "verb does not agree with its subject")
	}
	c.verb, c.past = v.index, v.past
	transitive := toyVerbs[c.verb].transitive
	if transitive {
		if c.obj, err = p.np(); err != nil {
			return c, err
		}
	}
	e, ok, err := p.peek()
	switch {
	case err != nil || !ok:
		return c, err
	case e.class == toyClassPrep:
		p.pos++
		c.prep = e.index
		c.pp, err = p.np()
		return c, err
	case e.class == toyClassConj:
		return c, nil
	case !transitive && (e.class == toyClassDet || e.class == toyClassAdj || e.class == toyClassNoun):
		return c, p.errAt(p.pos, "object of the intransitive verb "+strconv.Quote(toyVerbs[c.verb].base))
	}
	return c, p.errAt(p.pos, "want a preposition, a conjunction or the end of the sentence")
}

func (p *toyParser) np() (toyNP, error) {
	np := toyNP{det: -1}
	e, ok, err := p.peek()
	if err != nil || !ok {
		return np, cmp.Or(err, errors.New("sentence ends where a noun phrase is expected"))
	}
	detNumber := toyAnyNumber
	if e.class == toyClassDet {
		p.pos++
		np.det, detNumber = e.index, toyDets[e.index].number
	}
	for {
		if e, ok, err = p.peek(); err != nil || !ok || e.class != toyClassAdj {
			break
		}
		p.pos++
		np.adjs = append(np.adjs, e.index)
	}
	noun, err := p.next(toyClassNoun, "a noun")
	if err != nil {
		return np, err
	}
	np.noun, np.plural = noun.index, noun.plural
	switch {
	case np.det < 0 && !np.plural:
		return np, p.errAt(p.pos-1, "singular noun without determiner")
	case detNumber == toySingular && np.plural, detNumber == toyPlural && !np.plural:
		return np, p.errAt(p.pos-1, "noun does not agree with its determiner")
	}
	return np, nil
}
