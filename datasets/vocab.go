package datasets

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"unicode/utf8"
)

// Special tokens and their fixed ids, the first four entries of every Vocab.
const (
	PadToken = "<pad>"
	UnkToken = "<unk>"
	BOSToken = "<bos>"
	EOSToken = "<eos>"

	PadID = 0
	UnkID = 1
	BOSID = 2
	EOSID = 3
)

// specialTokens lists the special tokens in id order.
var specialTokens = [...]string{PadToken, UnkToken, BOSToken, EOSToken}

// Vocab maps tokens to ids and back. Ids 0..3 are <pad>, <unk>, <bos>,
// <eos>; words follow. A Vocab is immutable once built and marshals to JSON
// as {"words": [...]} so that it can be stored in a checkpoint.
type Vocab struct {
	words []string
	ids   map[string]int
}

// VocabOptions limits the words BuildVocab keeps.
type VocabOptions struct {
	// MinCount drops words seen fewer times; values ≤ 1 keep every word.
	MinCount int
	// MaxSize caps the size of the vocabulary, the four special tokens
	// included; 0 means no cap. It must be 0 or at least 4.
	MaxSize int
}

// BuildVocab returns the vocabulary of the given token sequences: the four
// special tokens, then the words by descending count, ties broken by
// lexicographic (byte) order, so the result does not depend on the order of
// the sentences. Tokens spelled like a special token are not added twice.
func BuildVocab(sentences [][]string, opt VocabOptions) (*Vocab, error) {
	if opt.MaxSize != 0 && opt.MaxSize < len(specialTokens) {
		return nil, fmt.Errorf("build vocabulary: max size %d is below the %d special tokens", opt.MaxSize, len(specialTokens))
	}
	counts := make(map[string]int)
	for _, s := range sentences {
		for _, w := range s {
			counts[w]++
		}
	}
	for _, sp := range specialTokens {
		delete(counts, sp)
	}
	words := make([]string, 0, len(counts))
	for w, c := range counts {
		if c >= opt.MinCount {
			words = append(words, w)
		}
	}
	sort.Slice(words, func(i, j int) bool {
		ci, cj := counts[words[i]], counts[words[j]]
		if ci != cj {
			return ci > cj
		}
		return words[i] < words[j]
	})
	if opt.MaxSize != 0 && len(words) > opt.MaxSize-len(specialTokens) {
		words = words[:opt.MaxSize-len(specialTokens)]
	}
	return NewVocabFromWords(append(specialTokens[:], words...))
}

// NewVocabFromWords returns the vocabulary whose id i is words[i], as saved
// by Vocab.Words. words must start with <pad>, <unk>, <bos>, <eos> and hold
// no duplicate or empty word, and no word that is not valid UTF-8 (JSON
// would turn its bad bytes into U+FFFD, so that it would not survive a
// checkpoint).
func NewVocabFromWords(words []string) (*Vocab, error) {
	if len(words) < len(specialTokens) {
		return nil, fmt.Errorf("vocabulary: %d words, need at least the %d special tokens", len(words), len(specialTokens))
	}
	for i, sp := range specialTokens {
		if words[i] != sp {
			return nil, fmt.Errorf("vocabulary: id %d is %q, want %q", i, words[i], sp)
		}
	}
	v := &Vocab{words: append([]string(nil), words...), ids: make(map[string]int, len(words))}
	for i, w := range v.words {
		if w == "" {
			return nil, fmt.Errorf("vocabulary: empty word at id %d", i)
		}
		if !utf8.ValidString(w) {
			return nil, fmt.Errorf("vocabulary: word %q at id %d is not valid UTF-8", w, i)
		}
		if j, dup := v.ids[w]; dup {
			return nil, fmt.Errorf("vocabulary: %q at ids %d and %d", w, j, i)
		}
		v.ids[w] = i
	}
	return v, nil
}

// Size returns the number of ids, the special tokens included.
func (v *Vocab) Size() int { return len(v.words) }

