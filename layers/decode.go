package layers

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/probformer/probformer/graph"
)

// Autoregressive decoding of a Seq2Seq model: greedy search and beam
// search over target ids, starting from <bos> and stopping at <eos>
// (BOSID, EOSID) or a length limit.

// BOSID and EOSID are the ids of <bos> and <eos> in a target vocabulary,
// where decoding starts and stops: those of datasets' vocabularies
// (datasets.BOSID, datasets.EOSID), which layers does not import, as no
// model package imports a data package; cmd/trainer/tasks checks that
// the two agree.
const (
	BOSID = 2
	EOSID = 3
)

//
// Gorgonia graphs have static shapes, so a Translator compiles one
// evaluation program of the full size — rows × srcLen source ids and
// rows × tgtLen target ids — and every decoding step runs it whole: the
// prefix <bos> y1 … yt is fed padded to tgtLen and the logits are
// computed at position t only, the last of the prefix. The causal mask
// makes that position blind to the padding after it, so this is exact. It re-encodes the
// source and recomputes the whole prefix at every step (no key/value
// cache): simple and correct, O(tgtLen) times the cost of incremental
// decoding, which is fine for evaluation of small models.

// Scorer gives the next-token distribution of a translation model.
type Scorer interface {
	// LogProbs returns, for each row r, log p(· | src[r], prefix[r]) over
	// the target vocabulary. prefix[r] starts with <bos>; src[r] holds
	// source ids without padding.
	LogProbs(src, prefixes [][]int) ([][]float64, error)
}

// Hypothesis is one decoded target sentence.
type Hypothesis struct {
	// Tokens are the generated ids, without <bos> and <eos>.
	Tokens []int
	// LogProb is Σ log p of the generated tokens, <eos> included.
	LogProb float64
	// Score is LogProb / LengthPenalty(n, α) with n the number of
	// generated tokens, <eos> included; greedy decoding uses α = 0.
	Score float64
	// Finished reports that the sentence ended with <eos>; false means it
	// was cut at the length limit.
	Finished bool
}

// LengthPenalty is GNMT's length normalisation (Wu et al. 2016, eq. 14,
// without the coverage penalty):
//
//	lp(n) = ((5 + n) / 6)^α
//
// Beam search ranks hypotheses by log P / lp(n); α = 0 ranks by log P and
// α > 0 favours longer sentences. (fairseq divides by n^α instead.)
func LengthPenalty(n int, alpha float64) float64 {
	return math.Pow((5+float64(n))/6, alpha)
}

// Greedy decodes each source sentence by taking the most probable next
// token (the lowest id among ties) until <eos> or maxLen generated tokens,
// <eos> included. All sentences are decoded together, so the scorer must
// accept len(src) rows.
func Greedy(s Scorer, src [][]int, maxLen int) ([]Hypothesis, error) {
	if len(src) == 0 {
		return nil, errors.New("greedy decoding: no source sentence")
	}
	if maxLen <= 0 {
		return nil, fmt.Errorf("greedy decoding: max length %d, want > 0", maxLen)
	}
	hyps := make([]Hypothesis, len(src))
	prefixes := make([][]int, len(src))
	for i := range prefixes {
		prefixes[i] = []int{BOSID}
	}
	for range maxLen {
		var active []int
		for i, h := range hyps {
			if !h.Finished {
				active = append(active, i)
			}
		}
		if len(active) == 0 {
			break
		}
		srcs, pres := make([][]int, len(active)), make([][]int, len(active))
		for j, i := range active {
			srcs[j], pres[j] = src[i], prefixes[i]
		}
		lps, err := s.LogProbs(srcs, pres)
		if err != nil {
			return nil, fmt.Errorf("greedy decoding: %w", err)
		}
		for j, i := range active {
			best := 0
			for v, lp := range lps[j] {
				if lp > lps[j][best] {
					best = v
				}
			}
			hyps[i].LogProb += lps[j][best]
			if best == EOSID {
				hyps[i].Finished = true
				continue
			}
			prefixes[i] = append(prefixes[i], best)
		}
	}
	for i := range hyps {
		hyps[i].Tokens = slices.Clone(prefixes[i][1:])
		hyps[i].Score = hyps[i].LogProb
	}
	return hyps, nil
}

