// Package em is the plain-Go float64 reference of probabilistic attention:
// attention read as MAP inference in a Gaussian mixture whose components are
// the memory units (Movellan & Gabbur, "Probabilistic Transformers",
// arXiv:2010.15583).
//
// The equations are those of /work/shared/docs/em-math.md (shared/docs/em-math.md
// in the project), which corrects the paper's typos; where the two differ,
// this package follows em-math.md. Each exported function cites the section
// it implements:
//
//	§1 component scores            (unexported: keyScores, jointScores)
//	§2 linked and free priors      InitialMixture
//	§3 value inference             InferValues
//	§4 online key adaptation       AdaptKeys
//	§5 value propagation           Propagate
//	§6 positivity transforms       RawParams, Softplus, InverseSoftplus
//	§7 EM objectives               KeyLogPosterior, PropagationLogPosterior
//	order of the phases            Run
//
// Everything here works on one example and one attention head, with inputs
// as plain slices, and favours clarity over speed: it is the ground truth
// the Gorgonia graph version (batched over examples and heads) is tested
// against, not a kernel to train with.
//
// Padding follows em-math.md §1: a padded memory unit gets score −∞ and so
// weight exactly 0, and a padded query unit is left out of every sum over
// query units. Padded entries are never read, so they may hold anything
// (even NaN); the outputs of padded units are defined (see Run) but carry no
// meaning.
package em
