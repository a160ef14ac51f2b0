// Package graph is probformer's only door to Gorgonia.
//
// Gorgonia v0.9.18 computes many things silently wrong (see
// GORGONIA.md): Reshape aliases its input, SoftMax
// overflows to NaN on the last axis, the gradients of Dropout and
// InverseSqrt are wrong, LogSumExp does not build, AdamW never updates,
// random nodes and same-named parameters merge. This package owns every one
// of those traps so that no other package has to know them:
//
//   - Params holds named parameters (hierarchical names such as
//     "enc.0.mab.wq") initialised from the run's own seeded RNG;
//   - Builder adds nodes to one graph through safe ops (Reshape copies,
//     Softmax subtracts the max, Dropout is a fed mask, ...);
//   - Program is a compiled graph with its inputs, outputs and tape machine;
//     a training program and an evaluation program of another batch shape
//     share the same parameter tensors;
//   - Adam is an optimizer whose moments can be saved and restored;
//   - CheckGradients is the float64 finite-difference checker that every
//     layer test uses.
//
// Other packages never import gorgonia.org/gorgonia; a test enforces it.
package graph
