//go:build !cgo || purego

package graph

// Without cgo, Bayesian attention runs in Go (fusedbayes.go).

func attnHeadFwdBias32([]float32, int, []float32, int, []float32, int, int, int, int, int,
	float32, []float32, bool, []float32, []float32, []float32, []float32, int) bool {
	return false
}

func weibullLogNoise32([]float32, []float32, float32) bool { return false }

func weibullBiasFast32([]float32, []float32, float32) bool { return false }

func klHead32([]float32, []float32, int, int, int, int, float32, []float32, []float32, int,
	[]float32, []float32, float32, []float32, []float32, []float32, *[2]float64) (float64, bool) {
	return 0, false
}

func priorHead32([]float32, int, int, int, int, []float32, []float32, []float32, []float32, float32, []float32,
	[]float32, int, []float32, []float32, []float32, []float32, []float32, []float32) bool {
	return false
}

func bayesHead32([]float32, int, []float32, []float32, int, int, int, int, int, float32, []float32, []float32,
	[]float32, *priorNet32, *[7]float64, []float32, []float32, []float32, []float32) (float64, bool) {
	return 0, false
}

func bayesHeadBwd32([]float32, int, []float32, []float32, int, []float32, []float32, []float32, int, int, int, int,
	float32, float32, []float32, []float32, []float32, *priorNet32, []float32, []float32) bool {
	return false
}

func sampleHeadFits(int, int, int, int) bool { return false }
