// Package kernels is the arithmetic under graph's fused ops: the C
// kernels with their Go bindings, the matrix-product wrapper, the worker
// pool that splits a kernel over the cores, the fast exponential, the
// dropout mask streams, and EM attention's per-problem forward and
// backward passes. Its API is plain slices and ints; it imports neither
// Gorgonia nor its tensors (a test keeps it so), and package graph is its
// only caller (graph/fused*.go, emattention.go, dropout.go, noise.go hold
// the Gorgonia side).
//
// # The C files
//
// Each C file has one binding, X_cgo.go for X.c, and its pure-Go twin
// X_purego.go; kernels.h declares every C entry point, by file.
//
//	gemm.c       row-major sgemm/dgemm: AVX-512 and AVX2/FMA packed kernels, portable C otherwise (Gemm, GemmBias)
//	softmax.c    row softmax, row exponentials, row max and sum, scale-and-shift (SoftmaxRows32, ExpRow, MaxSum32, ScaleShift32)
//	layernorm.c  layer norm rows, forward and backward (LayerNormFwd32, LayerNormBwd32)
//	vec.c        column sums, Adam, product, repeated add, ReLU and its gradient, the finiteness check of Adam's gradients, bit for bit their Go loops (ColSum32, Adam32, Finite32, ...)
//	attention.c  one attention head forward and backward, with dropout or a score bias; the Bayesian heads: KL rows, prior network, sampled head (AttnHead*, KLHead32, PriorHead32, BayesHead*), and a pass of sampled heads as one pool.c job (BayesForwardPass32, BayesBackwardPass32)
//	bayes.c      Weibull noise, scale·log(−log u) (WeibullLogNoise32, WeibullBiasFast32); the uniform and normal noise streams filled 8 hashes (16 values) at a time with AVX-512, the ziggurat's rejected draws retried 8 at a time, the Go loop's values bit for bit (UniformNoise32, NormalNoise32)
//	dropout.c    counter-based dropout masks, portable and AVX2 (FillMask; FillMaskGo is the Go reference)
//	em.c         one EM attention problem, forward and backward (EMForwardC, EMBackwardC; EMForward, EMBackward in emgroup.go and emgroupback.go are the Go reference), and a pass of them as one pool.c job (EMForwardPass32, EMBackwardPass32)
//	em512.c      em.c compiled again for AVX-512, 16 lanes on the [N×M] passes and products, its values the AVX2 build's bit for bit (EMAVX512; PROBFORMER_SIMD=avx2 or EMUseAVX512 = false keeps AVX2)
//
// and the headers simd.h (horizontal sums and maxima, exp_le0, an 8×8
// transpose: the helpers several C files share) and bayes.h (log_pos,
// log_fast, the Weibull bias; bayes.c and attention.c).
//
// # Build tags
//
// The C files and the X_cgo.go bindings build with cgo and without the
// purego tag (//go:build cgo && !purego). With -tags purego, or
// CGO_ENABLED=0, the X_purego.go twins build instead: Gemm runs gonum's
// pure-Go BLAS, and every other binding reports false (or does nothing
// and says so), so graph runs its Go loops; EM problems run
// emgroup.go's Go code; FillMask is FillMaskGo. The results of a purego
// build are the Go paths' (the same masks and noise; float32 sums may
// round differently from the C kernels).
//
// # CPU dispatch
//
// The C is compiled for any x86-64 (-O3, no -mavx2): the AVX2/FMA
// functions carry __attribute__((target("avx2,fma"))), and gemm.c's
// pf_has_avx2 asks the CPU once, at run time (hasAVX2). Without AVX2 and
// FMA, gemm.c and dropout.c run their portable C loops and the other
// bindings report false, so the caller takes its Go loop.
//
// gemm.c's float32 packed path (n ≥ 16 and k ≥ 32) has a second kernel
// for CPUs with AVX-512: 12×32 blocks of C in 24 zmm accumulators, B
// packed in 32-column panels, its functions compiled with
// __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
// so the rest of the file builds as before. It runs where pf_has_avx512
// finds AVX-512 F/VL/BW/DQ and FMA in cpuid and the OS saving the opmask
// and zmm state (XCR0 bits 5–7 with bits 1–2), asked once (gemmLevel,
// GemmKernelName); elsewhere the AVX2 kernel does. Its values are the
// AVX2 kernel's bit for bit, not merely close: each element of C is a sum
// over one 128-deep pass of k from +0, one fused multiply-add per p in
// order, then C ← fma(α, sum, C) (or the bias on the first pass, or with
// β = 0 a read-only row of +0, so that C is neither cleared first nor
// read: fma(α, sum, +0) is what clearing it gave, bit for bit, and NaN
// left in C does not leak in, as BLAS has it for β = 0;
// TestGemmBetaZeroIgnoresC), in both kernels and at every edge; they
// differ only in how C is tiled, which no
// element depends on (TestGemmAVX512IsAVX2 compares the bits over sizes
// around both kernels' blocks, transposes, strides, β and bias). So a
// training run gives the same numbers on either. The environment
// variable PROBFORMER_GEMM=avx2 (GemmEnv), read when the first product
// runs, keeps the AVX2 kernel, to time one against the other. An
// untransposed B's full 32-column panels are read where they lie
// (micro512u_*, loads ldb apart): a panel is B's rows of 32 already, so
// only the last, narrower panel is packed. The direct (unpacked) float32
// path (n < 16 or k < 32: the models' k = 8 input layers and n = 8
// outputs) has an AVX-512 twin too, blocks of up to 64 columns and 6–12
// rows, with the same operations per element as sgemm_avx2, its
// compiled tail (fma(α·a, b, c) for the last n mod 8 columns) written out
// (TestGemmDirect512IsAVX2). float64 products use AVX2 on both.
//
// The attention heads (pf_attn_head_fwd, _fwd_bias, _bwd: the models'
// softmax attention, with dropout or a score bias) and the row softmax
// (pf_softmax_rows) have AVX-512 twins too (the …512 entry points,
// PF_AVX512 in simd.h), chosen once by simdLevel on the same test as
// gemm.c's; the environment variable PROBFORMER_SIMD=avx2 (SIMDEnv)
// keeps their AVX2 paths, and those of gemm.c and em.c as well: one
// switch for every kernel. A head of width 16 is one zmm a row, rows of
// 32 keys two; other widths end in a masked vector, so scores go
// straight into p. With at most 32 keys the AVX-512 forward makes a
// block of rows' scores, bias and softmax in registers, and the backward
// its dP and dS, without storing them between passes. Their float32
// values are the AVX2 paths' bit for bit,
// not merely close: each product element is the same fused multiply-add
// chain, exp_le0_512 is exp_le0 lane for lane, and the row sums (the
// softmax's Σe, the backward's Σ P·dP) add 8-lane blocks in the AVX2
// order (add_halves, fma_halves) before the same hsum. The tests
// (simd512_test.go) run both levels explicitly, against each other and
// against float64. EM attention's AVX-512 build (em512.c, EMAVX512) is
// the AVX2 build's values bit for bit in the same way
// (TestEMAVX512IsAVX2), so a float32 run, whatever its attention kind,
// gives the same numbers on a CPU with AVX-512 and on one with AVX2
// only. The Bayesian heads (pf_bayes_head, _bwd) take the level too:
// their products and transposes, the sampled head's noise, maxima,
// exponentials and quotients and the KL's passes run 16 lanes wide, pass
// by pass over a head's rows (a row at a time waited on its own
// reductions and logarithms), and the backward is the softmax head's
// with the KL's term in dS: each element the AVX2 loop's operations in
// the same order and the row reductions folded over 8-lane blocks in the
// AVX2 order (TestBayesHeadAVX512IsAVX2). Layer norm
// and the other rows stay AVX2: layer norm's rows of 64, bound by the
// same chain of 8-lane sums, timed no faster 16 lanes wide.
//
// A worker's share of softmax heads (pf_attn_heads_fwd, _bwd) reads each
// batch element's rows of 16 floats, one cache line each and far apart,
// once: on AVX-512 it prefetches the next element's rows (q, k, v, the
// readout and weights forward; q, G, k, v, P and the gradients backward)
// in steps between the current heads' phases (pf_plan), where the
// transposes and first products used to wait on each line in turn. A
// worker's share of sampled Bayesian heads (pf_bayes_job_run) does the
// same with the next element's noise, weights and scores as well, where
// one burst of those prefetches at the element's start waited for free
// miss buffers. A prefetch loads no value, so the bits are the same.
//
// # Threads
//
// Nothing depends on the number of threads: RunShares and ParallelFor
// split work by index, and Gemm shares a product so that each element is
// computed the same way. A float32 product on gemm.c's packed path (n ≥
// 16, k ≥ 32, m·n·k ≥ 2¹⁸) is shared by blocks: each thread (the caller
// and the helpers, pf_sgemm_par) takes the next block from a counter in
// shared memory, so one whose core another process holds for a while
// takes fewer blocks, and none waits for a fixed half. The caller hands
// the product over in C, in its one cgo call (pool.c's pf_pool_sgemm):
// it posts the shares to the helpers' slots, runs its own and waits for
// theirs there. A helper polling in Go runs its share with one cgo call
// (pf_pool_take); one idle for helperSpin sleeps in C (pf_pool_serve),
// where the caller wakes it from a condition variable (on Linux, where
// it can, on another CPU than the caller's: pf_pool_wake), and it runs
// the share without returning to Go; a Go job makes it return. So a product
// costs no RunShares hand-over and no goroutine wake-up, and one helper
// per core serves both kinds of work (separate C threads for the
// products, tried first, left the Go helpers asleep when their work came
// and made the Set Transformer step slower). One product holds the pool
// at a time; a product started while another holds it runs every share
// on its caller (TestPoolConcurrentCallers), and with GOMAXPROCS 1 no
// product is shared.
// With many rows the blocks are runs of rows, multiples of 12, each a
// quarter of the rows left (at most ≈ m/8, at least a quarter of that),
// so that the threads' last blocks are small and neither waits long for
// the other's; the caller takes them from the first row down and the
// helpers from the last row up (pf_claim_rows), so each thread computes
// the rows whose inputs the job before left in its own cache (below).
// Each thread packs all of B for itself when it takes its first block
// (so neither waits on the other's packing).
// With at most 128 rows and two or more blocks of columns (weight
// gradients), the blocks are columns, 32 or more wide (≈8 of them where
// n allows), and each thread packs only its own blocks of B; where the
// columns make fewer than 8 blocks and the AVX-512 kernel reads B in
// place (the 64×64 weight gradients over k = 1024), the blocks are tiles
// of rows × columns. Which thread takes which block, and where two ends
// of rows meet, are a matter of timing (TestGemmSharedBlockEdges,
// TestClaimRowsBlocks). Every element is still one micro-kernel's sum, pass by pass over k
// in order, so the values are pf_sgemm's on one thread bit for bit
// (TestGemmSharedIsOneThread, over both modes, block sizes, 1–3 workers
// and both kernels; TestGemmThreadsSameBits, GOMAXPROCS 1 against 2).
// The direct path's products are shared by blocks of rows through the
// same slots (mode 2). float64, portable and purego products, and the
// small ones, still halve the rows.
//
// The same slots run range jobs (pf_pool_range): a kernel kind, its
// arrays, and the chunk bounds SplitRange would give, the chunks taken
// from the two ends of a counter (pf_claim). Element-wise loops (add, repeated add, product, ReLU
// and its gradient), layer norm forward, the residual and layer norm
// forward, layer norm backward's two fixed halves, and column sums (by
// blocks of 32 columns, each summed alone down the rows) go to the
// helpers this way, each chunk the kernel call it was, so the values are
// those of the Go hand-over they replace (TestPoolRangeSameBits,
// TestColSumSharedSameBits). The float32 attention heads of an op are
// one pool.c job (pf_pool_attn): each thread takes whole batch elements,
// all their heads, from a counter on the caller's C stack, claiming the
// next before it computes the one it holds so that it can prefetch it
// (AttnHeadsFwdShared32, _Bwd; TestAttnHeadsSharedIsOneWorker). Nothing
// is summed across elements, so who takes which changes no bit. A pass of
// an EM op's problems is one such job too (pf_pool_em, EMPass32: whole
// batch elements from a counter, each problem the em.c call graph made
// for it, with its own slot for the per-head gradient sums), and so is a
// pass of the sampled Bayesian heads (pf_pool_bayes, BayesPass32: each
// element's heads one pf_bayes_heads or pf_bayes_heads_bwd call, the
// heads it skips left to graph's Go loop).
//
// The pool.c jobs that hand out batch elements, chunks or runs of rows
// (range jobs, the heads', EM's and the Bayesian heads' elements, the
// products' row blocks of modes 0 and 2) hand them out from both ends
// (pf_claim, pf_claim_rows): the caller takes the first ones, the
// helpers the last. Column blocks (weight gradients) and graph's Go jobs
// still count from one end. A step's jobs follow one another
// over the same batch, and a job reads what the one before wrote: so each
// thread reads the rows it wrote itself, from its own L2, where taking
// turns from one counter gave each thread half of its rows from the other
// core's cache. The Set Transformer step ran some 5% faster so; which
// thread takes what still changes no value.
//
// A helper that has not started its share when the caller
// finishes its own gives the share back (RunShares, or pf_pool_sgemm,
// runs it on the caller, where it finds no block left), so a product
// never waits for a parked helper to wake.
package kernels
