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
//
// # Where the probabilistic kinds live
//
// Bayesian attention (Weibull or log-normal attention weights with a
// contextual or fixed prior):
//
//	the math        layers/BAYES.md §1–§8 (this folder)
//	the reference   layers/bayes_reference.go: the same layer composed of graph ops
//	the fused ops   graph.BiasedAttention, graph.WeibullLogNoise, graph.BayesAttentionKL
//	                (graph/fusedbayes.go), graph.BayesPriorLogits
//	                (graph/fusedbayesprior.go), graph.BayesAttentionSample
//	                (graph/fusedbayessample.go)
//	the C kernels   graph/internal/kernels/attention.c (the heads: KL rows, prior
//	                network, sampled head; attention_cgo.go) and
//	                graph/internal/kernels/bayes.c (the Weibull noise; bayes_cgo.go)
//	the layer       BayesAttention (layers/bayes.go)
//
// EM attention (attention as EM inference in a Gaussian mixture):
//
//	the math        em/MATH.md §1–§7
//	the reference   package em: em/reference.go (plain Go), em/graphphases.go
//	                (composed graph)
//	the fused op    graph.EMAttention (graph/emattention.go), with the
//	                per-problem arithmetic in graph/internal/kernels/emgroup.go
//	                and emgroupback.go
//	the C kernel    graph/internal/kernels/em.c
//	the layer       em.Attend, em.AttendHeads (em/attend.go); EMKernel
//	                (layers/emattention.go) calls AttendHeads
package layers
