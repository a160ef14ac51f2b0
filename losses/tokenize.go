package losses

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Tokenizer names accepted by Tokenize and BLEUOptions.Tokenize. They are the
// names sacreBLEU uses in its signatures (tok:13a, tok:none).
const (
	// Tokenizer13a is sacreBLEU's default tokenizer, the one of the
	// mteval-v13a.pl script used by WMT.
	Tokenizer13a = "13a"
	// TokenizerNone splits on whitespace only, for text that is already
	// tokenized.
	TokenizerNone = "none"
)

// mteval13aRules are the language-dependent substitutions of sacreBLEU's
// TokenizerRegexp, applied in order. Each pattern matches one or two runes,
// so Go's leftmost-first non-overlapping replacement visits the same matches
// as Python's re.sub.
var mteval13aRules = []struct {
	re   *regexp.Regexp
	repl string
}{
	// Isolate the ASCII punctuation and symbols { | } ~ [ \ ] ^ _ `
	// space ! " # $ % & ( ) * + : ; < = > ? @ and /. The period, comma,
	// apostrophe and hyphen are missing on purpose: they are handled below
	// or kept inside words.
	{regexp.MustCompile("([{-~\\[-` -&(-+:-@/])"), " ${1} "},
	// Split a period or comma off unless a digit precedes it (3.5, 1,000).
	{regexp.MustCompile(`([^0-9])([.,])`), "${1} ${2} "},
	// Split a period or comma off unless a digit follows it.
	{regexp.MustCompile(`([.,])([^0-9])`), " ${1} ${2}"},
	// Split a dash off when a digit precedes it (1990-2000).
	{regexp.MustCompile(`([0-9])(-)`), "${1} ${2} "},
}

// mteval13aUnescapes undoes the SGML escaping that WMT files carry. The
// replacements run one after another, as in sacreBLEU, so each sees the
// output of the previous one: "&amp;lt;" becomes "<" and "&amp;quot;"
// becomes "&quot;". A single-pass strings.Replacer would differ.
var mteval13aUnescapes = [][2]string{
	{"&quot;", `"`},
	{"&amp;", "&"},
	{"&lt;", "<"},
	{"&gt;", ">"},
}

// Tokenize13a returns line tokenized as sacreBLEU's Tokenizer13a does, with
// tokens separated by single spaces and no leading or trailing space:
//
//  1. remove "<skipped>", join "-\n" (a word hyphenated across lines), turn
//     the remaining newlines into spaces;
//  2. unescape &quot; &amp; &lt; &gt;, one after another (so "&amp;lt;"
//     gives "<", as in sacreBLEU);
//  3. isolate ASCII punctuation and symbols except . , ' -;
//  4. split periods and commas off except between digits, and a dash that
//     follows a digit;
//  5. collapse whitespace.
//
// Tokenize13a("It wasn't surprising.") is "It wasn't surprising .".
func Tokenize13a(line string) string {
	line = strings.ReplaceAll(line, "<skipped>", "")
	line = strings.ReplaceAll(line, "-\n", "")
	line = strings.ReplaceAll(line, "\n", " ")
	for _, u := range mteval13aUnescapes {
		line = strings.ReplaceAll(line, u[0], u[1])
	}
	line = " " + line + " "
	for _, rule := range mteval13aRules {
		line = rule.re.ReplaceAllString(line, rule.repl)
	}
	return strings.Join(splitPython(line), " ")
}

// Tokenize returns the tokens of line under the named tokenizer (Tokenizer13a
// or TokenizerNone; "" means Tokenizer13a, sacreBLEU's default). As in
// sacreBLEU's BLEU, trailing whitespace is stripped before tokenizing and
// the tokenizer's output is split on whitespace.
func Tokenize(line, tokenizer string) ([]string, error) {
	line = strings.TrimRightFunc(line, isPythonSpace)
	switch tokenizer {
	case Tokenizer13a, "":
		return splitPython(Tokenize13a(line)), nil
	case TokenizerNone:
		return splitPython(line), nil
	}
	return nil, fmt.Errorf("unknown BLEU tokenizer %q (want %q or %q)", tokenizer, Tokenizer13a, TokenizerNone)
}

// splitPython splits s on runs of whitespace as Python's str.split() does.
func splitPython(s string) []string {
	return strings.FieldsFunc(s, isPythonSpace)
}

// isPythonSpace reports whether r is whitespace for Python's str.isspace:
// Go's unicode.IsSpace plus the ASCII separators U+001C..U+001F.
func isPythonSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}
