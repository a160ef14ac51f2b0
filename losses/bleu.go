package losses

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// BLEU smoothing methods accepted by BLEUOptions.Smooth and ComputeBLEU,
// named as in sacreBLEU.
const (
	// BLEUSmoothExp is sacreBLEU's default, the NIST smoothing of
	// mteval-v13a.pl (Chen and Cherry 2014, method 3).
	BLEUSmoothExp = "exp"
	// BLEUSmoothNone leaves precisions unsmoothed: the score is 0 as soon as
	// one n-gram order has no match.
	BLEUSmoothNone = "none"
)

// BLEUMaxOrder is the largest n-gram order of BLEU.
const BLEUMaxOrder = 4

// bleuLogZero is the log sacreBLEU's my_log gives a zero precision. Using the
// same finite floor instead of −Inf keeps 0·log(0) cases identical.
const bleuLogZero = -9999999999

// BLEUOptions selects the tokenizer and smoothing of CorpusBLEU. The zero
// value is sacreBLEU's default: tokenizer "13a", smoothing "exp".
// Lowercasing and effective order are not supported (case:mixed, eff:no).
type BLEUOptions struct {
	// Tokenize is Tokenizer13a or TokenizerNone; "" means Tokenizer13a.
	Tokenize string
	// Smooth is BLEUSmoothExp or BLEUSmoothNone; "" means BLEUSmoothExp.
	Smooth string
}

// withDefaults returns o with empty fields replaced by sacreBLEU's defaults
// and an error for names it does not know.
func (o BLEUOptions) withDefaults() (BLEUOptions, error) {
	if o.Tokenize == "" {
		o.Tokenize = Tokenizer13a
	}
	if o.Smooth == "" {
		o.Smooth = BLEUSmoothExp
	}
	if o.Tokenize != Tokenizer13a && o.Tokenize != TokenizerNone {
		return o, fmt.Errorf("unknown BLEU tokenizer %q (want %q or %q)", o.Tokenize, Tokenizer13a, TokenizerNone)
	}
	if o.Smooth != BLEUSmoothExp && o.Smooth != BLEUSmoothNone {
		return o, fmt.Errorf("unknown BLEU smoothing %q (want %q or %q)", o.Smooth, BLEUSmoothExp, BLEUSmoothNone)
	}
	return o, nil
}

// Signature returns the sacreBLEU-style reproducibility signature of a BLEU
// score computed with o against nrefs reference streams, for example
//
//	nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:probformer
//
// nrefs < 0 writes "var", sacreBLEU's mark for a number of references that
// varies between sentences. The version field names this implementation
// rather than a sacreBLEU release: its scores match sacreBLEU 2.x for the
// fields listed, but it is not sacreBLEU. Unknown option names are written
// as given.
func (o BLEUOptions) Signature(nrefs int) string {
	tok, smooth := o.Tokenize, o.Smooth
	if tok == "" {
		tok = Tokenizer13a
	}
	if smooth == "" {
		smooth = BLEUSmoothExp
	}
	refs := "var"
	if nrefs >= 0 {
		refs = strconv.Itoa(nrefs)
	}
	return "nrefs:" + refs + "|case:mixed|eff:no|tok:" + tok + "|smooth:" + smooth + "|version:probformer"
}

// BLEUScore is a corpus BLEU score with its sufficient statistics, on the
// 0–100 scale of sacreBLEU.
type BLEUScore struct {
	// Score is BP · exp(¼ Σₙ log pₙ), in [0, 100].
	Score float64
	// Counts[n-1] is the number of clipped matching n-grams; Totals[n-1] the
	// number of hypothesis n-grams.
	Counts, Totals [BLEUMaxOrder]int
	// Precisions[n-1] is the (smoothed) n-gram precision pₙ, in percent.
	Precisions [BLEUMaxOrder]float64
	// BP is the brevity penalty.
	BP float64
	// SysLen is the number of hypothesis tokens; RefLen the effective
	// reference length (closest reference length, summed over sentences).
	SysLen, RefLen int
	// Signature is BLEUOptions.Signature for the run; empty when the score
	// comes from ComputeBLEU.
	Signature string
}

// String formats s as sacreBLEU does, for example
//
//	BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)
func (s BLEUScore) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "BLEU = %.2f ", s.Score)
	for n, p := range s.Precisions {
		if n > 0 {
			b.WriteByte('/')
		}
		fmt.Fprintf(&b, "%.1f", p)
	}
	ratio := 0.0
	if s.RefLen != 0 {
		ratio = float64(s.SysLen) / float64(s.RefLen)
	}
	fmt.Fprintf(&b, " (BP = %.3f ratio = %.3f hyp_len = %d ref_len = %d)", s.BP, ratio, s.SysLen, s.RefLen)
	return b.String()
}

