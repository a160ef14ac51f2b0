// Package em is probabilistic attention: attention read as MAP inference in
// a Gaussian mixture whose components are the memory units (Movellan &
// Gabbur, "Probabilistic Transformers", arXiv:2010.15583), with the
// mixture's keys, values, precisions and mixing prior adapted by a few EM
// iterations before the readout.
//
// MATH.md, next to this file, derives every equation the package computes
// and lists where it departs from the paper and why (the normalising
// constants log α_j and log β_j, the precision-weighted readout, the m/2 of
// the β update, the π update, among others). Doc comments cite it as
// "MATH.md §N":
//
//	§1 model, component scores, padding    keyScores, jointScores (unexported)
//	§2 linked prior; softmax attention     InitialMixture, LinkedPrior, FreePrior
//	§3 value inference (readout)           InferValues
//	§4 online key adaptation               AdaptKeys
//	§5 value propagation                   Propagate
//	   order of the phases                 Run
//	§6 positivity transforms, learning     RawParams, Softplus, InverseSoftplus,
//	                                       LayerHyperparams, DefaultRawParams
//	§7 EM objectives the tests check       KeyLogPosterior, PropagationLogPosterior
//
// The package has two halves that compute the same equations.
//
// The plain-Go float64 reference (Run and the phase functions above) works
// on one example and one attention head, with inputs as plain slices
// (Inputs, Mixture, Hyperparams). It favours clarity over speed: it is the
// ground truth that the graph version is tested against, not a kernel to
// train with.
//
// The graph version (Attend, Kernel) builds the same phases as Gorgonia
// nodes through package graph, batched over examples and heads, with the
// iterations unrolled so that the prior hyperparameters are learned end to
// end; it is what layers.EMKernel uses inside a model.
//
// Padding follows MATH.md §1: a padded memory unit gets score −∞ and so
// weight exactly 0, and a padded query unit is left out of every sum over
// query units. In the reference, padded entries are never read, so they may
// hold anything (even NaN); the outputs of padded units are defined (see
// Run) but carry no meaning.
//
// # Where EM attention lives
//
// One computation in five places, from the equations to the model:
//
//	the math        em/MATH.md §1–§7 (this folder)
//	the reference   em/reference.go and the phase files (plain Go, float64); the
//	                same phases composed of graph ops: em/graphphases.go
//	the fused op    graph.EMAttention: graph/emattention.go (the Gorgonia op and
//	                its adjoint's bookkeeping); the per-problem arithmetic in
//	                graph/internal/kernels/emgroup.go (forward) and
//	                emgroupback.go (backward), both dtypes
//	the C kernel    graph/internal/kernels/em.c (float32, AVX2/FMA; bound in
//	                em_cgo.go), step for step the Go of emgroup*.go
//	the layer       em.Attend and em.AttendHeads (attend.go) on the fused op;
//	                layers.EMKernel (layers/emattention.go) calls AttendHeads
//	                inside a model
//
// Bayesian attention, the other probabilistic kind, has the same map in
// package layers (layers/doc.go).
package em
