package datasets

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzVocabJSON: a checkpoint's vocabulary (extra src_vocab, tgt_vocab)
// never makes the decoder panic; what it accepts is valid UTF-8 without
// lone surrogates (so that no word was rewritten to U+FFFD), has the
// special tokens first, maps every word to its own id, and survives a
// round trip.
func FuzzVocabJSON(f *testing.F) {
	v, err := BuildVocab([][]string{{"le", "chat", "dort"}, {"le", "chien"}}, VocabOptions{})
	if err != nil {
		f.Fatal(err)
	}
	good, _ := json.Marshal(v)
	for _, seed := range []string{
		string(good),
		`{"words":["<pad>","<unk>","<bos>","<eos>"]}`,
		`{"words":["<pad>","<unk>","<bos>","<eos>","a","a"]}`,
		`{"words":["<pad>","<unk>","<bos>","<eos>",""]}`,
		`{"words":null}`, `{}`, `null`, `[]`, `{"words":[1,2]}`,
		"{\"words\":[\"<pad>\",\"<unk>\",\"<bos>\",\"<eos>\",\"\xe7a\",\"\xef\"]}",
		`{"words":["<pad>","<unk>","<bos>","<eos>","\ud800","\udc00x","\ud83d\ude00","\\ud800"]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v Vocab
		if err := json.Unmarshal(data, &v); err != nil {
			return
		}
		if !utf8.Valid(data) || checkJSONText(data) != nil {
			t.Fatalf("accepted JSON that decodes lossily: %q", data)
		}
		words := v.Words()
		for id, w := range words {
			if !utf8.ValidString(w) {
				t.Fatalf("id %d: word %q is not UTF-8", id, w)
			}
			// U+FFFD in a word must have been in the JSON, not made up.
			if strings.ContainsRune(w, utf8.RuneError) && !strings.Contains(strings.ToLower(string(data)), `\ufffd`) && !strings.ContainsRune(string(data), utf8.RuneError) {
				t.Fatalf("id %d: word %q holds a U+FFFD the JSON does not", id, w)
			}
		}
		if len(words) < len(specialTokens) || !slices.Equal(words[:len(specialTokens)], specialTokens[:]) {
			t.Fatalf("accepted a vocabulary without the special tokens first: %q", words)
		}
		for id, w := range words {
			if w == "" || v.ID(w) != id || v.Word(id) != w {
				t.Fatalf("id %d: word %q, ID %d, Word %q", id, w, v.ID(w), v.Word(id))
			}
		}
		if got := v.Decode(v.Encode(words[len(specialTokens):])); !slices.Equal(got, words[len(specialTokens):]) {
			t.Fatalf("Decode(Encode(words)) = %q, want %q", got, words[len(specialTokens):])
		}
		out, err := json.Marshal(&v)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		var back Vocab
		if err := json.Unmarshal(out, &back); err != nil || !slices.Equal(back.Words(), words) {
			t.Fatalf("round trip: %v, words %q, want %q", err, back.Words(), words)
		}
	})
}
