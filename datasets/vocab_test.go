package datasets

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestBuildVocab(t *testing.T) {
	sentences := [][]string{
		strings.Fields("the cat sat on the mat"),
		strings.Fields("the dog sat"),
		strings.Fields("a dog <unk> zebra"),
	}
	specials := []string{"<pad>", "<unk>", "<bos>", "<eos>"}
	for _, test := range []struct {
		name string
		opt  VocabOptions
		want []string
	}{
		// the:3, dog:2, sat:2, then count-1 words in byte order; the literal
		// "<unk>" is not added twice.
		{"all", VocabOptions{}, append(slices.Clone(specials), "the", "dog", "sat", "a", "cat", "mat", "on", "zebra")},
		{"min count 2", VocabOptions{MinCount: 2}, append(slices.Clone(specials), "the", "dog", "sat")},
		{"max size 6", VocabOptions{MaxSize: 6}, append(slices.Clone(specials), "the", "dog")},
		{"max size 4", VocabOptions{MaxSize: 4}, slices.Clone(specials)},
	} {
		v, err := BuildVocab(sentences, test.opt)
		if err != nil {
			t.Errorf("%s: %v", test.name, err)
			continue
		}
		if !slices.Equal(v.Words(), test.want) {
			t.Errorf("%s: words = %q, want %q", test.name, v.Words(), test.want)
		}
		if v.Size() != len(test.want) {
			t.Errorf("%s: size = %d, want %d", test.name, v.Size(), len(test.want))
		}
	}
	// The order of the sentences does not matter.
	a, _ := BuildVocab(sentences, VocabOptions{})
	b, _ := BuildVocab([][]string{sentences[2], sentences[0], sentences[1]}, VocabOptions{})
	if !slices.Equal(a.Words(), b.Words()) {
		t.Errorf("vocabulary depends on sentence order: %q vs %q", a.Words(), b.Words())
	}
	if _, err := BuildVocab(sentences, VocabOptions{MaxSize: 3}); err == nil {
		t.Error("max size 3: no error")
	}
}

