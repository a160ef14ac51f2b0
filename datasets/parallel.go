package datasets

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"
)

// Pair is one sentence pair of a parallel corpus, as tokens.
type Pair struct {
	Src, Tgt []string
}

// ParallelCorpus holds the three splits of a translation task.
type ParallelCorpus struct {
	Train, Valid, Test []Pair
}

// Limits of a TSV corpus file (see the package documentation). A file
// or a line beyond them is refused with its name and line number, so that
// a wrong path (a device, a binary file, a file that never ends) fails in
// a moment instead of filling the memory.
const (
	// DefaultMaxTSVLineBytes caps a line, its line end excluded: 64 KiB,
	// hundreds of times a sentence pair.
	DefaultMaxTSVLineBytes = 64 << 10
	// DefaultMaxTSVFileBytes caps a file: 1 GiB. The pairs of a file take
	// several times its size in memory.
	DefaultMaxTSVFileBytes = 1 << 30
)

// TSVOptions controls LoadParallelTSV.
type TSVOptions struct {
	// Lowercase lowercases both sides before tokenizing.
	Lowercase bool
	// SkipMalformed skips (and counts) lines without a tab or with an empty
	// side instead of failing on the first one. A file that is not UTF-8
	// text, or exceeds a limit, is refused all the same.
	SkipMalformed bool
	// MaxLineBytes caps the length of a line, its line end excluded; 0
	// means DefaultMaxTSVLineBytes.
	MaxLineBytes int
	// MaxFileBytes caps the size of the file; 0 means
	// DefaultMaxTSVFileBytes.
	MaxFileBytes int64
}

// limits returns the line and file caps of opt, defaults filled in.
func (opt TSVOptions) limits() (line int, file int64, err error) {
	line, file = opt.MaxLineBytes, opt.MaxFileBytes
	if line < 0 || file < 0 {
		return 0, 0, fmt.Errorf("load parallel corpus: negative limit (line %d bytes, file %d bytes)", line, file)
	}
	if line == 0 {
		line = DefaultMaxTSVLineBytes
	}
	if file == 0 {
		file = DefaultMaxTSVFileBytes
	}
	return line, file, nil
}

// LoadStats counts what LoadParallelTSV read.
type LoadStats struct {
	// Lines is the number of lines in the file, blank ones included.
	Lines int
	// Pairs is the number of pairs returned.
	Pairs int
	// Blank is the number of lines holding only whitespace; they are always
	// skipped.
	Blank int
	// Skipped is the number of malformed lines skipped under
	// TSVOptions.SkipMalformed.
	Skipped int
}

// add returns the field-wise sum of s and o.
func (s LoadStats) add(o LoadStats) LoadStats {
	return LoadStats{
		Lines:   s.Lines + o.Lines,
		Pairs:   s.Pairs + o.Pairs,
		Blank:   s.Blank + o.Blank,
		Skipped: s.Skipped + o.Skipped,
	}
}

// textError is a file that is not a TSV corpus the loader reads: not
// UTF-8 text, or beyond a limit. TSVOptions.SkipMalformed never skips it.
type textError struct{ msg string }

func (e *textError) Error() string { return e.msg }

// notText returns a textError with a formatted message.
func notText(format string, args ...any) error {
	return &textError{fmt.Sprintf(format, args...)}
}

// LoadParallelTSV reads a tab-separated parallel corpus, one pair a line:
//
//	source<TAB>target[<TAB>anything]
//
// the format of the Tatoeba/Anki exports (the third column, attribution,
// is ignored). Each side is split on whitespace, after lowercasing if
// opt.Lowercase. LF and CRLF line ends, a missing final newline, a UTF-8
// byte-order mark at the start of the file and blank lines are accepted.
// A line without a tab or with a side that has no token is malformed:
// LoadParallelTSV returns an error "path: line N: ..." unless
// opt.SkipMalformed, which skips it and counts it in LoadStats.Skipped.
//
// The file must be UTF-8 text: invalid UTF-8, a NUL byte, a byte-order
// mark after the start of the file or a carriage return that does not
// end a CRLF line end is refused with the line and the byte of the line
// (1-based), so that every token survives the JSON of a checkpoint
// unchanged. path must name a regular file (not a directory, device or
// FIFO) of at most opt.MaxFileBytes bytes with lines of at most
// opt.MaxLineBytes bytes.
func LoadParallelTSV(path string, opt TSVOptions) ([]Pair, LoadStats, error) {
	if _, _, err := opt.limits(); err != nil {
		return nil, LoadStats{}, err
	}
	f, err := openRegular(path, opt)
	if err != nil {
		return nil, LoadStats{}, fmt.Errorf("load parallel corpus: %w", err)
	}
	defer f.Close()
	pairs, stats, err := readParallelTSV(f, path, opt)
	if err != nil {
		return nil, stats, err
	}
	return pairs, stats, nil
}

