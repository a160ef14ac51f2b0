package tasks

import (
	"math"
	"testing"
)

// TestPredictiveUncertainty checks p̄, H[p̄], E[H], the mutual information
// and the disagreement on hand-made samples.
func TestPredictiveUncertainty(t *testing.T) {
	ln2, ln3 := math.Log(2), math.Log(3)
	cases := []struct {
		name    string
		samples [][]float64
		ref     int
		want    tokenUncertainty
	}{
		{"confident and agreeing", [][]float64{{1, 0}, {1, 0}}, 0,
			tokenUncertainty{right: true, logProb: 0, entropy: 0, expected: 0, disagree: 0}},
		{"confident, disagreeing", [][]float64{{1, 0}, {0, 1}}, 1,
			tokenUncertainty{right: false, logProb: -ln2, entropy: ln2, expected: 0, disagree: 0.5}},
		{"unsure alike", [][]float64{{0.5, 0.5}, {0.5, 0.5}}, 0,
			tokenUncertainty{right: true, logProb: -ln2, entropy: ln2, expected: ln2, disagree: 0}},
		// H[.7 .2 .1] = 0.8018185525433373, H[.2 .6 .2] = 0.9502705392332347;
		// p̄ is uniform, its argmax the first class.
		{"three classes", [][]float64{{0.7, 0.2, 0.1}, {0.1, 0.2, 0.7}, {0.2, 0.6, 0.2}}, 1,
			tokenUncertainty{right: false, logProb: -ln3, entropy: ln3, expected: 0.8513025481066364, disagree: 2.0 / 3}},
	}
	for _, c := range cases {
		p := predictive{sum: make([]float64, len(c.samples[0])), meanLogProb: -1, meanRight: true}
		for _, s := range c.samples {
			p.add(s)
		}
		got := p.summary(c.ref)
		c.want.meanLogProb, c.want.meanRight = -1, true
		close := func(a, b float64) bool { return math.Abs(a-b) <= 1e-15 }
		if got.right != c.want.right || got.meanRight != c.want.meanRight || !close(got.logProb, c.want.logProb) ||
			!close(got.meanLogProb, c.want.meanLogProb) || !close(got.entropy, c.want.entropy) ||
			!close(got.expected, c.want.expected) || !close(got.disagree, c.want.disagree) {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
		if mi, want := got.mutualInformation(), c.want.entropy-c.want.expected; !close(mi, want) {
			t.Errorf("%s: MI = %v, want %v", c.name, mi, want)
		}
	}
}

func TestSoftmaxValues(t *testing.T) {
	// Shifting by ±1000 costs the logits' difference about 1e-13 of
	// precision; the result must not overflow or lose more.
	for _, shift := range []float64{0, 1000, -1000} {
		tol := 1e-15 + 1e-12*math.Abs(shift)/1000
		logits := []float64{shift, shift + math.Log(3)}
		dst := make([]float64, 2)
		softmaxInto(dst, logits)
		if math.Abs(dst[0]-0.25) > tol || math.Abs(dst[1]-0.75) > tol {
			t.Errorf("softmax(%v) = %v, want [0.25 0.75]", logits, dst)
		}
		if got, want := logSoftmaxAt(logits, 1), math.Log(0.75); math.Abs(got-want) > tol {
			t.Errorf("log softmax(%v)[1] = %v, want %v", logits, got, want)
		}
	}
}

func TestAUROC(t *testing.T) {
	cases := []struct {
		pos, neg []float64
		want     float64
	}{
		{[]float64{3, 4}, []float64{1, 2}, 1},
		{[]float64{1, 2}, []float64{3, 4}, 0},
		{[]float64{1, 2}, []float64{1, 2}, 0.5},
		{[]float64{2}, []float64{1, 2, 3}, 0.5},
		// 0.9 beats all three; 0.4 beats 0.1, ties 0.4, loses to 0.5: 4.5/6.
		{[]float64{0.9, 0.4}, []float64{0.1, 0.4, 0.5}, 0.75},
	}
	for _, c := range cases {
		if got := auroc(c.pos, c.neg); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("auroc(%v, %v) = %v, want %v", c.pos, c.neg, got, c.want)
		}
	}
	if got := auroc(nil, []float64{1}); !math.IsNaN(got) {
		t.Errorf("auroc with no positives = %v, want NaN", got)
	}
}
