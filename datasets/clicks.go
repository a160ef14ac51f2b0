package datasets

import (
	"fmt"
	"math/rand/v2"
)

// Clicks simulates an annotator's next n clicks on one image of width
// columns and returns the clicked pixels (index y·width + x), in order.
// labels: [Pixels] the true classes; pred: [Pixels] the model's prediction,
// or nil before there is one; prev: clicks already given, never clicked
// again.
//
// The rule is the one of interactive-segmentation benchmarks (Xu et al.
// 2016, "Deep interactive object selection"; RITM, Sofiiuk et al. 2022): a
// click goes inside the largest wrong region, at its pixel farthest from
// the region's boundary. Here
//
//  1. The wrong regions are the 4-connected components of the pixels with
//     pred ≠ label, split by true label, as a click reveals one label. Each
//     click goes to the largest of them (most pixels) not yet clicked by
//     this call: the annotator, who does not see a new prediction between
//     the n clicks, takes a click to fix its region. A wrong region holding
//     an earlier click (in prev) is still wrong, so it is clicked again.
//  2. When no wrong region is left (pred is nil, or every wrong region has
//     had its click), clicks go to the ground-truth regions, the
//     4-connected components of the label map: the region with the fewest
//     clicks so far (prev and this call), the largest of those.
//  3. Within the chosen region the click is the pixel of largest Euclidean
//     distance to the nearest pixel outside the region (the image border
//     counts as outside) or already clicked, so that clicks stay in the
//     interior and apart.
//
// Ties between regions of equal size and between pixels of equal distance
// are broken uniformly at random with rng. Fewer than n clicks come back
// only when every pixel has been clicked.
func Clicks(rng *rand.Rand, labels, pred, prev []int, width, n int) ([]int, error) {
	P := len(labels)
	switch {
	case width <= 0 || P == 0 || P%width != 0:
		return nil, fmt.Errorf("clicks: %d labels are not an image of width %d", P, width)
	case pred != nil && len(pred) != P:
		return nil, fmt.Errorf("clicks: %d predictions for %d labels", len(pred), P)
	case n < 0:
		return nil, fmt.Errorf("clicks: negative click count %d", n)
	}
	for _, p := range prev {
		if p < 0 || p >= P {
			return nil, fmt.Errorf("clicks: earlier click %d outside the image's %d pixels", p, P)
		}
	}
	truth := newComponents(labels, nil, width)
	var wrong components
	if pred != nil {
		wrong = newComponents(labels, pred, width)
	}
	clicked := make([]bool, P)
	free := P
	click := func(p int) {
		if clicked[p] {
			return
		}
		clicked[p] = true
		free--
		truth.clicks[truth.of[p]]++
		if wrong.of != nil && wrong.of[p] >= 0 {
			wrong.clicks[wrong.of[p]]++
		}
	}
	for _, p := range prev {
		click(p)
	}
	done := make([]bool, len(wrong.size)) // wrong regions clicked by this call
	dist := newDistanceTransform(width, P/width)
	out := make([]int, 0, min(n, free))
	for len(out) < n && free > 0 {
		c := wrong.largest(rng, func(c int) bool { return !done[c] && wrong.clicks[c] < wrong.size[c] })
		in := wrong.of
		if c < 0 {
			fewest := P + 1
			for c := range truth.size {
				if truth.clicks[c] < truth.size[c] {
					fewest = min(fewest, truth.clicks[c])
				}
			}
			c = truth.largest(rng, func(c int) bool { return truth.clicks[c] == fewest && truth.clicks[c] < truth.size[c] })
			in = truth.of
		}
		p := dist.farthest(rng, in, c, clicked)
		click(p)
		out = append(out, p)
		if wrong.of != nil && wrong.of[p] >= 0 {
			done[wrong.of[p]] = true
		}
	}
	return out, nil
}

