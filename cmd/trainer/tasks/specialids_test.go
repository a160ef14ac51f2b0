package tasks

import (
	"testing"

	"github.com/probformer/probformer/datasets"
	"github.com/probformer/probformer/layers"
)

// TestDecodingIDsAreTheVocabularies: layers decodes from the <bos> and
// to the <eos> id that datasets' vocabularies give those tokens (layers
// keeps its own constants, since it imports no data package).
func TestDecodingIDsAreTheVocabularies(t *testing.T) {
	if layers.BOSID != datasets.BOSID || layers.EOSID != datasets.EOSID {
		t.Fatalf("layers decodes from %d to %d; the vocabularies put <bos> at %d and <eos> at %d",
			layers.BOSID, layers.EOSID, datasets.BOSID, datasets.EOSID)
	}
	v, err := datasets.NewVocabFromWords([]string{datasets.PadToken, datasets.UnkToken, datasets.BOSToken, datasets.EOSToken, "a"})
	if err != nil {
		t.Fatal(err)
	}
	if v.ID(datasets.BOSToken) != layers.BOSID || v.ID(datasets.EOSToken) != layers.EOSID {
		t.Fatalf("a vocabulary gives <bos> %d and <eos> %d", v.ID(datasets.BOSToken), v.ID(datasets.EOSToken))
	}
}