// BeamOptions tunes BeamSearch.
type BeamOptions struct {
	// Size is the number of hypotheses kept at each step.
	Size int
	// MaxLen caps the generated tokens, <eos> included.
	MaxLen int
	// Alpha is the exponent of LengthPenalty; 0 ranks by log-probability.
	Alpha float64
}

// BeamSearch decodes one source sentence keeping the Size most probable
// prefixes at each step, as fairseq does: of all one-token extensions of
// the current prefixes, ranked by log-probability, those ending in <eos>
// among the best Size are set aside as finished, and the best Size others
// continue. The search stops when Size hypotheses have finished or after
// MaxLen tokens, when the unfinished prefixes join the results. It returns
// up to Size hypotheses, best Score first. The scorer must accept Size
// rows (the beams are run as the batch). With Size 1 it is Greedy.
func BeamSearch(s Scorer, src []int, opt BeamOptions) ([]Hypothesis, error) {
	hyps, err := BeamSearchBatch(s, [][]int{src}, opt, opt.Size)
	if err != nil {
		return nil, err
	}
	return hyps[0], nil
}

// BeamSearchBatch is BeamSearch on each of srcs, with the beams of up to
// rows/Size sentences scored together in each call of s (which must accept
// rows rows, at least Size). A sentence's hypotheses are those BeamSearch
// gives it alone, since the scorer scores each row on its own.
func BeamSearchBatch(s Scorer, srcs [][]int, opt BeamOptions, rows int) ([][]Hypothesis, error) {
	if opt.Size <= 0 {
		return nil, fmt.Errorf("beam search: beam size %d, want > 0", opt.Size)
	}
	if opt.MaxLen <= 0 {
		return nil, fmt.Errorf("beam search: max length %d, want > 0", opt.MaxLen)
	}
	if rows < opt.Size {
		return nil, fmt.Errorf("beam search: %d scorer rows, want at least the beam size %d", rows, opt.Size)
	}
	out := make([][]Hypothesis, len(srcs))
	group := rows / opt.Size
	for start := 0; start < len(srcs); start += group {
		searches := make([]*beamSearch, min(group, len(srcs)-start))
		for i := range searches {
			searches[i] = newBeamSearch(srcs[start+i], opt)
		}
		for range opt.MaxLen {
			var srcRows, prefixes [][]int
			var owners []*beamSearch
			for _, b := range searches {
				if b.finished() {
					continue
				}
				for _, bm := range b.beams {
					srcRows, prefixes = append(srcRows, b.src), append(prefixes, bm.prefix)
				}
				owners = append(owners, b)
			}
			if len(owners) == 0 {
				break
			}
			lps, err := s.LogProbs(srcRows, prefixes)
			if err != nil {
				return nil, fmt.Errorf("beam search: %w", err)
			}
			for _, b := range owners {
				n := len(b.beams)
				b.advance(lps[:n])
				lps = lps[n:]
			}
		}
		for i, b := range searches {
			out[start+i] = b.results()
		}
	}
	return out, nil
}

// beamSearch is one sentence's search in progress (see BeamSearch).
type beamSearch struct {
	src   []int
	opt   BeamOptions
	beams []beam // live prefixes; nil once the search has stopped
	done  []Hypothesis
}

// beam is a live prefix <bos> y1 … yt and its log-probability.
type beam struct {
	prefix  []int
	logProb float64
}

func newBeamSearch(src []int, opt BeamOptions) *beamSearch {
	return &beamSearch{src: src, opt: opt, beams: []beam{{prefix: []int{BOSID}}}}
}