// Clicks simulates the next n clicks on each image of the batch with the
// package function Clicks. pred: [Size, Pixels] or nil; prev: nil or one
// slice of earlier clicks per image. It returns the new clicks of each
// image.
func (b SegBatch) Clicks(rng *rand.Rand, pred []int, prev [][]int, n int) ([][]int, error) {
	if pred != nil && len(pred) != b.Size*b.Pixels {
		return nil, fmt.Errorf("clicks: %d predictions for %d images of %d pixels", len(pred), b.Size, b.Pixels)
	}
	if prev != nil && len(prev) != b.Size {
		return nil, fmt.Errorf("clicks: earlier clicks of %d images for a batch of %d", len(prev), b.Size)
	}
	out := make([][]int, b.Size)
	for i := range out {
		var p, before []int
		if pred != nil {
			p = pred[i*b.Pixels : (i+1)*b.Pixels]
		}
		if prev != nil {
			before = prev[i]
		}
		c, err := Clicks(rng, b.Labels[i*b.Pixels:(i+1)*b.Pixels], p, before, b.Width, n)
		if err != nil {
			return nil, fmt.Errorf("image %d: %w", i, err)
		}
		out[i] = c
	}
	return out, nil
}

// Annotate returns the inputs that tell a model the clicks' labels: mask
// [Size, Pixels] is 1 at clicked pixels and 0 elsewhere; values
// [Size, Pixels, Classes] is the one-hot true class at clicked pixels and 0
// elsewhere. clicks holds the clicked pixels of each image (all clicks so
// far, not only the latest).
func Annotate(b SegBatch, clicks [][]int) (mask, values []float64, err error) {
	if len(clicks) != b.Size {
		return nil, nil, fmt.Errorf("annotate: clicks of %d images for a batch of %d", len(clicks), b.Size)
	}
	mask = make([]float64, b.Size*b.Pixels)
	values = make([]float64, b.Size*b.Pixels*b.Classes)
	for i, cs := range clicks {
		for _, p := range cs {
			if p < 0 || p >= b.Pixels {
				return nil, nil, fmt.Errorf("annotate: image %d: click %d outside %d pixels", i, p, b.Pixels)
			}
			l := b.Labels[i*b.Pixels+p]
			if l < 0 || l >= b.Classes {
				return nil, nil, fmt.Errorf("annotate: image %d: label %d outside [0, %d)", i, l, b.Classes)
			}
			mask[i*b.Pixels+p] = 1
			values[(i*b.Pixels+p)*b.Classes+l] = 1
		}
	}
	return mask, values, nil
}

// components are the 4-connected components of an image's pixels with
// equal label, restricted to the wrong pixels when built with a prediction.
type components struct {
	of     []int // [Pixels] component of each pixel, −1 outside every component
	size   []int // pixels of each component
	clicks []int // clicked pixels of each component
}

// newComponents labels the components of pixels with equal label, keeping
// only pixels with pred ≠ label when pred is not nil.
func newComponents(labels, pred []int, width int) components {
	P := len(labels)
	in := func(p int) bool { return pred == nil || pred[p] != labels[p] }
	cs := components{of: make([]int, P)}
	for p := range cs.of {
		cs.of[p] = -1
	}
	stack := make([]int, 0, P)
	for start := range P {
		if cs.of[start] >= 0 || !in(start) {
			continue
		}
		c := len(cs.size)
		cs.of[start] = c
		size := 0
		stack = append(stack[:0], start)
		for len(stack) > 0 {
			p := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			size++
			x := p % width
			for _, q := range [4]int{p - 1, p + 1, p - width, p + width} {
				if q < 0 || q >= P || (q == p-1 && x == 0) || (q == p+1 && x == width-1) {
					continue
				}
				if cs.of[q] < 0 && in(q) && labels[q] == labels[p] {
					cs.of[q] = c
					stack = append(stack, q)
				}
			}
		}
		cs.size = append(cs.size, size)
	}
	cs.clicks = make([]int, len(cs.size))
	return cs
}

// largest returns the component of most pixels among those ok accepts,
// ties broken uniformly with rng, or −1 if ok accepts none.
func (cs components) largest(rng *rand.Rand, ok func(c int) bool) int {
	best, ties := -1, 0
	for c, s := range cs.size {
		if !ok(c) {
			continue
		}
		switch {
		case best < 0 || s > cs.size[best]:
			best, ties = c, 1
		case s == cs.size[best]:
			ties++
			if rng.IntN(ties) == 0 { // reservoir sampling: each tie kept with probability 1/ties
				best = c
			}
		}
	}
	return best
}

