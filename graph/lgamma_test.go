package graph

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// Reference values from mpmath (loggamma, digamma) at 40 digits.
var gammaFunctionTable = []struct {
	x, lgamma, digamma float64
}{
	{1e-3, 6.9071788853838537, -1000.5755719318103},
	{0.1, 2.2527126517342059, -10.423754940411076},
	{0.25, 1.2880225246980775, -4.2274535333762654},                     // ψ = −γ − π/2 − 3 ln 2
	{1.0 / 3, 0.98542064692776713, -3.1320337800208065},                 // ψ = −γ − π/(2√3) − (3/2) ln 3
	{0.5, 0.57236494292470009, -1.9635100260214235},                     // lgamma = log √π, ψ = −γ − 2 ln 2
	{1, 0, -0.57721566490153286},                                        // ψ = −γ
	{1.4616321449683622, -0.12148629053584961, -9.2412655217294275e-17}, // the minimum of Γ
	{1.5, -0.12078223763524522, 0.036489973978576521},
	{2, 0, 0.42278433509846714}, // ψ = 1 − γ
	{2.5, 0.28468287047291916, 0.70315664064524319},
	{3, 0.69314718055994531, 0.92278433509846714},
	{7.5, 7.534364236758733, 1.9467574842460868},
	{10, 12.80182748008147, 2.2517525890667211},
	{50, 144.56574394634489, 3.9019896734278922},
	{100, 359.1342053695754, 4.6001618527380874},
	{1e4, 82099.717496442377, 9.2102903711428494},
}

// closeTo reports |got − want| ≤ tol · max(1, |want|).
func closeTo(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*math.Max(1, math.Abs(want))
}

func TestLgammaDigammaValues(t *testing.T) {
	t.Parallel()
	n := len(gammaFunctionTable)
	xs := make([]float64, n)
	for i, c := range gammaFunctionTable {
		xs[i] = c.x
	}
	eval := func(dt DType, op func(*Node) *Node) []float64 {
		out, _ := runForward(t, dt, func(b *Builder) *Node { return op(b.Constant("x", []int{n}, xs)) })
		return out
	}
	lg, dg := eval(Float64, Lgamma), eval(Float64, Digamma)
	lg32, dg32 := eval(Float32, Lgamma), eval(Float32, Digamma)
	for i, c := range gammaFunctionTable {
		if !closeTo(lg[i], c.lgamma, 1e-15) {
			t.Errorf("lgamma(%v) = %.17g, want %.17g", c.x, lg[i], c.lgamma)
		}
		if !closeTo(dg[i], c.digamma, 1e-15) {
			t.Errorf("digamma(%v) = %.17g, want %.17g (diff %.3g)", c.x, dg[i], c.digamma, dg[i]-c.digamma)
		}
		// float32 rounds x itself, so compare with float64 of the rounded x.
		x32 := float64(float32(c.x))
		l, _ := math.Lgamma(x32)
		if !closeTo(lg32[i], l, 1e-6) {
			t.Errorf("float32 lgamma(%v) = %v, want %v", c.x, lg32[i], l)
		}
		if !closeTo(dg32[i], digamma(x32), 1e-6) {
			t.Errorf("float32 digamma(%v) = %v, want %v", c.x, dg32[i], digamma(x32))
		}
	}
}

// TestDigammaIdentities checks ψ against identities that hold for every x,
// beyond the table: the recurrence across the series' switch-over point, and
// the duplication formula ψ(2x) = ½ψ(x) + ½ψ(x+½) + ln 2.
func TestDigammaIdentities(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		x := math.Exp(rng.Float64()*12 - 6) // 0.0025 .. 400
		if d := digamma(x+1) - digamma(x) - 1/x; math.Abs(d) > 2e-15*math.Max(1, 1/x) {
			t.Errorf("ψ(%v+1) − ψ(%v) − 1/x = %.3g", x, x, d)
		}
		if d := digamma(2*x) - 0.5*digamma(x) - 0.5*digamma(x+0.5) - math.Ln2; math.Abs(d) > 2e-15*math.Max(1, 1/x) {
			t.Errorf("duplication at %v off by %.3g", x, d)
		}
	}
	for _, x := range []float64{0, -1, -0.5, math.NaN()} {
		if !math.IsNaN(digamma(x)) {
			t.Errorf("digamma(%v) = %v, want NaN", x, digamma(x))
		}
	}
	if !math.IsInf(digamma(math.Inf(1)), 1) {
		t.Error("digamma(+Inf) is not +Inf")
	}
}

// uniformIn is an initialiser U(lo, hi), to keep x > 0.
func uniformIn(lo, hi float64) Init {
	return func(rng *rand.Rand, shape []int) []float64 {
		v := make([]float64, shapeSize(shape))
		for i := range v {
			v[i] = lo + (hi-lo)*rng.Float64()
		}
		return v
	}
}

func TestLgammaGradient(t *testing.T) {
	t.Parallel()
	ranges := []struct{ lo, hi float64 }{{0.1, 0.5}, {0.5, 2}, {2, 10}, {10, 50}}
	for i, r := range ranges {
		res, err := CheckGradients(NewParams(Float64, uint64(i+1)), func(b *Builder) *Node {
			return Lgamma(b.Param("x", []int{2, 3, 4}, uniformIn(r.lo, r.hi)))
		}, GradCheckOptions{Seed: uint64(i)})
		if err != nil {
			t.Fatalf("x in [%v, %v]: %v", r.lo, r.hi, err)
		}
		t.Logf("x in [%v, %v]: rel err %.2g", r.lo, r.hi, res[0].RelErr)
	}
	// Inside a chain, with the input reused: the upstream gradient and the
	// fan-out both reach the kernel.
	_, err := CheckGradients(NewParams(Float64, 9), func(b *Builder) *Node {
		x := b.Param("x", []int{3, 4}, Normal(1))
		return Mul(Lgamma(AddScalar(Softplus(x), 0.2)), x)
	}, GradCheckOptions{Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLgammaFloat32 runs the float32 forward and backward and compares them
// with float64 math on the same (rounded) inputs.
func TestLgammaFloat32(t *testing.T) {
	t.Parallel()
	ps := NewParams(Float32, 1)
	prog, err := Compile(ps, func(b *Builder) error {
		x := b.Param("x", []int{2, 5}, uniformIn(0.1, 20))
		b.SetLoss(Sum(Lgamma(x)))
		return nil
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}
	grads, err := prog.Gradients()
	if err != nil {
		t.Fatal(err)
	}
	xs := ps.Lookup("x").Values()
	var want float64
	for i, x := range xs {
		l, _ := math.Lgamma(x)
		want += l
		if !closeTo(grads["x"][i], digamma(x), 1e-6) {
			t.Errorf("float32 grad at %v = %v, want %v", x, grads["x"][i], digamma(x))
		}
	}
	if !closeTo(prog.Loss(), want, 1e-6) {
		t.Errorf("float32 Σ lgamma = %v, want %v", prog.Loss(), want)
	}
}

func TestLgammaRejectsNonPositive(t *testing.T) {
	t.Parallel()
	for _, bad := range []float64{0, -0.5, math.NaN()} {
		prog, err := Compile(NewParams(Float64, 1), func(b *Builder) error {
			b.Output("y", Lgamma(b.Constant("x", []int{3}, []float64{1, bad, 2})))
			return nil
		}, false)
		if err != nil {
			t.Fatal(err)
		}
		err = prog.Run()
		if err == nil || !strings.Contains(err.Error(), "lgamma") {
			t.Errorf("lgamma(%v): error %v, want one naming lgamma", bad, err)
		}
	}
}