// openRegular opens path for reading if it is a regular file within the
// size cap of opt. It opens without blocking, so that a FIFO without a
// writer is refused rather than waited on.
func openRegular(path string, opt TSVOptions) (*os.File, error) {
	_, maxFile, err := opt.limits()
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file but %s", path, fileKind(info.Mode()))
	}
	if info.Size() > maxFile {
		f.Close()
		return nil, fmt.Errorf("%s: %d bytes, more than the limit of %d bytes for a corpus file", path, info.Size(), maxFile)
	}
	return f, nil
}

// fileKind names the type of a file that is not regular.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "mode " + m.String()
}

// readParallelTSV parses r as LoadParallelTSV does; name prefixes errors.
// It reads at most one byte more than the file cap of opt, and holds at
// most one line of about the line cap at a time.
func readParallelTSV(r io.Reader, name string, opt TSVOptions) ([]Pair, LoadStats, error) {
	var (
		pairs []Pair
		stats LoadStats
		read  int64 // bytes read so far
		buf   []byte
	)
	maxLine, maxFile, err := opt.limits()
	if err != nil {
		return nil, stats, err
	}
	br := bufio.NewReader(io.LimitReader(r, maxFile+1))
	for {
		var readErr error
		// readLine's limit bounds the memory; the cap is checked below, on
		// the line without its end (and the first line without its BOM).
		buf, readErr = readLine(br, buf[:0], maxLine+len(bom)+len("\r\n"))
		read += int64(len(buf))
		if len(buf) == 0 && errors.Is(readErr, io.EOF) {
			break
		}
		stats.Lines++
		if read > maxFile {
			return nil, stats, fmt.Errorf("%s: line %d: %w", name, stats.Lines,
				notText("the file is longer than the limit of %d bytes for a corpus file", maxFile))
		}
		if errors.Is(readErr, errLineTooLong) {
			// Name a line-end or encoding fault first: a CR-only file or a
			// binary file is one long line.
			cut := bytes.TrimSuffix(bytes.TrimSuffix(buf, []byte("\n")), []byte("\r"))
			if err := checkText(cut, stats.Lines == 1, true); err != nil {
				return nil, stats, fmt.Errorf("%s: line %d: %w", name, stats.Lines, err)
			}
			return nil, stats, fmt.Errorf("%s: line %d: %w", name, stats.Lines,
				notText("longer than the limit of %d bytes for a line", maxLine))
		}
		if readErr != nil && !errors.Is(readErr, io.EOF) {
			return nil, stats, fmt.Errorf("%s: line %d: %w", name, stats.Lines, readErr)
		}
		line := bytes.TrimSuffix(bytes.TrimSuffix(buf, []byte("\n")), []byte("\r"))
		if err := checkText(line, stats.Lines == 1, false); err != nil {
			return nil, stats, fmt.Errorf("%s: line %d: %w", name, stats.Lines, err)
		}
		if stats.Lines == 1 {
			line = bytes.TrimPrefix(line, []byte(bom))
		}
		if len(line) > maxLine {
			return nil, stats, fmt.Errorf("%s: line %d: %w", name, stats.Lines,
				notText("longer than the limit of %d bytes for a line", maxLine))
		}
		if s := string(line); strings.TrimSpace(s) == "" {
			stats.Blank++
		} else if p, err := parseTSVPair(s, opt.Lowercase); err == nil {
			pairs = append(pairs, p)
		} else if opt.SkipMalformed {
			stats.Skipped++
		} else {
			return nil, stats, fmt.Errorf("%s: line %d: %w", name, stats.Lines, err)
		}
		if readErr != nil {
			break
		}
	}
	stats.Pairs = len(pairs)
	return pairs, stats, nil
}