// distanceTransform computes exact squared Euclidean distance transforms of
// an image padded by one pixel on each side, so that the image border
// counts as outside (as in RITM's click simulation). Scratch space is
// reused between calls.
type distanceTransform struct {
	width, height int
	f, d          []float64 // [height+2, width+2] input and output
	line, out     []float64 // one row or column
	v             []int
	z             []float64
}

// distInf stands for +∞ in the parabola envelope; padding puts a zero in
// every column, so no distance stays this large.
const distInf = 1e20

func newDistanceTransform(width, height int) *distanceTransform {
	n := max(width, height) + 2
	return &distanceTransform{
		width: width, height: height,
		f: make([]float64, (width+2)*(height+2)), d: make([]float64, (width+2)*(height+2)),
		line: make([]float64, n), out: make([]float64, n), v: make([]int, n), z: make([]float64, n+1),
	}
}

// squared sets d to the squared distance of every padded pixel to the
// nearest pixel where zero is true; zero is indexed by the unpadded
// image, and the padding is always zero.
func (t *distanceTransform) squared(zero func(p int) bool) {
	W, H := t.width+2, t.height+2
	for y := range H {
		for x := range W {
			f := 0.0
			if x > 0 && x <= t.width && y > 0 && y <= t.height && !zero((y-1)*t.width+x-1) {
				f = distInf
			}
			t.f[y*W+x] = f
		}
	}
	for x := range W {
		for y := range H {
			t.line[y] = t.f[y*W+x]
		}
		t.envelope(H)
		for y := range H {
			t.d[y*W+x] = t.out[y]
		}
	}
	for y := range H {
		copy(t.line[:W], t.d[y*W:(y+1)*W])
		t.envelope(W)
		copy(t.d[y*W:(y+1)*W], t.out[:W])
	}
}

// envelope is the one-dimensional squared distance transform
// out[q] = min_p (q − p)² + line[p] of line[:n], by the lower envelope of
// parabolas (Felzenszwalb & Huttenlocher 2012, "Distance transforms of
// sampled functions", Algorithm 1).
func (t *distanceTransform) envelope(n int) {
	f, v, z := t.line, t.v, t.z
	k := 0
	v[0], z[0], z[1] = 0, -distInf, distInf
	for q := 1; q < n; q++ {
		s := ((f[q] + float64(q*q)) - (f[v[k]] + float64(v[k]*v[k]))) / float64(2*q-2*v[k])
		for s <= z[k] {
			k--
			s = ((f[q] + float64(q*q)) - (f[v[k]] + float64(v[k]*v[k]))) / float64(2*q-2*v[k])
		}
		k++
		v[k], z[k], z[k+1] = q, s, distInf
	}
	k = 0
	for q := range n {
		for z[k+1] < float64(q) {
			k++
		}
		dq := float64(q - v[k])
		t.out[q] = dq*dq + f[v[k]]
	}
}

// farthest returns the pixel of component c (of[p] == c) that is not
// clicked and lies farthest from every pixel outside c and every clicked
// pixel, ties broken uniformly with rng. c must hold an unclicked pixel.
func (t *distanceTransform) farthest(rng *rand.Rand, of []int, c int, clicked []bool) int {
	t.squared(func(p int) bool { return of[p] != c || clicked[p] })
	best, bestD, ties := -1, 0.0, 0
	W := t.width + 2
	for p := range of {
		if of[p] != c || clicked[p] {
			continue
		}
		d := t.d[(p/t.width+1)*W+p%t.width+1]
		switch {
		case d > bestD:
			best, bestD, ties = p, d, 1
		case d == bestD:
			ties++
			if rng.IntN(ties) == 0 {
				best = p
			}
		}
	}
	if best < 0 {
		panic("clicks: component without an unclicked pixel") // unreachable: callers pick components with one
	}
	return best
}
