package datasets

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// grid turns rows of digits into a row-major label map.
func grid(rows ...string) []int {
	var out []int
	for _, r := range rows {
		for _, c := range r {
			out = append(out, int(c-'0'))
		}
	}
	return out
}

// The hand-made 8×8 image: region A (class 2) is the 5×5 square x, y ∈
// [0, 4]; region B (class 1) the 3×3 square x, y ∈ [5, 7]; class 0 fills
// the rest as two components, C1 (x ∈ [5, 7], y ∈ [0, 4]) and C2
// (x ∈ [0, 4], y ∈ [5, 7]), of 15 pixels each.
var (
	handLabels = grid(
		"22222000",
		"22222000",
		"22222000",
		"22222000",
		"22222000",
		"00000111",
		"00000111",
		"00000111",
	)
	// The prediction misses A and B and predicts 1 on D, the 3×2 block
	// x ∈ [5, 7], y ∈ [3, 4] of C1. A, D and B are 4-connected as wrong
	// pixels; split by true label they are three wrong regions of 25, 6
	// and 9 pixels.
	handPred = grid(
		"00000000",
		"00000000",
		"00000000",
		"00000111",
		"00000111",
		"00000000",
		"00000000",
		"00000000",
	)
)

// Pixel sets of the hand-made image (index y·8 + x).
var (
	// A's centre (2, 2) is 3 from the padding and from B; no other pixel
	// is as deep.
	handACentre = []int{18}
	// With (2, 2) clicked, the diagonal neighbours (1, 1), (3, 1), (1, 3),
	// (3, 3) are √2 from the click and 2 from the border; the rest of A
	// is at most 1 from one or the other.
	handARing = []int{9, 11, 25, 27}
	// B's centre (6, 6) is 2 from everything outside B.
	handBCentre = []int{54}
	// D is two pixels tall: all six are 1 from its outside.
	handD = []int{29, 30, 31, 37, 38, 39}
	// The deepest pixels of C1 and C2, 2 from their outsides.
	handC1 = []int{14, 22, 30}
	handC2 = []int{49, 50, 51}
)

func TestClicksHandMade(t *testing.T) {
	for _, c := range []struct {
		name string
		pred []int
		prev []int
		// want[i] is the set the i-th click must fall in.
		want [][]int
	}{
		{
			// Largest wrong region first, each at its deepest pixel, one
			// click per wrong region; then the ground-truth region with
			// fewest clicks (C2: D's click lies in C1); then, all regions
			// clicked once, the largest, away from its click.
			name: "prediction",
			pred: handPred,
			want: [][]int{handACentre, handBCentre, handD, handC2, handARing},
		},
		{
			// Without a prediction the ground-truth regions are clicked,
			// largest first; C1 and C2 tie.
			name: "no prediction",
			want: [][]int{handACentre, append(slices.Clone(handC1), handC2...), append(slices.Clone(handC1), handC2...), handBCentre, handARing},
		},
		{
			name: "all correct",
			pred: handLabels,
			want: [][]int{handACentre, append(slices.Clone(handC1), handC2...), append(slices.Clone(handC1), handC2...), handBCentre, handARing},
		},
		{
			// A still wrong after a click at its centre: it stays the
			// largest wrong region and the next click keeps away from the
			// first.
			name: "still wrong",
			pred: handPred,
			prev: handACentre,
			want: [][]int{handARing, handBCentre},
		},
	} {
		seenPixels := map[int]bool{}
		for seed := range uint64(64) {
			got, err := Clicks(rand.New(rand.NewPCG(seed, 1)), handLabels, c.pred, c.prev, 8, len(c.want))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("%s: %d clicks, want %d", c.name, len(got), len(c.want))
			}
			for i, p := range got {
				if !slices.Contains(c.want[i], p) {
					t.Fatalf("%s, seed %d: click %d at %d, want one of %v (all clicks %v)", c.name, seed, i, p, c.want[i], got)
				}
				if slices.Contains(got[:i], p) || slices.Contains(c.prev, p) {
					t.Fatalf("%s: pixel %d clicked twice (%v after %v)", c.name, p, got, c.prev)
				}
				seenPixels[p] = true
			}
		}
		// Ties are broken at random: over 64 seeds every pixel of each
		// tied set comes up.
		for _, set := range c.want {
			for _, p := range set {
				if c.name != "no prediction" && c.name != "all correct" && !seenPixels[p] {
					t.Errorf("%s: tied pixel %d never chosen", c.name, p)
				}
			}
		}
	}
}

