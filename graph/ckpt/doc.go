// Package ckpt holds the trainer's file formats: checkpoints (Checkpoint,
// WriteCheckpoint, ReadCheckpoint, EncodeCheckpoint, DecodeCheckpoint), which
// carry a run's parameters, Adam's state, the step, the config and the
// generators' states so the run resumes exactly, and the safetensors format
// of exported models (WriteSafetensors, ReadSafetensors).
//
// Files are replaced atomically and read only when regular (graph/fileio).
// It imports package graph for Params and DType and graph/optim for Adam's
// state, and no Gorgonia; package graph does not import it.
package ckpt
