// Package datasets generates and loads the data of probformer's tasks as
// plain Go slices: padded batches with masks, ready to feed to a graph.
// Every generator draws from a caller's seeded *rand.Rand, so a run's data
// is reproducible and its generator state can be checkpointed.
//
// # TSV corpora
//
// LoadParallelTSV reads a parallel corpus of one pair a line,
// source<TAB>target, and splits each side on whitespace. The vocabularies
// built from the tokens are stored in a checkpoint as JSON, which can
// carry UTF-8 text only, so the loader accepts UTF-8 text only, as
// Hugging Face tokenizers and most NLP tools do, and refuses the rest
// rather than rewrite it. The error names the file, the line and the byte
// of the line (from 1), as "corpus.tsv: line 12: invalid UTF-8 (byte
// 0xe9) at byte 7; ...". Refused, even with TSVOptions.SkipMalformed:
//
//   - invalid UTF-8 (a Latin-1 or Windows-1252 file: convert it with
//     iconv), and a UTF-16 file, named as such by its byte-order mark;
//   - a NUL byte;
//   - a byte-order mark (U+FEFF) anywhere but at the very start of the
//     file, where one is skipped: in the middle it would become part of a
//     token, as when files with marks are concatenated;
//   - a carriage return that is not part of a CRLF line end, so a file
//     with classic Mac (CR-only) line ends is refused at its line 1 rather
//     than read as one long line.
//
// LF and CRLF line ends, a last line without one, and blank lines are
// accepted.
//
// The loader reads regular files only: a directory, a device such as
// /dev/zero, a FIFO or a socket is refused up front with its name (a FIFO
// is opened without blocking, so that it is refused rather than waited
// on). A line may hold at most DefaultMaxTSVLineBytes = 64 KiB, its line
// end excluded, and a file at most DefaultMaxTSVFileBytes = 1 GiB. A file
// larger than its cap is refused before it is read; a line beyond its cap,
// or a file that grows past its cap while read, is refused with the line
// where the cap was crossed.
// TSVOptions.MaxLineBytes and MaxFileBytes change the caps. The pairs of a
// file take several times its size in memory.
//
// A Vocab holds only non-empty, distinct, valid UTF-8 words, and its JSON
// decoder refuses input that encoding/json would decode lossily (invalid
// UTF-8, an escaped lone UTF-16 surrogate), so a vocabulary read from a
// checkpoint is the one that was saved, or an error.
package datasets
