// Package graph is probformer's only door to Gorgonia.
//
// Gorgonia v0.9.18 computes many things silently wrong (see
// GORGONIA.md): Reshape aliases its input, SoftMax
// overflows to NaN on the last axis, the gradients of Dropout and
// InverseSqrt are wrong, LogSumExp does not build, AdamW never updates,
// random nodes and same-named parameters merge. This package owns every one
// of those traps so that no other package has to know them. Other packages
// never import gorgonia.org/gorgonia; a test enforces it (banned_test.go,
// which also keeps the broken names out of this package except in the one
// wrapper allowed each).
//
// # Params, Builder and Program
//
// Params (params.go) holds named parameters (hierarchical names such as
// "enc.0.mab.wq") initialised from the run's own seeded RNG by Init
// functions (Glorot, Normal, Uniform, ...), in the DType of the run
// (dtype.go). Builder (builder.go) adds nodes to one graph: parameters,
// inputs, constants, outputs, the loss and penalties (penalty.go). Program
// (program.go) is a compiled graph with its inputs, outputs and tape
// machine; a training program and an evaluation program of another batch
// shape share the same parameter tensors. Evaluate (evaluate.go) compiles
// and runs an evaluation program once, and CheckGradients (gradcheck.go)
// is the float64 finite-difference checker that every layer test uses.
//
// # Safe ops
//
// The element-wise, broadcast, reduction and shape ops of ops.go wrap
// Gorgonia's with the fixes of GORGONIA.md: reductions over middle axes go
// through a transpose and such broadcasts are refused, Reshape copies
// (reshape.go), Softmax, LogSoftmax, LogSumExp and MaskedSoftmax subtract
// each row's max (softmax.go), Embedding, EmbedTokens (a Transformer's
// input layer as one fused op) and CheckIndices check every id
// (embedding.go), Lgamma and Digamma (lgamma.go) have right gradients.
//
// # Fused ops
//
// The ops a training step spends its time in are custom Gorgonia ops
// (customop.go: a kernel with a forward, an output shape and the graph of
// its gradients), each computing forward and backward in one pass over
// plain slices:
//
//	fusedlinear.go        Linear, LinearReLU, LinearReLUDropout (linear.go), the matrix products of their gradients
//	fusedlinearconcat.go  LinearConcat: projections of one input side by side, one GEMM
//	fusedbmm.go           BatchedMatMul
//	fusedelementwise.go   Add, Mul, Scale on same-shaped or repeated operands
//	fusedrelu.go          ReLU
//	fusedlayernorm.go     LayerNorm
//	fusedaddlayernorm.go  AddLayerNorm, DropoutAddLayerNorm: a residual add and the layer norm after it
//	fusedattention.go     Attention, AttentionWeights; attentiondropout.go: AttentionDropout, AttentionPacked and ResidualAttentionPacked (on LinearConcat's packed heads)
//	fusedcrossentropy.go  SoftmaxCrossEntropy
//	fusedprojxent.go      ProjectedCrossEntropy (output projection and cross-entropy, without the logits)
//	fusedbayes.go         BiasedAttention, WeibullLogNoise, BayesAttentionKL (Bayesian attention, layers/BAYES.md)
//	fusedbayesprior.go    BayesPriorLogits, the contextual prior network
//	fusedbayessample.go   BayesAttentionSample: prior, sample, readout and KL of a Bayesian head at once
//	emattention.go        EMAttention: attention as EM in a Gaussian mixture (em/MATH.md)
//
// These files hold the Gorgonia side (shapes, inputs, saved state, the
// gradient nodes) and the Go loops of each op; the arithmetic they share
// and the C kernels are in graph/internal/kernels (below).
//
// # Randomness
//
// Nothing in a graph draws its own random numbers. Builder.Dropout
// (dropout.go) and Builder.Noise (noise.go) make inputs that the training
// loop fills before each run from the run's generator (Program.DrawDropout,
// Program.DrawNoise): each mask or noise tensor takes one draw as the seed
// of a counter-based stream (SplitMix64 for masks, a ziggurat normal or a
// uniform for noise), so the values do not depend on the number of cores,
// on cgo, or on how the tensor is split between processes.
//
// # Shards
//
// shard.go makes a training program one shard of a data-parallel batch
// (Program.Shard): the program keeps its part of every batched input and
// of every mask and noise stream, and its gradients pack into one buffer
// (AppendGradients, SetGradients) to be summed over the processes.
//
// # Checkpoints, safetensors and Adam
//
// They are packages of their own beside this one, and import no Gorgonia:
// graph/optim is the Adam optimizer with saveable moments (Gorgonia's keep
// theirs unexported, and its AdamW never updates), reading a training
// program's gradients through Program.Params, Program.GradientData and
// Param.Data; graph/ckpt writes and reads checkpoints (parameters, Adam's
// state, the step and the config) and the safetensors format for export;
// graph/fileio replaces a file only once its new contents are on disk
// (WriteFileAtomic) and opens only regular files (OpenRegular). This
// package imports none of them.
//
// # The kernels
//
// The arithmetic under the fused ops is package graph/internal/kernels, on
// plain slices with no Gorgonia: the C files (gemm.c, softmax.c,
// layernorm.c, vec.c, attention.c, bayes.c, dropout.c, em.c) with one Go
// binding each and its pure-Go twin (-tags purego), the matrix products
// (kernels.Gemm), the worker pool that splits a kernel over the cores
// (kernels.ParallelFor, RunShares, SplitRange), the fast exponential, the
// dropout mask stream, and EM attention's per-problem forward and backward
// passes. Its doc comment lists the C files, the build tags and the CPU
// dispatch (AVX2/FMA chosen at run time). The tests of the fused ops share
// graph/graphtest: run a program once, keep its outputs and gradients, and
// compare runs to a tolerance.
package graph
