//go:build cgo && !purego

// em.c a second time, for CPUs with AVX-512 (see EM_TARGET there): the
// entry points pf_em_forward_avx512 and pf_em_backward_avx512, which
// em.c's pf_em_forward and pf_em_backward call when iv[16] is set.
#define EM_AVX512 1
#include "em.c"
