package tasks

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"text/tabwriter"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph"
)

// SampleReport measures the uncertainty of a translation model with
// Bayesian attention (layers/BAYES.md §6). It is teacher-forced: every
// test pair's decoder reads the reference prefix, and each real target
// token (the words and <eos>) gets
//
//	p_s  = softmax(logits_s)           the next-token distribution of sampled pass s = 1..S
//	p̄    = (1/S) Σ_s p_s               the predictive distribution; the prediction is argmax p̄
//	H[p̄] = −Σ_v p̄_v log p̄_v           predictive entropy (nats): all of the uncertainty
//	E[H] = (1/S) Σ_s H[p_s]            expected entropy: the uncertainty that sampling leaves
//	MI   = H[p̄] − E[H] ≥ 0             mutual information between the token and the
//	                                   attention weights: the part due to the sampled weights
//
// A pass is the training graph with fresh attention noise (graph.Noise
// drawn from a generator seeded by seed, so the report repeats) but without
// dropout: the spread is that of the attention posterior only. The token
// accuracy and log-likelihood of p̄ stand next to those of the mean weights
// (W = φ, the evaluation graph), and the entropy, mutual information and
// disagreement (how often a sample's argmax differs from argmax p̄) are
// split between tokens that p̄ predicts right and wrong. AUROC is the
// probability that a wrong token is more uncertain than a right one (ties
// count half): 0.5 when the uncertainty does not track the error. The
// BLEU of greedy and beam decoding with the mean weights is in eval's
// report above this block.
func (t *Seq2Seq) SampleReport(w io.Writer, params *graph.Params, samples int, seed uint64) error {
	pairs, err := t.split("test")
	if err != nil {
		return err
	}
	rows := min(seq2seqEvalBatch, len(pairs))
	sampled, err := graph.CompileSampler(params, t.buildLogits(rows))
	if err != nil {
		return err
	}
	if !sampled.HasNoise() {
		return fmt.Errorf("--samples: the model's attention is not sampled (attention.kind is %s)", t.modelCfg.Attention.Kind)
	}
	mean, err := graph.Compile(params, t.buildLogits(rows), false)
	if err != nil {
		return err
	}
	batches, err := t.paddedBatches(pairs, rows)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(seed, 0x73616d706c65))
	v := t.tgt.Size()
	var toks []tokenUncertainty
	for _, batch := range batches {
		var real []int // positions of the tokens to predict
		for i, m := range batch.TgtMask {
			if m > 0 {
				real = append(real, i)
			}
		}
		if err := feedPairs(mean, batch); err != nil {
			return err
		}
		if err := mean.Run(); err != nil {
			return err
		}
		logits, _, err := mean.Output("logits")
		if err != nil {
			return err
		}
		acc := make([]predictive, len(real))
		for k, i := range real {
			acc[k].sum = make([]float64, v)
			row := logits[i*v : (i+1)*v]
			acc[k].meanLogProb = logSoftmaxAt(row, batch.DecOut[i])
			acc[k].meanRight = argmax(row) == batch.DecOut[i]
		}
		if err := feedPairs(sampled, batch); err != nil {
			return err
		}
		if err := train.FeedKLWeight(sampled, t.cfg.Training.KLWeight, t.cfg.Training.KLWarmup, t.cfg.Training.Steps); err != nil {
			return err
		}
		dist := make([]float64, v)
		for range samples {
			sampled.DrawNoise(rng)
			if err := sampled.Run(); err != nil {
				return err
			}
			logits, _, err := sampled.Output("logits")
			if err != nil {
				return err
			}
			for k, i := range real {
				softmaxInto(dist, logits[i*v:(i+1)*v])
				acc[k].add(dist)
			}
		}
		for k, i := range real {
			toks = append(toks, acc[k].summary(batch.DecOut[i]))
		}
	}
	return writeSampleReport(w, samples, toks)
}

// buildLogits is build's graph without dropout and with the logits
// [B, T, V] as the output "logits", for SampleReport: as a sampler
// (graph.CompileSampler) it samples the attention weights, as an
// evaluation graph it uses their mean.
func (t *Seq2Seq) buildLogits(batch int) graph.BuildFunc {
	model := t.model
	model.Config.Dropout = 0 // dropout masks are the only other noise of a training graph
	return t.buildModel(model, batch, true)
}

// predictive accumulates the S sampled next-token distributions of one
// target token.
type predictive struct {
	sum         []float64 // Σ_s p_s [V]
	entropy     float64   // Σ_s H[p_s]
	argmax      []int     // argmax p_s of each sample
	meanLogProb float64   // log p(reference) under the mean weights
	meanRight   bool      // the mean weights' argmax is the reference
}

// add adds one sample's distribution p [V].
func (p *predictive) add(dist []float64) {
	for i, x := range dist {
		p.sum[i] += x
	}
	p.entropy += entropy(dist)
	p.argmax = append(p.argmax, argmax(dist))
}

// tokenUncertainty is what the report needs of one target token.
type tokenUncertainty struct {
	right       bool    // argmax p̄ is the reference
	meanRight   bool    // the mean weights' argmax is the reference
	logProb     float64 // log p̄(reference)
	meanLogProb float64 // log p(reference) under the mean weights
	entropy     float64 // H[p̄]
	expected    float64 // E_s H[p_s]
	disagree    float64 // fraction of samples whose argmax is not argmax p̄
}