func (b *beamSearch) finished() bool { return len(b.beams) == 0 }

// hyp is a hypothesis of the generated tokens (without <bos>).
func (b *beamSearch) hyp(tokens []int, logProb float64, finished bool) Hypothesis {
	n := len(tokens)
	if finished {
		n++
	}
	return Hypothesis{Tokens: slices.Clone(tokens), LogProb: logProb,
		Score: logProb / LengthPenalty(n, b.opt.Alpha), Finished: finished}
}

// advance extends the live prefixes by one token, given each one's
// next-token log-probabilities lps[i].
func (b *beamSearch) advance(lps [][]float64) {
	type candidate struct {
		beam, token int
		logProb     float64
	}
	// Only the best 2·Size extensions can matter: each beam has one <eos>
	// extension, so at most Size of them precede the Size that continue.
	// They are kept in order as the extensions go by (ties to the earlier
	// beam, then the lower id, as in Greedy), instead of sorting all
	// Size·V of them.
	k := 2 * b.opt.Size
	cands := make([]candidate, 0, k+1)
	for i, bm := range b.beams {
		for v, lp := range lps[i] {
			c := candidate{beam: i, token: v, logProb: bm.logProb + lp}
			if len(cands) == k && !(c.logProb > cands[k-1].logProb) {
				continue
			}
			at := len(cands)
			for at > 0 && c.logProb > cands[at-1].logProb {
				at--
			}
			cands = slices.Insert(cands, at, c)
			if len(cands) > k {
				cands = cands[:k]
			}
		}
	}
	var next []beam
	for rank, c := range cands {
		if rank >= b.opt.Size && len(next) == b.opt.Size {
			break
		}
		prefix := b.beams[c.beam].prefix
		if c.token == EOSID {
			if rank < b.opt.Size {
				b.done = append(b.done, b.hyp(prefix[1:], c.logProb, true))
			}
			continue
		}
		if len(next) < b.opt.Size {
			next = append(next, beam{prefix: append(slices.Clone(prefix), c.token), logProb: c.logProb})
		}
	}
	b.beams = next
	if len(b.done) >= b.opt.Size {
		b.beams = nil
	}
}

// results ends the search: the unfinished prefixes join the finished
// hypotheses, and the best Size are returned, best Score first.
func (b *beamSearch) results() []Hypothesis {
	done := b.done
	for _, bm := range b.beams {
		done = append(done, b.hyp(bm.prefix[1:], bm.logProb, false))
	}
	sort.SliceStable(done, func(x, y int) bool { return done[x].Score > done[y].Score })
	if len(done) > b.opt.Size {
		done = done[:b.opt.Size]
	}
	return done
}

// Translator is the Scorer of a Seq2Seq model: one compiled evaluation
// program of rows × srcLen source ids and rows × tgtLen target ids over
// the model's parameters (see the decoding note above). Decoding can then
// generate up to tgtLen tokens, <eos> included.
type Translator struct {
	prog           *graph.Program
	rows, srcLen   int
	tgtLen, vocab  int
	src, tgtIn     []int
	last           []int // each row's last prefix position, r·tgtLen + t
	srcMask, tgtMk []float64
}

