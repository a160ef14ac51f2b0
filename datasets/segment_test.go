package datasets

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// floodSize returns the number of pixels 4-connected to start through
// pixels that in accepts.
func floodSize(width, pixels, start int, in func(p int) bool) int {
	seen := map[int]bool{start: true}
	stack := []int{start}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		x, y := p%width, p/width
		for _, d := range [4][2]int{{-1, 0}, {1, 0}, {0, -1}, {0, 1}} {
			qx, qy := x+d[0], y+d[1]
			q := qy*width + qx
			if qx < 0 || qx >= width || qy < 0 || q >= pixels || seen[q] || !in(q) {
				continue
			}
			seen[q] = true
			stack = append(stack, q)
		}
	}
	return len(seen)
}

func TestSegmentationImages(t *testing.T) {
	s, err := NewSegmentation(DefaultSegmentation())
	if err != nil {
		t.Fatal(err)
	}
	b := s.Batch(rand.New(rand.NewPCG(1, 2)), 1000)
	if b.Size != 1000 || b.Width != 16 || b.Pixels != 256 || b.FeatDim != 5 || b.Classes != 4 ||
		len(b.X) != 1000*256*5 || len(b.Labels) != 1000*256 {
		t.Fatalf("batch shape %d×%d (width %d) × %d, %d classes; %d features, %d labels",
			b.Size, b.Pixels, b.Width, b.FeatDim, b.Classes, len(b.X), len(b.Labels))
	}
	regionCounts := map[int]int{}
	classSeen := map[int]bool{}
	for i := range b.Size {
		labels := b.Labels[i*b.Pixels : (i+1)*b.Pixels]
		size := map[int]int{}
		first := map[int]int{}
		for p, l := range labels {
			if l < 0 || l >= b.Classes {
				t.Fatalf("image %d pixel %d: label %d outside [0, 4)", i, p, l)
			}
			if size[l] == 0 {
				first[l] = p
			}
			size[l]++
			classSeen[l] = true
			f := b.X[(i*b.Pixels+p)*5:]
			if f[3] != float64(p%16)/15 || f[4] != float64(p/16)/15 {
				t.Fatalf("image %d pixel %d: coordinates (%v, %v)", i, p, f[3], f[4])
			}
		}
		regionCounts[len(size)]++
		for l, n := range size {
			// Regions have distinct classes, so a class is a region: it
			// must be one 4-connected component of at least 256/16 pixels.
			if n < 16 {
				t.Errorf("image %d: region of class %d has %d pixels, want ≥ 16", i, l, n)
			}
			if got := floodSize(16, 256, first[l], func(q int) bool { return labels[q] == l }); got != n {
				t.Fatalf("image %d: class %d has %d pixels but its first pixel's component %d", i, l, n, got)
			}
		}
	}
	if len(regionCounts) != 3 || regionCounts[2] == 0 || regionCounts[3] == 0 || regionCounts[4] == 0 {
		t.Fatalf("region counts %v, want all of 2, 3, 4", regionCounts)
	}
	for c := range 4 {
		if !classSeen[c] {
			t.Fatalf("class %d never drawn", c)
		}
	}
}

func TestSegmentationColours(t *testing.T) {
	for _, c := range []struct {
		confusable, wantShared float64
	}{
		// P(some region copies a colour) = mean over R ∈ {2, 3, 4} of
		// 1 − (3/4)^(R−1) = (0.25 + 0.4375 + 0.578125) / 3.
		{0.25, 0.421875},
		{0, 0},
	} {
		cfg := DefaultSegmentation()
		cfg.Noise, cfg.Confusable = 0, c.confusable
		s, err := NewSegmentation(cfg)
		if err != nil {
			t.Fatal(err)
		}
		b := s.Batch(rand.New(rand.NewPCG(5, 6)), 2000)
		shared := 0
		for i := range b.Size {
			colour := map[int][3]float64{}
			for p := range b.Pixels {
				f := b.X[(i*b.Pixels+p)*5:]
				rgb := [3]float64{f[0], f[1], f[2]}
				for _, v := range rgb {
					if v < 0 || v >= 1 {
						t.Fatalf("noiseless colour %v outside [0, 1)", rgb)
					}
				}
				l := b.Labels[i*b.Pixels+p]
				if old, ok := colour[l]; ok && old != rgb {
					t.Fatalf("image %d: class %d has colours %v and %v without noise", i, l, old, rgb)
				}
				colour[l] = rgb
			}
			distinct := map[[3]float64]bool{}
			for _, rgb := range colour {
				distinct[rgb] = true
			}
			if len(distinct) < len(colour) {
				shared++
			}
		}
		if got := float64(shared) / float64(b.Size); math.Abs(got-c.wantShared) > 0.04 {
			t.Errorf("confusable %v: %v of images have two regions of one colour, want %v", c.confusable, got, c.wantShared)
		}
	}
}

