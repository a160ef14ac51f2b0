package losses

import (
	"slices"
	"testing"
)

// The expected outputs were produced by the rules of sacreBLEU 2.x's
// Tokenizer13a (tokenizers/tokenizer_13a.py and tokenizer_re.py).
func TestTokenize13a(t *testing.T) {
	for _, test := range []struct {
		in, want string
	}{
		{"", ""},
		{"The dog bit the man.", "The dog bit the man ."},
		{"It wasn't surprising.", "It wasn't surprising ."},
		{"Hello, world!", "Hello , world !"},
		{"  spaced   out  ", "spaced out"},
		{"tab\there", "tab here"},
		{"x\u00a0y", "x y"},
		{"x\x1cy", "x y"},
		{"café, über.", "café , über ."},

		// <skipped> removal, -\n joining, other newlines become spaces.
		{"a<skipped>b", "ab"},
		{"hyphen-\nated word", "hyphenated word"},
		{"line1\nline2", "line1 line2"},

		// Unescaping runs one entity after another.
		{"&quot;quoted&quot; &amp; &lt;tag&gt;", `" quoted " & < tag >`},
		{"&gt;&lt;", "> <"},
		{"&amp;lt;", "<"},
		{"&amp;quot;", "& quot ;"},

		// Symbols are isolated; apostrophes and inner hyphens are kept.
		{"(parenthesis) [bracket] {brace}", "( parenthesis ) [ bracket ] { brace }"},
		{"$100 & 50% #tag @user", "$ 100 & 50 % # tag @ user"},
		{`a/b\c`, `a / b \ c`},
		{"x^y_z`w|v~u", "x ^ y _ z ` w | v ~ u"},
		{"x=y;z:w", "x = y ; z : w"},
		{"<b>bold</b>", "< b > bold < / b >"},
		{`"double" 'single'`, `" double " 'single'`},
		{"well-known", "well-known"},
		{"e-mail", "e-mail"},
		{"a--b", "a--b"},
		{"--", "--"},
		{"a-1", "a-1"},
		{"-5", "-5"},

		// Periods and commas stay between digits only.
		{"3.5 and 1,000 people", "3.5 and 1,000 people"},
		{"1.000,5", "1.000,5"},
		{"3.14.", "3.14 ."},
		{".5", ". 5"},
		{"5.", "5 ."},
		{"a.1", "a . 1"},
		{"1.a", "1 . a"},
		{"9.a", "9 . a"},
		{"a.b", "a . b"},
		{"x,y", "x , y"},
		{"5,-3", "5 , -3"},
		{"end.", "end ."},
		{"Mr. Smith, Jr.", "Mr . Smith , Jr ."},
		{"U.S.A.", "U . S . A ."},
		{"...", ". . ."},
		{",,,", ", , ,"},
		{"a..b", "a . . b"},
		{"1..2", "1 . . 2"},
		// Non-overlapping matches: the comma after "." is not split from 1.
		{"a.,1", "a . ,1"},

		// A dash after a digit is split off.
		{"1990-2000", "1990 - 2000"},
		{"1-2-3", "1 - 2 - 3"},
		{"5-", "5 -"},
	} {
		if got := Tokenize13a(test.in); got != test.want {
			t.Errorf("Tokenize13a(%q) = %q, want %q", test.in, got, test.want)
		}
	}
}

func TestTokenize(t *testing.T) {
	for _, test := range []struct {
		line, tokenizer string
		want            []string
	}{
		{"It wasn't surprising.", Tokenizer13a, []string{"It", "wasn't", "surprising", "."}},
		{"It wasn't surprising.", "", []string{"It", "wasn't", "surprising", "."}},
		{"It wasn't surprising.", TokenizerNone, []string{"It", "wasn't", "surprising."}},
		{"  a \t b\n", TokenizerNone, []string{"a", "b"}},
		// Trailing whitespace is stripped before 13a, so a final "-\n" is
		// not a line-break hyphen (as in sacreBLEU's BLEU).
		{"self-\n", Tokenizer13a, []string{"self-"}},
		{"", Tokenizer13a, []string{}},
	} {
		got, err := Tokenize(test.line, test.tokenizer)
		if err != nil {
			t.Errorf("Tokenize(%q, %q): %v", test.line, test.tokenizer, err)
			continue
		}
		if !slices.Equal(got, test.want) {
			t.Errorf("Tokenize(%q, %q) = %q, want %q", test.line, test.tokenizer, got, test.want)
		}
	}
	if _, err := Tokenize("a b", "intl"); err == nil {
		t.Error("Tokenize with unknown tokenizer: no error")
	}
}