// errLineTooLong ends readLine at its limit.
var errLineTooLong = errors.New("line too long")

// readLine appends the next line of br, its line end included, to buf. It
// returns errLineTooLong once the line is longer than limit bytes (with
// limit+1 bytes of it or more), io.EOF with a last line that has no line
// end, or with nothing at the end of the input.
func readLine(br *bufio.Reader, buf []byte, limit int) ([]byte, error) {
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > limit {
			return buf, errLineTooLong
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return buf, err
		}
	}
}

// bom is the UTF-8 byte-order mark, skipped at the start of a file.
const bom = "\ufeff"

// checkText refuses a line (its line end stripped) that is not UTF-8
// text: a NUL byte, a carriage return, a byte-order mark (but at the start
// of the first line), invalid UTF-8. first tells the first line of a
// file. A partial line (cut at the line cap) is checked for NUL and
// carriage returns only, as its last character may be cut. Offsets in
// messages are bytes of the line, from 1.
func checkText(line []byte, first, partial bool) error {
	from := 0
	if first {
		if bytes.HasPrefix(line, []byte{0xff, 0xfe}) || bytes.HasPrefix(line, []byte{0xfe, 0xff}) {
			return notText("UTF-16 byte-order mark at the start of the file; a corpus must be UTF-8 (convert it, e.g. with iconv -f UTF-16 -t UTF-8)")
		}
		if bytes.HasPrefix(line, []byte(bom)) {
			from = len(bom)
		}
	}
	for i := from; i < len(line); {
		c := line[i]
		if c < utf8.RuneSelf {
			switch c {
			case 0:
				return notText("NUL byte at byte %d; a corpus must be UTF-8 text (is it a binary or UTF-16 file?)", i+1)
			case '\r':
				return notText("carriage return not followed by a line feed at byte %d; lines must end in LF or CRLF (convert CR-only line ends, e.g. with tr '\\r' '\\n')", i+1)
			}
			i++
			continue
		}
		if partial {
			i++
			continue
		}
		r, size := utf8.DecodeRune(line[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return notText("invalid UTF-8 (byte 0x%02x) at byte %d; a corpus must be UTF-8 (convert it, e.g. with iconv)", c, i+1)
		case r == '\ufeff':
			return notText("byte-order mark U+FEFF at byte %d; one is allowed only at the start of the file (were files with marks concatenated?)", i+1)
		}
		i += size
	}
	return nil
}

// parseTSVPair splits one non-blank line into a pair.
func parseTSVPair(line string, lowercase bool) (Pair, error) {
	fields := strings.SplitN(line, "\t", 3)
	if len(fields) < 2 {
		return Pair{}, errors.New("no tab between source and target")
	}
	if lowercase {
		fields[0], fields[1] = strings.ToLower(fields[0]), strings.ToLower(fields[1])
	}
	p := Pair{Src: strings.Fields(fields[0]), Tgt: strings.Fields(fields[1])}
	switch {
	case len(p.Src) == 0:
		return Pair{}, errors.New("empty source")
	case len(p.Tgt) == 0:
		return Pair{}, errors.New("empty target")
	}
	return p, nil
}

// LoadParallelTSVSplits loads dir/name.train.tsv, dir/name.valid.tsv and
// dir/name.test.tsv (the layout of the shared eng-fra data: name "simple")
// with LoadParallelTSV, and returns the splits with the summed statistics.
func LoadParallelTSVSplits(dir, name string, opt TSVOptions) (ParallelCorpus, LoadStats, error) {
	var (
		corpus ParallelCorpus
		total  LoadStats
	)
	for _, split := range []struct {
		suffix string
		dst    *[]Pair
	}{
		{"train", &corpus.Train},
		{"valid", &corpus.Valid},
		{"test", &corpus.Test},
	} {
		pairs, stats, err := LoadParallelTSV(filepath.Join(dir, name+"."+split.suffix+".tsv"), opt)
		if err != nil {
			return ParallelCorpus{}, total, err
		}
		*split.dst = pairs
		total = total.add(stats)
	}
	return corpus, total, nil
}