func TestClicksAllCorrectIsNoPrediction(t *testing.T) {
	s, _ := NewSegmentation(DefaultSegmentation())
	b := s.Batch(rand.New(rand.NewPCG(9, 9)), 20)
	for i := range b.Size {
		labels := b.Labels[i*b.Pixels : (i+1)*b.Pixels]
		x, err := Clicks(rand.New(rand.NewPCG(uint64(i), 0)), labels, nil, nil, b.Width, 6)
		if err != nil {
			t.Fatal(err)
		}
		y, _ := Clicks(rand.New(rand.NewPCG(uint64(i), 0)), labels, labels, nil, b.Width, 6)
		if !slices.Equal(x, y) {
			t.Fatalf("image %d: clicks %v without prediction, %v with a correct one", i, x, y)
		}
		// The first clicks reach every region before any gets a second.
		regions := map[int]bool{}
		for _, l := range labels {
			regions[l] = true
		}
		clicked := map[int]bool{}
		for _, p := range x[:len(regions)] {
			clicked[labels[p]] = true
		}
		if len(clicked) != len(regions) {
			t.Fatalf("image %d: first %d clicks %v reach classes %v of %v", i, len(regions), x, clicked, regions)
		}
	}
}

func TestClicksOnWrongRegions(t *testing.T) {
	s, _ := NewSegmentation(DefaultSegmentation())
	rng := rand.New(rand.NewPCG(10, 11))
	b := s.Batch(rng, 200)
	for i := range b.Size {
		labels := b.Labels[i*b.Pixels : (i+1)*b.Pixels]
		// A prediction with a few rectangles of wrong classes.
		pred := slices.Clone(labels)
		for range 1 + rng.IntN(4) {
			x0, y0 := rng.IntN(16), rng.IntN(16)
			w, h, c := 1+rng.IntN(8), 1+rng.IntN(8), rng.IntN(4)
			for y := y0; y < min(16, y0+h); y++ {
				for x := x0; x < min(16, x0+w); x++ {
					pred[y*16+x] = c
				}
			}
		}
		wrong := func(p int) bool { return pred[p] != labels[p] }
		largest := 0
		for p := range pred {
			if wrong(p) {
				largest = max(largest, floodSize(16, 256, p, func(q int) bool { return wrong(q) && labels[q] == labels[p] }))
			}
		}
		prev := []int{rng.IntN(256), rng.IntN(256)}
		clicks, err := Clicks(rng, labels, pred, prev, 16, 8)
		if err != nil {
			t.Fatal(err)
		}
		if len(clicks) != 8 {
			t.Fatalf("image %d: %d clicks, want 8", i, len(clicks))
		}
		seen := map[int]bool{prev[0]: true, prev[1]: true}
		for _, p := range clicks {
			if seen[p] {
				t.Fatalf("image %d: pixel %d clicked twice (%v after %v)", i, p, clicks, prev)
			}
			seen[p] = true
		}
		if largest == 0 {
			continue
		}
		p := clicks[0]
		if !wrong(p) {
			t.Fatalf("image %d: first click %d on a right pixel", i, p)
		}
		if n := floodSize(16, 256, p, func(q int) bool { return wrong(q) && labels[q] == labels[p] }); n != largest {
			t.Fatalf("image %d: first click in a wrong region of %d pixels, largest has %d", i, n, largest)
		}
	}
}

func TestClicksExhaustTheImage(t *testing.T) {
	// A one-pixel wrong region already clicked cannot be clicked again:
	// the clicks go to the ring around it until no pixel is left.
	labels := grid("000", "010", "000")
	pred := grid("000", "000", "000")
	got, err := Clicks(rand.New(rand.NewPCG(1, 2)), labels, pred, []int{4, 4}, 3, 20)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []int{0, 1, 2, 3, 5, 6, 7, 8}; !slices.Equal(got, want) {
		t.Fatalf("clicks %v, want %v", got, want)
	}
	if got, _ := Clicks(rand.New(rand.NewPCG(1, 2)), labels, pred, nil, 3, 0); len(got) != 0 {
		t.Fatalf("zero clicks asked, %v given", got)
	}
}

func TestClicksRectangularImage(t *testing.T) {
	// 6 wide, 2 tall: the wrong region is the right 4×2 block; its pixels
	// are all 1 from the border, so any of them may be clicked, never
	// one of the left block.
	labels := grid("001111", "001111")
	for seed := range uint64(20) {
		got, err := Clicks(rand.New(rand.NewPCG(seed, 0)), labels, make([]int, 12), nil, 6, 1)
		if err != nil {
			t.Fatal(err)
		}
		if labels[got[0]] != 1 {
			t.Fatalf("click %d outside the wrong block", got[0])
		}
	}
}

func TestClicksErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	labels := make([]int, 16)
	for _, c := range []struct {
		name         string
		labels, pred []int
		prev         []int
		width, n     int
	}{
		{"no pixels", nil, nil, nil, 4, 1},
		{"zero width", labels, nil, nil, 0, 1},
		{"ragged rows", labels, nil, nil, 5, 1},
		{"short prediction", labels, make([]int, 15), nil, 4, 1},
		{"negative count", labels, nil, nil, 4, -1},
		{"earlier click outside", labels, nil, []int{16}, 4, 1},
	} {
		if _, err := Clicks(rng, c.labels, c.pred, c.prev, c.width, c.n); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
}

func TestSegBatchClicks(t *testing.T) {
	s, _ := NewSegmentation(DefaultSegmentation())
	b := s.Batch(rand.New(rand.NewPCG(2, 3)), 5)
	pred := make([]int, b.Size*b.Pixels)
	prev := [][]int{{0}, nil, {3, 4}, nil, {255}}
	got, err := b.Clicks(rand.New(rand.NewPCG(4, 5)), pred, prev, 3)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(4, 5))
	for i := range b.Size {
		want, _ := Clicks(rng, b.Labels[i*b.Pixels:(i+1)*b.Pixels], pred[i*b.Pixels:(i+1)*b.Pixels], prev[i], b.Width, 3)
		if !slices.Equal(got[i], want) {
			t.Fatalf("image %d: batch clicks %v, image clicks %v", i, got[i], want)
		}
	}
	if _, err := b.Clicks(rng, pred[:10], nil, 1); err == nil {
		t.Error("short prediction accepted")
	}
	if _, err := b.Clicks(rng, nil, prev[:2], 1); err == nil {
		t.Error("earlier clicks of 2 images accepted for 5")
	}
	if _, err := b.Clicks(rng, nil, [][]int{{-1}, nil, nil, nil, nil}, 1); err == nil {
		t.Error("earlier click at −1 accepted")
	}
}

func TestAnnotate(t *testing.T) {
	b := SegBatch{Size: 2, Width: 2, Pixels: 4, FeatDim: SegFeatDim, Classes: 3, Labels: []int{0, 1, 2, 2, 1, 1, 0, 2}}
	mask, values, err := Annotate(b, [][]int{{1, 3}, {2}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{0, 1, 0, 1, 0, 0, 1, 0}; !slices.Equal(mask, want) {
		t.Fatalf("mask %v, want %v", mask, want)
	}
	want := []float64{
		0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, // image 0: pixel 1 class 1, pixel 3 class 2
		0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, // image 1: pixel 2 class 0
	}
	if !slices.Equal(values, want) {
		t.Fatalf("values %v, want %v", values, want)
	}
	for _, c := range []struct {
		name   string
		clicks [][]int
	}{
		{"one image", [][]int{{0}}},
		{"click past the image", [][]int{{4}, nil}},
		{"negative click", [][]int{nil, {-1}}},
	} {
		if _, _, err := Annotate(b, c.clicks); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
	b.Labels[0] = 3
	if _, _, err := Annotate(b, [][]int{{0}, nil}); err == nil {
		t.Error("label 3 of 3 classes accepted")
	}
}

func TestDistanceTransform(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	for _, dims := range [][2]int{{1, 1}, {7, 5}, {5, 7}, {16, 16}} {
		w, h := dims[0], dims[1]
		dt := newDistanceTransform(w, h)
		for range 20 {
			zero := make([]bool, w*h)
			density := rng.Float64()
			for p := range zero {
				zero[p] = rng.Float64() < density*density
			}
			dt.squared(func(p int) bool { return zero[p] })
			for p := range zero {
				x, y := p%w, p/w
				// Brute force over the zero pixels and the padding ring.
				best := 1 << 30
				for yy := -1; yy <= h; yy++ {
					for xx := -1; xx <= w; xx++ {
						if xx >= 0 && xx < w && yy >= 0 && yy < h && !zero[yy*w+xx] {
							continue
						}
						best = min(best, (x-xx)*(x-xx)+(y-yy)*(y-yy))
					}
				}
				if got := dt.d[(y+1)*(w+2)+x+1]; got != float64(best) {
					t.Fatalf("%d×%d: squared distance of (%d, %d) is %v, want %d", w, h, x, y, got, best)
				}
			}
		}
	}
}
