package datasets

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// maskFixture is a batch of rows of length 10: words (ids ≥ 4), a <unk>,
// an <eos> and padding.
func maskFixture(rows int) (ids []int, mask []float64) {
	for r := range rows {
		n := 3 + r%8 // 3..10 real tokens
		for t := range 10 {
			switch {
			case t >= n:
				ids, mask = append(ids, PadID), append(mask, 0)
			case t == 1 && r%3 == 0:
				ids, mask = append(ids, UnkID), append(mask, 1)
			case t == n-1 && r%4 == 0:
				ids, mask = append(ids, EOSID), append(mask, 1)
			default:
				ids, mask = append(ids, NumSpecial+(r*7+t)%20), append(mask, 1)
			}
		}
	}
	return ids, mask
}

func TestMaskTokensProportions(t *testing.T) {
	const vocab = NumSpecial + 20
	ids, mask := maskFixture(4000)
	cases := []struct {
		name string
		prob float64
	}{{"default", 0}, {"bert", 0.15}, {"half", 0.5}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			mb, err := MaskTokens(rng, ids, mask, 10, MaskOptions{Prob: c.prob, MaskID: vocab, Vocab: vocab})
			if err != nil {
				t.Fatal(err)
			}
			want := c.prob
			if want == 0 {
				want = DefaultMaskProb
			}
			var words, chosen, masked, replaced, unchanged float64
			for i, id := range ids {
				eligible := mask[i] == 1 && id >= NumSpecial
				if eligible {
					words++
				}
				if mb.LossMask[i] == 0 {
					if mb.Inputs[i] != id || mb.Kind[i] != Kept {
						t.Fatalf("position %d not chosen but changed: %d → %d", i, id, mb.Inputs[i])
					}
					continue
				}
				if !eligible {
					t.Fatalf("position %d (id %d, mask %g) chosen", i, id, mask[i])
				}
				chosen++
				switch mb.Kind[i] {
				case Masked:
					masked++
					if mb.Inputs[i] != vocab {
						t.Fatalf("masked position %d holds %d", i, mb.Inputs[i])
					}
				case Replaced:
					replaced++
					if mb.Inputs[i] < NumSpecial || mb.Inputs[i] >= vocab {
						t.Fatalf("random replacement %d is not a word", mb.Inputs[i])
					}
				case Unchanged:
					unchanged++
					if mb.Inputs[i] != id {
						t.Fatalf("unchanged position %d holds %d, want %d", i, mb.Inputs[i], id)
					}
				default:
					t.Fatalf("chosen position %d has kind %d", i, mb.Kind[i])
				}
				if mb.Targets[i] != id {
					t.Fatalf("target %d, want the original %d", mb.Targets[i], id)
				}
			}
			// Binomial standard errors are below 0.004 (rate) and 0.01
			// (shares); the tolerances are about 4 of them.
			for _, p := range []struct {
				what      string
				got, want float64
				tol       float64
			}{
				{"chosen rate", chosen / words, want, 0.015},
				{"[MASK] share", masked / chosen, 0.8, 0.03},
				{"random share", replaced / chosen, 0.1, 0.025},
				{"unchanged share", unchanged / chosen, 0.1, 0.025},
			} {
				if math.Abs(p.got-p.want) > p.tol {
					t.Errorf("%s %.4f, want %.2f ± %.3f", p.what, p.got, p.want, p.tol)
				}
			}
			if !slices.Equal(mb.Mask, mask) {
				t.Error("attention mask changed")
			}
		})
	}
}

func TestMaskTokensAtLeastOne(t *testing.T) {
	const vocab = NumSpecial + 20
	ids, mask := maskFixture(500)
	// A row of padding and specials only has nothing to choose.
	ids = append(ids, PadID, UnkID, EOSID, PadID, PadID, PadID, PadID, PadID, PadID, PadID)
	mask = append(mask, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0)
	for _, prob := range []float64{1e-9, 0.15} {
		mb, err := MaskTokens(rand.New(rand.NewPCG(3, 4)), ids, mask, 10, MaskOptions{Prob: prob, MaskID: vocab, Vocab: vocab, AtLeastOne: true})
		if err != nil {
			t.Fatal(err)
		}
		for r := range mb.B {
			var n float64
			for _, m := range mb.LossMask[r*10 : (r+1)*10] {
				n += m
			}
			if last := r == mb.B-1; (n == 0) != last {
				t.Fatalf("prob %g: row %d has %g chosen positions", prob, r, n)
			}
		}
	}
}

func TestMaskTokensDeterministic(t *testing.T) {
	const vocab = NumSpecial + 20
	ids, mask := maskFixture(64)
	draw := func(seed uint64) MaskedBatch {
		mb, err := MaskTokens(rand.New(rand.NewPCG(seed, 9)), ids, mask, 10, MaskOptions{MaskID: vocab, Vocab: vocab, AtLeastOne: true})
		if err != nil {
			t.Fatal(err)
		}
		return mb
	}
	a, b, c := draw(5), draw(5), draw(6)
	if !slices.Equal(a.Inputs, b.Inputs) || !slices.Equal(a.LossMask, b.LossMask) {
		t.Fatal("the same seed gave different batches")
	}
	if slices.Equal(a.Inputs, c.Inputs) {
		t.Fatal("different seeds gave the same batch")
	}
}

func TestMaskTokensErrors(t *testing.T) {
	ids, mask := []int{4, 5, 6, 0}, []float64{1, 1, 1, 0}
	cases := []struct {
		name   string
		ids    []int
		mask   []float64
		length int
		opt    MaskOptions
		want   string
	}{
		{"ragged", ids, mask, 3, MaskOptions{MaskID: 8, Vocab: 8}, "rows of length 3"},
		{"mask length", ids, mask[:3], 4, MaskOptions{MaskID: 8, Vocab: 8}, "mask values"},
		{"bad prob", ids, mask, 4, MaskOptions{Prob: 1.5, MaskID: 8, Vocab: 8}, "probability 1.5"},
		{"no words", ids, mask, 4, MaskOptions{MaskID: 4, Vocab: 4}, "no word"},
		{"mask inside vocab", ids, mask, 4, MaskOptions{MaskID: 5, Vocab: 8}, "[MASK] id 5"},
		{"id outside vocab", []int{4, 9, 0, 0}, mask, 4, MaskOptions{MaskID: 8, Vocab: 8}, "id 9"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := MaskTokens(rand.New(rand.NewPCG(1, 1)), c.ids, c.mask, c.length, c.opt)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
}