func TestVocabEncodeDecode(t *testing.T) {
	v, err := NewVocabFromWords([]string{"<pad>", "<unk>", "<bos>", "<eos>", "the", "cat", "sat"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := v.Encode(strings.Fields("the dog sat")), []int{4, UnkID, 6}; !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	for _, test := range []struct {
		ids  []int
		want []string
	}{
		{[]int{4, 5, 6}, []string{"the", "cat", "sat"}},
		{[]int{BOSID, 4, 5, EOSID, 6, 6}, []string{"the", "cat"}},
		{[]int{4, PadID, 5, PadID}, []string{"the", "cat"}},
		{[]int{4, UnkID, 6, 99, -1}, []string{"the", "<unk>", "sat", "<unk>", "<unk>"}},
		{[]int{EOSID}, []string{}},
		{nil, []string{}},
	} {
		if got := v.Decode(test.ids); !slices.Equal(got, test.want) {
			t.Errorf("Decode(%v) = %q, want %q", test.ids, got, test.want)
		}
	}
	if v.ID("cat") != 5 || v.ID("cow") != UnkID || v.Word(6) != "sat" || v.Word(7) != UnkToken {
		t.Error("ID/Word lookups wrong")
	}
	// Words returns a copy.
	v.Words()[4] = "changed"
	if v.Word(4) != "the" {
		t.Error("Words exposes the internal slice")
	}
}

func TestNewVocabFromWordsErrors(t *testing.T) {
	for _, test := range []struct {
		name  string
		words []string
		want  string
	}{
		{"too short", []string{"<pad>", "<unk>"}, "need at least the 4 special tokens"},
		{"specials out of order", []string{"<unk>", "<pad>", "<bos>", "<eos>"}, `id 0 is "<unk>", want "<pad>"`},
		{"duplicate", []string{"<pad>", "<unk>", "<bos>", "<eos>", "a", "b", "a"}, `"a" at ids 4 and 6`},
		{"empty word", []string{"<pad>", "<unk>", "<bos>", "<eos>", ""}, "empty word at id 4"},
		{"invalid utf-8", []string{"<pad>", "<unk>", "<bos>", "<eos>", "ok", "ca\xe7a"}, `word "ca\xe7a" at id 5 is not valid UTF-8`},
	} {
		_, err := NewVocabFromWords(test.words)
		if err == nil || !strings.Contains(err.Error(), test.want) {
			t.Errorf("%s: error = %v, want %q", test.name, err, test.want)
		}
	}
}

func TestVocabJSON(t *testing.T) {
	v, err := BuildVocab([][]string{strings.Fields("b a b c")}, VocabOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	// encoding/json escapes < and > as \u003c and \u003e.
	const want = `{"words":["\u003cpad\u003e","\u003cunk\u003e","\u003cbos\u003e","\u003ceos\u003e","b","a","c"]}`
	if string(data) != want {
		t.Errorf("JSON = %s, want %s", data, want)
	}
	// Round trip inside a struct, as in a checkpoint.
	type checkpoint struct {
		Src *Vocab `json:"src"`
	}
	var back checkpoint
	if err := json.Unmarshal([]byte(`{"src":`+want+`}`), &back); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Src.Words(), v.Words()) || back.Src.ID("c") != 6 {
		t.Errorf("round trip = %q, want %q", back.Src.Words(), v.Words())
	}
	var plain checkpoint
	if err := json.Unmarshal([]byte(`{"src":{"words":["<pad>","<unk>","<bos>","<eos>","b","a","c"]}}`), &plain); err != nil || !slices.Equal(plain.Src.Words(), v.Words()) {
		t.Errorf("unescaped JSON: %v, %v", err, plain.Src)
	}
	for _, bad := range []string{`{"words":["a"]}`, `{}`, `[1]`, `{"words":["<pad>","<unk>","<bos>","<eos>","x","x"]}`} {
		var u Vocab
		if err := json.Unmarshal([]byte(bad), &u); err == nil {
			t.Errorf("Unmarshal(%s): no error", bad)
		}
	}
}

// TestVocabJSONRefusesLossyText: JSON that encoding/json would decode with
// a word rewritten to U+FFFD (two distinct bad words would even collide) is
// refused, not silently changed; valid escapes and a literal U+FFFD are
// kept.
func TestVocabJSONRefusesLossyText(t *testing.T) {
	const specials = `"<pad>","<unk>","<bos>","<eos>",`
	for _, test := range []struct {
		name, words, want string
	}{
		{"invalid utf-8", "\"ok\",\"ca\xe7a\"", "invalid UTF-8 (byte 0xe7) at offset 50 of the JSON"},
		{"two invalid words", "\"\xe7\",\"\xef\"", "invalid UTF-8 (byte 0xe7)"},
		{"lone high surrogate", `"a\ud800"`, `lone UTF-16 surrogate \ud800 at offset`},
		{"high surrogate then a letter", `"\uD83Dx"`, `lone UTF-16 surrogate \uD83D`},
		{"high surrogate then a high one", `"\ud83d\ud83d"`, `lone UTF-16 surrogate \ud83d`},
		{"lone low surrogate", `"\udc00"`, `lone UTF-16 surrogate \udc00`},
		{"pair reversed", `"\ude00\ud83d"`, `lone UTF-16 surrogate \ude00`},
	} {
		var v Vocab
		err := json.Unmarshal([]byte(`{"words":[`+specials+test.words+`]}`), &v)
		if err == nil || !strings.Contains(err.Error(), test.want) || !strings.HasPrefix(err.Error(), "vocabulary: ") {
			t.Errorf("%s: error %v, want vocabulary: …%s", test.name, err, test.want)
		}
	}
	for _, test := range []struct {
		name, words string
		want        []string
	}{
		{"surrogate pair", `"\ud83d\ude00","\uD83D\uDE01"`, []string{"\U0001F600", "\U0001F601"}},
		{"escaped backslash before u", `"\\ud800","\\\u00e9"`, []string{`\ud800`, `\é`}},
		{"replacement character", "\"\\ufffd\",\"x\uFFFD\"", []string{"\uFFFD", "x\uFFFD"}},
		{"escapes of every kind", `"\"q\"","\n\t\/\b\f\r","\u00e9t\u00E9"`, []string{`"q"`, "\n\t/\b\f\r", "été"}},
	} {
		var v Vocab
		if err := json.Unmarshal([]byte(`{"words":[`+specials+test.words+`]}`), &v); err != nil {
			t.Errorf("%s: %v", test.name, err)
			continue
		}
		if got := v.Words()[len(specialTokens):]; !slices.Equal(got, test.want) {
			t.Errorf("%s: words %q, want %q", test.name, got, test.want)
		}
	}
}

// TestBuildVocabRefusesInvalidUTF8: a token that JSON cannot carry fails
// when the vocabulary is built, not when a checkpoint is read back.
func TestBuildVocabRefusesInvalidUTF8(t *testing.T) {
	_, err := BuildVocab([][]string{{"ca\xe7a", "na\xefve", "ok"}}, VocabOptions{})
	if err == nil || !strings.Contains(err.Error(), "is not valid UTF-8") {
		t.Errorf("error %v, want one about UTF-8", err)
	}
}

func TestEncodeBatch(t *testing.T) {
	src, err := NewVocabFromWords([]string{"<pad>", "<unk>", "<bos>", "<eos>", "a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	tgt, err := NewVocabFromWords([]string{"<pad>", "<unk>", "<bos>", "<eos>", "x", "y"})
	if err != nil {
		t.Fatal(err)
	}
	pairs := []Pair{
		{Src: strings.Fields("a b c"), Tgt: strings.Fields("x y")},
		{Src: strings.Fields("c z"), Tgt: strings.Fields("y")},
	}
	for _, test := range []struct {
		name           string
		srcLen, tgtLen int
		want           Batch
	}{
		{
			name: "fixed lengths", srcLen: 4, tgtLen: 4,
			want: Batch{
				B: 2, SrcLen: 4, TgtLen: 4,
				Src:     []int{4, 5, 6, 0, 6, 1, 0, 0},
				SrcMask: []float64{1, 1, 1, 0, 1, 1, 0, 0},
				DecIn:   []int{2, 4, 5, 0, 2, 5, 0, 0},
				DecOut:  []int{4, 5, 3, 0, 5, 3, 0, 0},
				TgtMask: []float64{1, 1, 1, 0, 1, 1, 0, 0},
			},
		},
		{
			name: "batch maximum", srcLen: 0, tgtLen: 0,
			want: Batch{
				B: 2, SrcLen: 3, TgtLen: 3,
				Src:     []int{4, 5, 6, 6, 1, 0},
				SrcMask: []float64{1, 1, 1, 1, 1, 0},
				DecIn:   []int{2, 4, 5, 2, 5, 0},
				DecOut:  []int{4, 5, 3, 5, 3, 0},
				TgtMask: []float64{1, 1, 1, 1, 1, 0},
			},
		},
		{
			// The first pair is cut on both sides and loses its <eos>.
			name: "truncated", srcLen: 2, tgtLen: 2,
			want: Batch{
				B: 2, SrcLen: 2, TgtLen: 2,
				Src:       []int{4, 5, 6, 1},
				SrcMask:   []float64{1, 1, 1, 1},
				DecIn:     []int{2, 4, 2, 5},
				DecOut:    []int{4, 5, 5, 3},
				TgtMask:   []float64{1, 1, 1, 1},
				Truncated: 1,
			},
		},
	} {
		got, err := EncodeBatch(pairs, src, tgt, test.srcLen, test.tgtLen)
		if err != nil {
			t.Errorf("%s: %v", test.name, err)
			continue
		}
		if !reflect.DeepEqual(got, test.want) {
			t.Errorf("%s:\ngot  %+v\nwant %+v", test.name, got, test.want)
		}
	}
	if _, err := EncodeBatch(nil, src, tgt, 4, 4); err == nil {
		t.Error("no pairs: no error")
	}
	if _, err := EncodeBatch(pairs, src, tgt, -1, 4); err == nil {
		t.Error("negative length: no error")
	}
	if _, err := EncodeBatch(pairs, nil, tgt, 4, 4); err == nil {
		t.Error("nil vocabulary: no error")
	}
}
