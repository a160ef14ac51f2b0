//go:build !cgo || purego

package kernels

// Without cgo, attention heads run in Go (graph/fusedattention.go,
// fusedbayes.go, fusedbayessample.go): every binding reports false.

func AttnHeadOK(int, int, int, int) bool { return false }

// AttnHeadFwd32 and AttnHeadBwd32 have no pure-Go fast path: attention
// runs its matrix products.
func AttnHeadFwd32([]float32, int, []float32, int, []float32, int, int, int, int, int,
	float32, []float32, bool, []float32, []float32, []float32, int) bool {
	return false
}
func AttnHeadBwd32([]float32, int, []float32, int, []float32, int, []float32, int,
	[]float32, []float32, int, int, int, int, float32, []float32, []float32, []float32) bool {
	return false
}

func AttnHeadFwdBias32([]float32, int, []float32, int, []float32, int, int, int, int, int,
	float32, []float32, bool, []float32, []float32, []float32, []float32, int) bool {
	return false
}

func KLHead32([]float32, []float32, int, int, int, int, float32, []float32, []float32, int,
	[]float32, []float32, float32, []float32, []float32, []float32, *[2]float64) (float64, bool) {
	return 0, false
}

func PriorHead32([]float32, int, int, int, int, []float32, []float32, []float32, []float32, float32, []float32,
	[]float32, int, []float32, []float32, []float32, []float32, []float32, []float32) bool {
	return false
}

func BayesHead32([]float32, int, []float32, []float32, int, int, int, int, int, float32, []float32, []float32,
	[]float32, *PriorNet32, *[7]float64, []float32, []float32, []float32, []float32) (float64, bool) {
	return 0, false
}

func BayesHeadBwd32([]float32, int, []float32, []float32, int, []float32, []float32, []float32, int, int, int, int,
	float32, float32, []float32, []float32, []float32, *PriorNet32, []float32, []float32) bool {
	return false
}

func BayesHeadBwdPart32([]float32, int, []float32, []float32, int, []float32, []float32, []float32, int, int, int,
	int, float32, float32, []float32, []float32, []float32, *PriorNet32, []float32, float64, []float64, int,
	[]float32) bool {
	return false
}

func BayesHeads32(int, []float32, int, []float32, []float32, int, int, int, int, int, float32, []float32, []float32,
	[]float32, []float32, int, []float32, *[7]float64, []float32, []float32, []float32, []float32, []float64) (uint32, bool) {
	return 0, false
}

func BayesHeadsBwd32(int, []float32, int, []float32, []float32, int, []float32, []float32, []float32, int, int, int,
	int, float32, float32, []float32, []float32, []float32, []float32, int, []float32, float64, []float64, int, int,
	[]float32) bool {
	return false
}

func SampleHeadFits(int, int, int, int) bool { return false }

// AttnHeadFwdRes32 and AttnHeadBwdRes32 have no pure-Go fast path either:
// attention adds its residual connection in Go.
func AttnHeadFwdRes32([]float32, int, []float32, int, []float32, int, int, int, int, int,
	float32, []float32, bool, []float32, []float32, []float32, []float32, int, []float32, int) bool {
	return false
}
func AttnHeadBwdRes32([]float32, int, []float32, int, []float32, int, []float32, int,
	[]float32, []float32, int, int, int, int, float32, []float32, []float32, []float32, []float32, int) bool {
	return false
}

// AttnHeadsFwdShared32 and AttnHeadsBwdShared32 have no pure-Go fast
// path either.
func AttnHeadsFwdShared32(*AttnBatch32, []float32, int) bool { return false }
func AttnHeadsBwdShared32(*AttnBatch32, []float32, []float32, []float32, []float32, int) bool {
	return false
}

func BayesForwardPass32(*BayesPass32, int) bool  { return false }
func BayesBackwardPass32(*BayesPass32, int) bool { return false }
