package datasets

import (
	"fmt"
	"math/rand/v2"
)

// Masked-language-model corruption of BERT (Devlin et al. 2019, §3.1
// "Task #1: Masked LM"): each word is chosen for prediction with
// probability p (15%); a chosen word is replaced by [MASK] 80% of the
// time, by a random word 10% of the time and left unchanged 10% of the
// time, and the model predicts the original word at every chosen
// position.

// DefaultMaskProb is BERT's share of predicted tokens.
const DefaultMaskProb = 0.15

// NumSpecial is the number of special tokens at the start of every Vocab
// (<pad>, <unk>, <bos>, <eos>); word ids start here.
const NumSpecial = len(specialTokens)

// MaskOptions configures MaskTokens.
type MaskOptions struct {
	// Prob is the probability that a word is chosen; 0 means
	// DefaultMaskProb.
	Prob float64
	// MaskID is the id of [MASK]. A masked LM uses a Vocab's Size() as
	// MaskID, one id past the words, so the vocabulary's own ids (and a
	// seq2seq model's that shares it) do not change.
	MaskID int
	// Vocab is the number of ids of the vocabulary, specials included;
	// random replacements are drawn uniformly from the words
	// [NumSpecial, Vocab).
	Vocab int
	// AtLeastOne chooses one eligible word uniformly when the Bernoulli
	// draws chose none, so that every sentence with a word contributes to
	// the loss. It raises the share of chosen words of short sentences
	// above Prob.
	AtLeastOne bool
}

// MaskedBatch is a batch corrupted for masked-LM training, every slice
// row-major [B, Len].
type MaskedBatch struct {
	B, Len int
	// Inputs are the corrupted ids the model reads.
	Inputs []int
	// Targets are the original ids; the model predicts them where
	// LossMask is 1.
	Targets []int
	// Mask is 1 on real tokens (the chosen ones included), 0 on padding:
	// the attention mask.
	Mask []float64
	// LossMask is 1 at the chosen positions, 0 elsewhere.
	LossMask []float64
	// Kind records what happened at each chosen position (Kept
	// elsewhere).
	Kind []Corruption
}

// Corruption is what MaskTokens did to a position.
type Corruption uint8

// The corruptions of a position.
const (
	Kept      Corruption = iota // not chosen
	Masked                      // chosen, replaced by [MASK]
	Replaced                    // chosen, replaced by a random word
	Unchanged                   // chosen, left as it was
)

// MaskTokens corrupts a batch of encoded sentences, ids and mask [B, L]
// row-major (as Batch.Src and Batch.SrcMask), drawing from rng. Only
// words are eligible: positions with mask 1 and an id ≥ NumSpecial
// (padding, <unk>, <bos> and <eos> are never chosen). The draws are made
// in row-major order, so a seeded rng gives the same batch every time.
func MaskTokens(rng *rand.Rand, ids []int, mask []float64, length int, opt MaskOptions) (MaskedBatch, error) {
	if length <= 0 || len(ids)%length != 0 || len(mask) != len(ids) {
		return MaskedBatch{}, fmt.Errorf("mask tokens: %d ids and %d mask values are not rows of length %d", len(ids), len(mask), length)
	}
	if opt.Prob == 0 {
		opt.Prob = DefaultMaskProb
	}
	if opt.Prob < 0 || opt.Prob > 1 {
		return MaskedBatch{}, fmt.Errorf("mask tokens: probability %g outside [0, 1]", opt.Prob)
	}
	if opt.Vocab <= NumSpecial {
		return MaskedBatch{}, fmt.Errorf("mask tokens: vocabulary of %d ids has no word", opt.Vocab)
	}
	if opt.MaskID < opt.Vocab {
		return MaskedBatch{}, fmt.Errorf("mask tokens: [MASK] id %d must lie past the %d vocabulary ids", opt.MaskID, opt.Vocab)
	}
	n := len(ids)
	mb := MaskedBatch{B: n / length, Len: length, Inputs: append([]int(nil), ids...), Targets: append([]int(nil), ids...),
		Mask: append([]float64(nil), mask...), LossMask: make([]float64, n), Kind: make([]Corruption, n)}
	eligible := make([]int, 0, length)
	for row := range mb.B {
		eligible = eligible[:0]
		chosen := 0
		for t := row * length; t < (row+1)*length; t++ {
			if mask[t] == 0 || ids[t] < NumSpecial {
				continue
			}
			if ids[t] >= opt.Vocab {
				return MaskedBatch{}, fmt.Errorf("mask tokens: id %d at row %d outside the vocabulary of %d", ids[t], row, opt.Vocab)
			}
			eligible = append(eligible, t)
			if rng.Float64() < opt.Prob {
				mb.corrupt(rng, t, opt)
				chosen++
			}
		}
		if chosen == 0 && opt.AtLeastOne && len(eligible) > 0 {
			mb.corrupt(rng, eligible[rng.IntN(len(eligible))], opt)
		}
	}
	return mb, nil
}

// corrupt marks position t as chosen and applies the 80/10/10 rule.
func (mb *MaskedBatch) corrupt(rng *rand.Rand, t int, opt MaskOptions) {
	mb.LossMask[t] = 1
	switch u := rng.Float64(); {
	case u < 0.8:
		mb.Inputs[t], mb.Kind[t] = opt.MaskID, Masked
	case u < 0.9:
		mb.Inputs[t], mb.Kind[t] = NumSpecial+rng.IntN(opt.Vocab-NumSpecial), Replaced
	default:
		mb.Kind[t] = Unchanged
	}
}
