package tasks

import (
	"encoding/json"
	"testing"

	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/datasets"
)

// FuzzCheckpointState: the vocabularies a checkpoint's header carries
// (extra src_vocab and tgt_vocab) never make the decoders that resume,
// evaluate or start from a checkpoint panic, and they accept exactly what
// datasets accepts.
func FuzzCheckpointState(f *testing.F) {
	v, err := datasets.BuildVocab([][]string{{"le", "chat"}}, datasets.VocabOptions{})
	if err != nil {
		f.Fatal(err)
	}
	vocab, _ := json.Marshal(v)
	f.Add(vocab, vocab)
	f.Add(vocab, []byte(nil))
	f.Add([]byte(`{"words":["<pad>"]}`), vocab)
	f.Add([]byte(`null`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, src, tgt []byte) {
		if src == nil {
			return // no vocabulary: the tasks build one from the corpus
		}
		var s, g datasets.Vocab
		srcOK, tgtOK := json.Unmarshal(src, &s) == nil, json.Unmarshal(tgt, &g) == nil

		state := map[string][]byte{"src_vocab": src, "tgt_vocab": tgt}
		task := &Seq2Seq{cfg: &configs.Config{}}
		err := task.vocabularies(state)
		if (err == nil) != (srcOK && tgtOK) {
			t.Fatalf("seq2seq: error %v, datasets accepts source %v, target %v", err, srcOK, tgtOK)
		}
		if err == nil && (task.src.Size() != s.Size() || task.tgt.Size() != g.Size()) {
			t.Fatalf("seq2seq: sizes %d, %d, want %d, %d", task.src.Size(), task.tgt.Size(), s.Size(), g.Size())
		}
		mv, err := mlmVocabulary(nil, 0, state)
		if (err == nil) != srcOK || (err == nil && mv.Size() != s.Size()) {
			t.Fatalf("mlm: error %v, datasets accepts the source %v", err, srcOK)
		}
	})
}