func TestSegmentationNoise(t *testing.T) {
	cfg := DefaultSegmentation()
	cfg.Noise = 0.3
	s, _ := NewSegmentation(cfg)
	b := s.Batch(rand.New(rand.NewPCG(7, 8)), 200)
	// Within a region the colour varies by the noise alone: the pooled
	// within-region variance estimates σ² = 0.09.
	var ss, dof float64
	for i := range b.Size {
		sum, sum2, n := map[int]*[3]float64{}, map[int]*[3]float64{}, map[int]float64{}
		for p := range b.Pixels {
			l := b.Labels[i*b.Pixels+p]
			if sum[l] == nil {
				sum[l], sum2[l] = new([3]float64), new([3]float64)
			}
			for c := range 3 {
				v := b.X[(i*b.Pixels+p)*5+c]
				sum[l][c] += v
				sum2[l][c] += v * v
			}
			n[l]++
		}
		for l := range n {
			for c := range 3 {
				ss += sum2[l][c] - sum[l][c]*sum[l][c]/n[l]
				dof += n[l] - 1
			}
		}
	}
	if sd := math.Sqrt(ss / dof); math.Abs(sd-0.3) > 0.005 {
		t.Fatalf("within-region sd %v, want 0.3", sd)
	}
}

func TestSegmentationIsReproducible(t *testing.T) {
	s, _ := NewSegmentation(DefaultSegmentation())
	a := s.Fixed(7, ValidStream, 2, 8)
	b := s.Fixed(7, ValidStream, 2, 8)
	c := s.Fixed(7, TestStream, 2, 8)
	for i := range a {
		if !slices.Equal(a[i].X, b[i].X) || !slices.Equal(a[i].Labels, b[i].Labels) {
			t.Fatal("same seed and stream gave different images")
		}
	}
	if slices.Equal(a[0].Labels, c[0].Labels) || slices.Equal(a[0].X, c[0].X) {
		t.Fatal("validation and test images are equal")
	}
	x := s.Batch(rand.New(rand.NewPCG(3, 4)), 4)
	y := s.Batch(rand.New(rand.NewPCG(3, 4)), 4)
	if !slices.Equal(x.X, y.X) || !slices.Equal(x.Labels, y.Labels) {
		t.Fatal("same generator state gave different batches")
	}
}

func TestSegmentationSmallImages(t *testing.T) {
	// One region per pixel is the extreme the settings allow.
	s, err := NewSegmentation(Segmentation{Size: 2, MinRegions: 4, MaxRegions: 4, Classes: 6})
	if err != nil {
		t.Fatal(err)
	}
	b := s.Batch(rand.New(rand.NewPCG(1, 1)), 50)
	for i := range b.Size {
		l := slices.Clone(b.Labels[i*4 : (i+1)*4])
		slices.Sort(l)
		if len(slices.Compact(l)) != 4 {
			t.Fatalf("image %d labels %v, want 4 distinct classes", i, b.Labels[i*4:(i+1)*4])
		}
	}
}

