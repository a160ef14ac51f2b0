// Package layers holds the differentiable building blocks of probformer's
// models, written as Gorgonia graphs through package graph: attention
// kernels, multi-head attention with key-padding masks, the Set Transformer
// blocks MAB, SAB, ISAB and PMA (Lee et al. 2019) and the models made of
// them.
//
// Layers are small structs of configuration whose Forward method adds nodes
// to a graph.Builder. Parameters are fetched by hierarchical name
// ("enc.0.mab.wq") from the builder's shared graph.Params, so a training
// graph and an evaluation graph of another batch shape built from the same
// configuration use the same weights.
//
// Shapes in comments: B batch, H heads, N queries, M keys, d head width.
package layers