// ComputeBLEU returns BLEU from pooled statistics, as sacreBLEU's
// BLEU.compute_bleu (without effective order):
//
//	BP    = 1                 if c ≥ r,
//	        exp(1 − r/c)      if 0 < c < r,
//	        0                 if c = 0;
//	pₙ    = 100 · correct[n]/total[n];
//	BLEU  = BP · exp(¼ Σₙ log pₙ),
//
// with c = sysLen and r = refLen. The score is 0 when no n-gram of any order
// matches, and log 0 is floored at −9999999999 as sacreBLEU's my_log does,
// so a zero precision gives a score of 0. With BLEUSmoothExp ("exp", the
// default for ""), the k-th order with no match gets pₙ = 100 / (2ᵏ·total[n])
// instead of 0. An order with total[n] = 0 stops the loop: it and the higher
// orders keep pₙ = 0.
func ComputeBLEU(correct, total [BLEUMaxOrder]int, sysLen, refLen int, smooth string) (BLEUScore, error) {
	opt, err := BLEUOptions{Smooth: smooth}.withDefaults()
	if err != nil {
		return BLEUScore{}, err
	}
	s := BLEUScore{Counts: correct, Totals: total, SysLen: sysLen, RefLen: refLen, BP: 1}
	if sysLen < refLen {
		s.BP = 0
		if sysLen > 0 {
			s.BP = math.Exp(1 - float64(refLen)/float64(sysLen))
		}
	}
	anyMatch := false
	for _, c := range correct {
		anyMatch = anyMatch || c != 0
	}
	if !anyMatch {
		return s, nil
	}
	smoothing := 1.0
	for n := range BLEUMaxOrder {
		if total[n] == 0 {
			break
		}
		switch {
		case correct[n] != 0:
			s.Precisions[n] = 100 * float64(correct[n]) / float64(total[n])
		case opt.Smooth == BLEUSmoothExp:
			smoothing *= 2
			s.Precisions[n] = 100 / (smoothing * float64(total[n]))
		}
	}
	sumLog := 0.0
	for _, p := range s.Precisions {
		if p == 0 {
			sumLog += bleuLogZero
		} else {
			sumLog += math.Log(p)
		}
	}
	s.Score = s.BP * math.Exp(sumLog/BLEUMaxOrder)
	return s, nil
}

// CorpusBLEU returns the corpus BLEU of hyps against reference streams refs,
// as sacreBLEU 2.x's corpus_bleu(hyps, refs) with the given tokenizer and
// smoothing. refs[k][i] is the k-th reference of hyps[i]; every stream must
// have len(hyps) entries. An empty reference string means "no k-th reference
// for this sentence" (sacreBLEU's variable number of references); every
// sentence needs at least one non-empty reference.
//
// For each sentence, hypothesis n-gram counts are clipped by the largest
// count of that n-gram in any one reference, and the reference length is the
// reference length closest to the hypothesis length (the shorter on a tie).
// Counts and lengths are summed over the corpus and passed to ComputeBLEU.
func CorpusBLEU(hyps []string, refs [][]string, opt BLEUOptions) (BLEUScore, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return BLEUScore{}, err
	}
	if len(hyps) == 0 {
		return BLEUScore{}, errors.New("corpus BLEU: no hypotheses")
	}
	if len(refs) == 0 {
		return BLEUScore{}, errors.New("corpus BLEU: no reference streams")
	}
	for k, stream := range refs {
		if len(stream) != len(hyps) {
			return BLEUScore{}, fmt.Errorf("corpus BLEU: reference stream %d has %d sentences, hypotheses have %d", k, len(stream), len(hyps))
		}
	}
	var correct, total [BLEUMaxOrder]int
	sysLen, refLen := 0, 0
	nrefs := -2 // -2: not seen yet; -1: varies between sentences
	for i, hyp := range hyps {
		hypTokens, err := Tokenize(hyp, opt.Tokenize)
		if err != nil {
			return BLEUScore{}, err
		}
		maxRef := make(map[string]int)
		var refLens []int
		for _, stream := range refs {
			if stream[i] == "" {
				continue
			}
			refTokens, err := Tokenize(stream[i], opt.Tokenize)
			if err != nil {
				return BLEUScore{}, err
			}
			refLens = append(refLens, len(refTokens))
			for ngram, c := range countNgrams(refTokens) {
				maxRef[ngram] = max(maxRef[ngram], c)
			}
		}
		if len(refLens) == 0 {
			return BLEUScore{}, fmt.Errorf("corpus BLEU: sentence %d has no non-empty reference", i)
		}
		switch nrefs {
		case -2:
			nrefs = len(refLens)
		case -1, len(refLens):
		default:
			nrefs = -1
		}
		sysLen += len(hypTokens)
		refLen += closestRefLen(len(hypTokens), refLens)
		for ngram, c := range countNgrams(hypTokens) {
			n := strings.Count(ngram, ngramSep)
			total[n] += c
			correct[n] += min(c, maxRef[ngram])
		}
	}
	s, err := ComputeBLEU(correct, total, sysLen, refLen, opt.Smooth)
	if err != nil {
		return BLEUScore{}, err
	}
	s.Signature = opt.Signature(nrefs)
	return s, nil
}

// ngramSep joins the tokens of an n-gram into a map key. Tokens come from
// whitespace splitting, so they never contain a space.
const ngramSep = " "

// countNgrams returns the counts of the n-grams of tokens for n = 1..4, keyed
// by the tokens joined with ngramSep.
func countNgrams(tokens []string) map[string]int {
	counts := make(map[string]int)
	for n := 1; n <= BLEUMaxOrder; n++ {
		for i := 0; i+n <= len(tokens); i++ {
			counts[strings.Join(tokens[i:i+n], ngramSep)]++
		}
	}
	return counts
}

// closestRefLen returns the reference length closest to hypLen, the shorter
// one on a tie, as sacreBLEU's _get_closest_ref_len.
func closestRefLen(hypLen int, refLens []int) int {
	dist := func(r int) int {
		if r > hypLen {
			return r - hypLen
		}
		return hypLen - r
	}
	best := refLens[0]
	for _, r := range refLens[1:] {
		if d, bd := dist(r), dist(best); d < bd || (d == bd && r < best) {
			best = r
		}
	}
	return best
}