func TestNewSegmentationRejectsBadSettings(t *testing.T) {
	ok := DefaultSegmentation()
	for _, c := range []struct {
		name string
		edit func(*Segmentation)
	}{
		{"size 1", func(s *Segmentation) { s.Size = 1 }},
		{"no regions", func(s *Segmentation) { s.MinRegions = 0 }},
		{"min > max", func(s *Segmentation) { s.MinRegions = 5 }},
		{"more regions than pixels", func(s *Segmentation) { s.Size, s.MinRegions, s.MaxRegions, s.Classes = 2, 1, 5, 5 }},
		{"fewer classes than regions", func(s *Segmentation) { s.Classes = 3 }},
		{"negative noise", func(s *Segmentation) { s.Noise = -0.1 }},
		{"NaN noise", func(s *Segmentation) { s.Noise = math.NaN() }},
		{"confusable > 1", func(s *Segmentation) { s.Confusable = 1.5 }},
		{"negative confusable", func(s *Segmentation) { s.Confusable = -0.5 }},
	} {
		cfg := ok
		c.edit(&cfg)
		if _, err := NewSegmentation(cfg); err == nil {
			t.Errorf("%s: %+v accepted", c.name, cfg)
		}
	}
	if _, err := NewSegmentation(ok); err != nil {
		t.Fatalf("default settings rejected: %v", err)
	}
}

func TestPixelAccuracy(t *testing.T) {
	for _, c := range []struct {
		pred, labels []int
		want         float64
	}{
		{[]int{0, 1, 1, 2}, []int{0, 1, 2, 2}, 0.75},
		{[]int{3, 3, 3}, []int{3, 3, 3}, 1},
		{[]int{0, 1, 2}, []int{1, 2, 0}, 0},
		{[]int{0, 0, 1}, []int{0, 1, 1}, 0.666666666666667},
	} {
		got, err := PixelAccuracy(c.pred, c.labels)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-c.want) > 1e-14 {
			t.Errorf("PixelAccuracy(%v, %v) = %.15g, want %.15g", c.pred, c.labels, got, c.want)
		}
	}
	for _, c := range [][2][]int{{{0}, {0, 1}}, {nil, nil}} {
		if _, err := PixelAccuracy(c[0], c[1]); err == nil {
			t.Errorf("PixelAccuracy(%v, %v) accepted", c[0], c[1])
		}
	}
}

func TestMeanIoU(t *testing.T) {
	// Image a: class 0 ∩ 1, ∪ 2 → 1/2; class 1 ∩ 2, ∪ 3 → 2/3; class 2
	// absent, left out: mIoU = 7/12.
	// Image b: one class, all right: 1.
	// Image c: class 0 ∩ 1, ∪ 3 → 1/3; classes 1 and 2 ∩ 0: mIoU = 1/9.
	a := [2][]int{{0, 0, 1, 1}, {0, 1, 1, 1}}
	b := [2][]int{{2, 2, 2, 2}, {2, 2, 2, 2}}
	c := [2][]int{{0, 1, 2, 0}, {1, 2, 0, 0}}
	for _, tc := range []struct {
		name   string
		images [][2][]int
		want   float64
	}{
		{"a", [][2][]int{a}, 0.583333333333333},
		{"b", [][2][]int{b}, 1},
		{"c", [][2][]int{c}, 0.111111111111111},
		{"a b", [][2][]int{a, b}, 0.791666666666667},
		{"a b c", [][2][]int{a, b, c}, 0.564814814814815},
	} {
		var pred, labels []int
		for _, im := range tc.images {
			pred, labels = append(pred, im[0]...), append(labels, im[1]...)
		}
		got, err := MeanIoU(pred, labels, 4, 3)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-tc.want) > 1e-14 {
			t.Errorf("%s: mean IoU %.15g, want %.15g", tc.name, got, tc.want)
		}
	}
	for _, c := range []struct {
		name            string
		pred, labels    []int
		pixels, classes int
	}{
		{"length mismatch", []int{0}, []int{0, 0}, 1, 2},
		{"partial image", []int{0, 0, 0}, []int{0, 0, 0}, 2, 2},
		{"no pixels", nil, nil, 2, 2},
		{"zero pixels per image", []int{0}, []int{0}, 0, 2},
		{"no classes", []int{0}, []int{0}, 1, 0},
		{"prediction out of range", []int{2}, []int{0}, 1, 2},
		{"label out of range", []int{0}, []int{-1}, 1, 2},
	} {
		if _, err := MeanIoU(c.pred, c.labels, c.pixels, c.classes); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
}
