// Package losses holds probformer's training objectives, as graph nodes,
// and its evaluation criteria, on plain Go values: regression losses with
// masks, cross-entropy, and corpus BLEU.
package losses