// Words returns a copy of the id-ordered word list.
func (v *Vocab) Words() []string { return append([]string(nil), v.words...) }

// ID returns the id of word, or UnkID if it is not in the vocabulary.
func (v *Vocab) ID(word string) int {
	if id, ok := v.ids[word]; ok {
		return id
	}
	return UnkID
}

// Word returns the word of id, or <unk> for an id out of range.
func (v *Vocab) Word(id int) string {
	if id < 0 || id >= len(v.words) {
		return UnkToken
	}
	return v.words[id]
}

// Encode returns the ids of tokens, with UnkID for unknown ones. It adds no
// <bos> or <eos>.
func (v *Vocab) Encode(tokens []string) []int {
	ids := make([]int, len(tokens))
	for i, w := range tokens {
		ids[i] = v.ID(w)
	}
	return ids
}

// Decode returns the words of ids up to the first <eos>, dropping <pad> and
// <bos>. <unk> (and any id out of range) is kept as the word "<unk>", so
// that a hypothesis keeps its length for BLEU's brevity penalty.
func (v *Vocab) Decode(ids []int) []string {
	words := make([]string, 0, len(ids))
	for _, id := range ids {
		switch id {
		case EOSID:
			return words
		case PadID, BOSID:
			continue
		}
		words = append(words, v.Word(id))
	}
	return words
}

// vocabJSON is the serialised form of a Vocab.
type vocabJSON struct {
	Words []string `json:"words"`
}

// MarshalJSON encodes v as {"words": [...]} in id order.
func (v *Vocab) MarshalJSON() ([]byte, error) {
	return json.Marshal(vocabJSON{Words: v.words})
}

// UnmarshalJSON decodes the form written by MarshalJSON, with the checks of
// NewVocabFromWords. It refuses JSON that is not valid UTF-8 or escapes a
// lone UTF-16 surrogate (\ud800), which encoding/json would silently
// decode as U+FFFD: the words it accepts are exactly the words stored.
func (v *Vocab) UnmarshalJSON(data []byte) error {
	var j vocabJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("vocabulary: %w", err)
	}
	if err := checkJSONText(data); err != nil {
		return fmt.Errorf("vocabulary: %w", err)
	}
	if j.Words == nil {
		return errors.New(`vocabulary: no "words" field`)
	}
	nv, err := NewVocabFromWords(j.Words)
	if err != nil {
		return err
	}
	*v = *nv
	return nil
}

// checkJSONText refuses JSON text (already parsed without error) that
// encoding/json would decode lossily: invalid UTF-8, or a \u escape of a
// UTF-16 surrogate that is not half of a high-low pair. Offsets are bytes
// of data, from 0.
func checkJSONText(data []byte) error {
	if !utf8.Valid(data) {
		i := 0
		for i < len(data) {
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			i += size
		}
		return fmt.Errorf("invalid UTF-8 (byte 0x%02x) at offset %d of the JSON", data[i], i)
	}
	// A backslash only occurs in a string of parsed JSON, so every
	// backslash met scanning from the start opens an escape.
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		if i+1 < len(data) && data[i+1] == 'u' {
			r := jsonEscape(data, i)
			switch {
			case r >= 0xd800 && r < 0xdc00:
				if lo := jsonEscape(data, i+6); lo >= 0xdc00 && lo < 0xe000 {
					i += 6 // the low half
				} else {
					return fmt.Errorf("lone UTF-16 surrogate %s at offset %d of the JSON", data[i:i+6], i)
				}
			case r >= 0xdc00 && r < 0xe000:
				return fmt.Errorf("lone UTF-16 surrogate %s at offset %d of the JSON", data[i:i+6], i)
			}
			i += 5
			continue
		}
		i++ // the escaped character
	}
	return nil
}

// jsonEscape returns the code unit of the \uXXXX escape at data[i:], or
// -1 if there is none.
func jsonEscape(data []byte, i int) rune {
	if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range data[i+2 : i+6] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return -1
		}
	}
	return r
}

