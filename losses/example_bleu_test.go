package losses_test

import (
	"fmt"
	"log"

	"github.com/probformer/probformer/losses"
)

// Corpus BLEU of two hypothesis lines against one reference stream, as
// sacreBLEU computes it (13a tokenisation, exponential smoothing).
func ExampleCorpusBLEU() {
	hyps := []string{"the cat sat on the mat", "a dog runs in the park"}
	refs := [][]string{{"the cat sat on the mat", "the dog runs in the park"}}
	score, err := losses.CorpusBLEU(hyps, refs, losses.BLEUOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("BLEU %.2f, brevity penalty %.2f, 1-gram precision %.1f%%\n", score.Score, score.BP, score.Precisions[0])
	// Output:
	// BLEU 88.07, brevity penalty 1.00, 1-gram precision 91.7%
}
