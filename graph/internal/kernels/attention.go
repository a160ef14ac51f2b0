package kernels

// PriorNet32 is one head's prior network as attention.c takes it: W1
// [d×16], its transpose W1t [16×d] (for the backward pass), B1, W2 [16]
// and B2, zero past the hidden width.
type PriorNet32 struct {
	W1, W1t, B1, W2 []float32
	B2              float32
}

// MaskNegInf is graph.MaskNegInf, the additive score that masks a key:
// large enough that exp underflows to exactly 0 next to any real score,
// small enough to stay finite in float32.
const MaskNegInf = -1e9
