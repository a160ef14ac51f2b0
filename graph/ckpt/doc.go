// Package ckpt holds the trainer's file formats: checkpoints (Checkpoint,
// WriteCheckpoint, ReadCheckpoint, EncodeCheckpoint, DecodeCheckpoint), which
// carry a run's parameters, Adam's state, the step, the config and the
// generators' states so the run resumes exactly, and the safetensors format
// of exported models (WriteSafetensors, ReadSafetensors).
//
// # The checkpoint format
//
// Version 1, all integers little-endian:
//
//	bytes  content
//	22     magic "probformer checkpoint\n"
//	4      format version (uint32); a newer version is refused with a clear error
//	8 + n  header length n (uint64) and a JSON header: dtype, step, the run's
//	       config (YAML), latest metrics, RNG states (data, dropout), task
//	       state (vocabularies, say), loop state, parameter names and
//	       shapes, Adam's step and which parameters have moments
//	…      each parameter in the run's dtype, then Adam's first and second
//	       moments (float64), in header order
//	32     SHA-256 of everything before it
//
// A truncated file, any flipped byte, or a file longer than its header
// says is refused with an error naming the file, and so is a value that
// is not finite (named by its parameter). A file is read only if it is
// regular (a FIFO or /dev/zero is refused before a byte is read), and
// with a bound taken from its own header. Loading into a model of
// another dtype is an error.
//
// # Safetensors
//
// WriteSafetensors writes Hugging Face's format: an 8-byte header
// length, a JSON header naming each tensor's dtype (F32, F64), shape and
// byte range, and a __metadata__ map of strings (the run's config, the
// step, "format": "pt"), then the tensors' bytes. ReadSafetensors reads
// it back from any reader; ReadSafetensorsFile from a regular file, the
// header bounded by the file's size.
//
// # Where it sits
//
// Files are replaced atomically and read only when regular (graph/fileio).
// It imports package graph for Params and DType and graph/optim for Adam's
// state, and no Gorgonia; package graph does not import it.
package ckpt