// Batch is a padded, id-encoded batch of sentence pairs, every slice
// row-major. Row b holds pair b; padding positions hold PadID and a mask of
// 0.
type Batch struct {
	// B is the number of pairs; SrcLen and TgtLen the padded lengths.
	B, SrcLen, TgtLen int
	// Src: [B, SrcLen] source ids x1..xm, no <bos> or <eos>.
	Src []int
	// SrcMask: [B, SrcLen] 1 on source tokens, 0 on padding.
	SrcMask []float64
	// DecIn: [B, TgtLen] decoder input <bos> y1..yn (teacher forcing).
	DecIn []int
	// DecOut: [B, TgtLen] decoder target y1..yn <eos>, DecIn shifted left.
	DecOut []int
	// TgtMask: [B, TgtLen] 1 where DecOut holds a token to predict (the
	// words and <eos>), 0 on padding; it is also the mask of DecIn.
	TgtMask []float64
	// Truncated counts the pairs cut to fit SrcLen or TgtLen; a cut target
	// loses its <eos>.
	Truncated int
}

// EncodeBatch encodes pairs with the source and target vocabularies and pads
// them to srcLen source positions and tgtLen decoder positions. A target of
// n words takes n+1 decoder positions (<bos> y1..yn in, y1..yn <eos> out).
// A length of 0 means the batch's own maximum (m, or n+1); longer sequences
// are cut and counted in Batch.Truncated.
func EncodeBatch(pairs []Pair, src, tgt *Vocab, srcLen, tgtLen int) (Batch, error) {
	if len(pairs) == 0 {
		return Batch{}, errors.New("encode batch: no pairs")
	}
	if src == nil || tgt == nil {
		return Batch{}, errors.New("encode batch: nil vocabulary")
	}
	if srcLen < 0 || tgtLen < 0 {
		return Batch{}, fmt.Errorf("encode batch: negative length (source %d, target %d)", srcLen, tgtLen)
	}
	if srcLen == 0 || tgtLen == 0 {
		maxSrc, maxTgt := 0, 0
		for _, p := range pairs {
			maxSrc, maxTgt = max(maxSrc, len(p.Src)), max(maxTgt, len(p.Tgt)+1)
		}
		if srcLen == 0 {
			srcLen = max(maxSrc, 1)
		}
		if tgtLen == 0 {
			tgtLen = maxTgt
		}
	}
	B := len(pairs)
	b := Batch{
		B: B, SrcLen: srcLen, TgtLen: tgtLen,
		Src: make([]int, B*srcLen), SrcMask: make([]float64, B*srcLen),
		DecIn: make([]int, B*tgtLen), DecOut: make([]int, B*tgtLen), TgtMask: make([]float64, B*tgtLen),
	}
	for i, p := range pairs {
		cut := len(p.Src) > srcLen || len(p.Tgt)+1 > tgtLen
		if cut {
			b.Truncated++
		}
		row := b.Src[i*srcLen : (i+1)*srcLen]
		for t, id := range src.Encode(p.Src[:min(len(p.Src), srcLen)]) {
			row[t] = id
			b.SrcMask[i*srcLen+t] = 1
		}
		// Decoder position t reads y_t (y_0 = <bos>) and predicts y_{t+1}
		// (y_{n+1} = <eos>).
		ys := tgt.Encode(p.Tgt)
		in, out := b.DecIn[i*tgtLen:(i+1)*tgtLen], b.DecOut[i*tgtLen:(i+1)*tgtLen]
		for t := 0; t < min(len(ys)+1, tgtLen); t++ {
			if t == 0 {
				in[t] = BOSID
			} else {
				in[t] = ys[t-1]
			}
			if t < len(ys) {
				out[t] = ys[t]
			} else {
				out[t] = EOSID
			}
			b.TgtMask[i*tgtLen+t] = 1
		}
	}
	return b, nil
}