// NewTranslator compiles model for decoding with the given parameters.
func NewTranslator(params *graph.Params, model Seq2Seq, rows, srcLen, tgtLen int) (*Translator, error) {
	if rows <= 0 || srcLen <= 0 || tgtLen <= 0 {
		return nil, fmt.Errorf("translator: rows %d, source length %d, target length %d must be positive", rows, srcLen, tgtLen)
	}
	prog, err := graph.Compile(params, func(b *graph.Builder) error {
		h, w, bias := model.Decode(b,
			b.IndexInput("src", rows, srcLen), b.Input("src_mask", rows, srcLen),
			b.IndexInput("tgt_in", rows, tgtLen), b.Input("tgt_mask", rows, tgtLen))
		// Only each row's last prefix position is scored: its decoder
		// output is gathered before the output layer, which so costs
		// one row of tgtLen.
		flat := graph.Reshape(h, rows*tgtLen, model.Config.DModel)
		b.Output("logits", graph.Linear(graph.Embedding(flat, b.IndexInput("last", rows)), w, bias)) // [rows, V]
		return nil
	}, false)
	if err != nil {
		return nil, fmt.Errorf("translator: %w", err)
	}
	return &Translator{
		prog: prog, rows: rows, srcLen: srcLen, tgtLen: tgtLen, vocab: model.Config.TgtVocab,
		src: make([]int, rows*srcLen), srcMask: make([]float64, rows*srcLen), last: make([]int, rows),
		tgtIn: make([]int, rows*tgtLen), tgtMk: make([]float64, rows*tgtLen),
	}, nil
}

// MaxLen is the most tokens the translator can generate, <eos> included.
func (tr *Translator) MaxLen() int { return tr.tgtLen }

// LogProbs implements Scorer for up to rows sentences; unused rows repeat
// the first one.
func (tr *Translator) LogProbs(src, prefixes [][]int) ([][]float64, error) {
	n := len(src)
	if n == 0 || n != len(prefixes) || n > tr.rows {
		return nil, fmt.Errorf("translate: %d sources and %d prefixes for %d rows", n, len(prefixes), tr.rows)
	}
	clear(tr.src)
	clear(tr.srcMask)
	clear(tr.tgtIn)
	clear(tr.tgtMk)
	for r := range tr.rows {
		i := r
		if r >= n {
			i = 0
		}
		s, p := src[i], prefixes[i]
		if len(s) > tr.srcLen {
			return nil, fmt.Errorf("translate: source of %d tokens, room for %d", len(s), tr.srcLen)
		}
		if len(p) == 0 || len(p) > tr.tgtLen {
			return nil, fmt.Errorf("translate: prefix of %d tokens, want 1 to %d", len(p), tr.tgtLen)
		}
		copy(tr.src[r*tr.srcLen:], s)
		copy(tr.tgtIn[r*tr.tgtLen:], p)
		for j := range s {
			tr.srcMask[r*tr.srcLen+j] = 1
		}
		for j := range p {
			tr.tgtMk[r*tr.tgtLen+j] = 1
		}
		tr.last[r] = r*tr.tgtLen + len(p) - 1
	}
	for _, f := range []struct {
		name string
		ids  []int
	}{{"last", tr.last}, {"src", tr.src}, {"tgt_in", tr.tgtIn}} {
		if err := tr.prog.FeedIndices(f.name, f.ids); err != nil {
			return nil, fmt.Errorf("translate: feed %s: %w", f.name, err)
		}
	}
	for _, f := range []struct {
		name string
		v    []float64
	}{{"src_mask", tr.srcMask}, {"tgt_mask", tr.tgtMk}} {
		if err := tr.prog.Feed(f.name, f.v); err != nil {
			return nil, fmt.Errorf("translate: feed %s: %w", f.name, err)
		}
	}
	if err := tr.prog.Run(); err != nil {
		return nil, fmt.Errorf("translate: %w", err)
	}
	logits, _, err := tr.prog.Output("logits") // [rows, V]
	if err != nil {
		return nil, fmt.Errorf("translate: %w", err)
	}
	out := make([][]float64, n)
	for r := range n {
		out[r] = logSoftmax(logits[r*tr.vocab : (r+1)*tr.vocab])
	}
	return out, nil
}

// logSoftmax returns x − log Σ exp(x), computed with the max subtracted.
func logSoftmax(x []float64) []float64 {
	m := slices.Max(x)
	var z float64
	for _, v := range x {
		z += math.Exp(v - m)
	}
	lz := m + math.Log(z)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v - lz
	}
	return out
}
