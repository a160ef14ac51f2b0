package main

import (
	"encoding/json"
	"testing"

	"probformer/configs"
	"probformer/datasets"
)

// FuzzCheckpointState: the task state a checkpoint's header carries
// (extra loop, src_vocab and tgt_vocab, and the weight average) never
// makes the decoders that resume, evaluate or start from it panic; a
// vocabulary they accept is one that datasets accepts, and the weight
// average is taken only when it has one value for every parameter.
func FuzzCheckpointState(f *testing.F) {
	v, err := datasets.BuildVocab([][]string{{"le", "chat"}}, datasets.VocabOptions{})
	if err != nil {
		f.Fatal(err)
	}
	vocab, _ := json.Marshal(v)
	loop, _ := json.Marshal(loopState{LossSum: 1.5, LossCount: 3, PenaltySums: map[string]float64{"kl": 0.5}, Best: 0.25, BestStep: 100, WallSec: 12})
	f.Add(loop, vocab, vocab, make([]byte, 8*3))
	f.Add([]byte(`{"loss_sum":"x"}`), []byte(`{"words":["<pad>"]}`), []byte(nil), []byte{1, 2, 3})
	f.Add([]byte(`null`), []byte(`null`), []byte(`{}`), []byte(nil))
	f.Fuzz(func(t *testing.T, loop, src, tgt, avg []byte) {
		var ls loopState
		_ = json.Unmarshal(loop, &ls)

		state := map[string][]byte{"src_vocab": src, "tgt_vocab": tgt}
		task := &seq2seqTask{cfg: &configs.Config{}}
		if err := task.vocabularies(state); err == nil && src != nil {
			var s, g datasets.Vocab
			if json.Unmarshal(src, &s) != nil || json.Unmarshal(tgt, &g) != nil {
				t.Fatal("seq2seq accepted a vocabulary that datasets refuses")
			}
			if task.src.Size() != s.Size() || task.tgt.Size() != g.Size() {
				t.Fatalf("sizes %d, %d, want %d, %d", task.src.Size(), task.tgt.Size(), s.Size(), g.Size())
			}
		}
		if src != nil {
			if mv, err := mlmVocabulary(nil, 0, state); err == nil && mv.Size() < 4 {
				t.Fatalf("mlm accepted a vocabulary of %d ids", mv.Size())
			}
		}

		dst := [][]float64{make([]float64, 2), nil, make([]float64, 1)}
		if err := decodeFloats(avg, dst); (err == nil) != (len(avg) == 8*3) {
			t.Fatalf("weight average of %d bytes for 3 values: error %v", len(avg), err)
		}
	})
}