// mutualInformation is H[p̄] − E[H], clamped at 0 against rounding.
func (u tokenUncertainty) mutualInformation() float64 { return math.Max(0, u.entropy-u.expected) }

// summary turns the samples into p̄ and scores it against the reference
// token ref.
func (p *predictive) summary(ref int) tokenUncertainty {
	s := float64(len(p.argmax))
	pbar := make([]float64, len(p.sum))
	for i, x := range p.sum {
		pbar[i] = x / s
	}
	pred := argmax(pbar)
	var disagree float64
	for _, a := range p.argmax {
		if a != pred {
			disagree++
		}
	}
	return tokenUncertainty{
		right:       pred == ref,
		meanRight:   p.meanRight,
		logProb:     math.Log(pbar[ref]),
		meanLogProb: p.meanLogProb,
		entropy:     entropy(pbar),
		expected:    p.entropy / s,
		disagree:    disagree / s,
	}
}

// entropy is −Σ p log p in nats, with 0 log 0 = 0.
func entropy(p []float64) float64 {
	var h float64
	for _, x := range p {
		if x > 0 {
			h -= x * math.Log(x)
		}
	}
	return h
}

// softmaxInto writes softmax(logits) into dst, in float64 with the
// maximum subtracted.
func softmaxInto(dst, logits []float64) {
	m := logits[argmax(logits)]
	var z float64
	for i, l := range logits {
		dst[i] = math.Exp(l - m)
		z += dst[i]
	}
	for i := range dst {
		dst[i] /= z
	}
}

// logSoftmaxAt is log softmax(logits)[i].
func logSoftmaxAt(logits []float64, i int) float64 {
	m := logits[argmax(logits)]
	var z float64
	for _, l := range logits {
		z += math.Exp(l - m)
	}
	return logits[i] - m - math.Log(z)
}

// auroc is the probability that a value drawn from pos exceeds one drawn
// from neg, ties counting half (the Mann–Whitney U statistic over
// |pos|·|neg|); NaN when either is empty.
func auroc(pos, neg []float64) float64 {
	if len(pos) == 0 || len(neg) == 0 {
		return math.NaN()
	}
	type item struct {
		v   float64
		pos bool
	}
	all := make([]item, 0, len(pos)+len(neg))
	for _, v := range pos {
		all = append(all, item{v, true})
	}
	for _, v := range neg {
		all = append(all, item{v, false})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v < all[j].v })
	// Sum of the 1-based ranks of pos, tied values sharing their mean rank.
	var rankSum float64
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		rank := float64(i+1+j) / 2
		for k := i; k < j; k++ {
			if all[k].pos {
				rankSum += rank
			}
		}
		i = j
	}
	np, nn := float64(len(pos)), float64(len(neg))
	return (rankSum - np*(np+1)/2) / (np * nn)
}

// writeSampleReport prints SampleReport's block: the two predictions'
// scores, then the uncertainty of the tokens p̄ predicts right and wrong.
func writeSampleReport(w io.Writer, samples int, toks []tokenUncertainty) error {
	var right, meanRight int
	var nll, meanNLL float64
	var ent, mi, dis [3][]float64 // right, wrong, all
	for _, u := range toks {
		k := 1
		if u.right {
			right++
			k = 0
		}
		if u.meanRight {
			meanRight++
		}
		nll -= u.logProb
		meanNLL -= u.meanLogProb
		for _, g := range []int{k, 2} {
			ent[g] = append(ent[g], u.entropy)
			mi[g] = append(mi[g], u.mutualInformation())
			dis[g] = append(dis[g], u.disagree)
		}
	}
	n := float64(max(len(toks), 1))
	fmt.Fprintf(w, "\n%d sampled passes over the test set (teacher-forced, no dropout; %d target tokens):\n", samples, len(toks))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// Labels are padded to one width, so that the right-aligning
	// tabwriter leaves them left-aligned.
	label := func(s string) string { return fmt.Sprintf("  %-36s", s) }
	fmt.Fprintf(tw, "%s\tmean weights\tsampled mean\t\n", label(""))
	fmt.Fprintf(tw, "%s\t%.4f\t%.4f\t\n", label("token accuracy"), float64(meanRight)/n, float64(right)/n)
	fmt.Fprintf(tw, "%s\t%.4f\t%.4f\t\n", label("negative log-likelihood (nats/token)"), meanNLL/n, nll/n)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nuncertainty of the sampled mean's predictions (nats; MI = entropy − expected entropy):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\ttokens\tshare\tentropy\tMI\tsamples disagreeing\t\n", label(""))
	mean := func(v []float64, format string) string {
		if len(v) == 0 {
			return "-"
		}
		return fmt.Sprintf(format, meanOf(v))
	}
	for g, name := range []string{"right", "wrong", "all"} {
		fmt.Fprintf(tw, "%s\t%d\t%.1f %%\t%s\t%s\t%s\t\n", label(name), len(ent[g]), 100*float64(len(ent[g]))/n,
			mean(ent[g], "%.4f"), mean(mi[g], "%.4f"), mean(dis[g], "%.3f"))
	}
	area := func(v [3][]float64) string {
		a := auroc(v[1], v[0])
		if math.IsNaN(a) {
			return "-"
		}
		return fmt.Sprintf("%.3f", a)
	}
	fmt.Fprintf(tw, "%s\t\t\t%s\t%s\t%s\t\n", label("AUROC (wrong above right)"), area(ent), area(mi), area(dis))
	return tw.Flush()
}
