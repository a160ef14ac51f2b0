package datasets

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// SegFeatDim is the size of a pixel's feature vector: red, green, blue, x, y.
const SegFeatDim = 5

// segMaxAttempts bounds the redraws of a partition with a region below the
// minimum size; the best partition drawn is kept after that many.
const segMaxAttempts = 100

// segSeedCandidates is the number of candidates drawn for each region seed;
// the one farthest from the seeds already placed wins, which spreads the
// seeds without fixing their layout (Mitchell's best-candidate sampling).
const segSeedCandidates = 8

// Segmentation is the synthetic interactive-segmentation task (issue 5):
// Size×Size images cut into MinRegions to MaxRegions contiguous regions of
// irregular shape, each region a distinct class of 0..Classes−1.
//
// Regions grow from seeds spread over the image by competitive growth over
// random terrain: each region has its own smooth random cost of entering
// each pixel, and a pixel goes to the region that reaches it at the least
// total cost along a 4-connected path (multi-source Dijkstra), so regions
// bulge along their cheap valleys and bend around their ridges. A region
// enters a pixel only from a 4-neighbour it already holds, so each region
// is one 4-connected component. A partition with a region smaller than
// Size²/(4·MaxRegions) pixels (at least 1) is redrawn, up to 100 times,
// after which the draw whose smallest region is largest is kept.
//
// The class of a region is drawn at random, independently of its colour:
// the classes of an image are a random draw without replacement from
// 0..Classes−1, and each region's colour is uniform in [0, 1]³. Colour and
// shape tell which pixels belong together; only the clicks tell which
// class a group is, as an annotator's clicks name the object they want.
// To make grouping itself ambiguous, each region after the first takes, with
// probability Confusable, the exact colour of a random earlier region: apart
// the two are told apart by position only, and where they touch only clicks
// on both sides place the border.
//
// A pixel's features are its region's colour plus N(0, Noise²) noise on each
// channel (not clipped), then its coordinates x/(Size−1) and y/(Size−1).
type Segmentation struct {
	// Size is the side of the images in pixels.
	Size int
	// MinRegions and MaxRegions bound the number of regions of an image,
	// drawn uniformly in [MinRegions, MaxRegions].
	MinRegions, MaxRegions int
	// Classes is the number of classes, at least MaxRegions.
	Classes int
	// Noise is the standard deviation of the colour noise of each pixel.
	Noise float64
	// Confusable is the probability that a region copies the colour of an
	// earlier region of its image.
	Confusable float64
}

// DefaultSegmentation returns the settings of issue 5: 16×16 images of 2–4
// regions and 4 classes, colour noise σ = 0.1, and a chance of 1/4 that a
// region shares the colour of another.
func DefaultSegmentation() Segmentation {
	return Segmentation{Size: 16, MinRegions: 2, MaxRegions: 4, Classes: 4, Noise: 0.1, Confusable: 0.25}
}

// NewSegmentation checks the task's settings and returns a copy of them.
func NewSegmentation(cfg Segmentation) (*Segmentation, error) {
	switch {
	case cfg.Size < 2:
		return nil, fmt.Errorf("segmentation: image size must be at least 2, is %d", cfg.Size)
	case cfg.MinRegions < 1 || cfg.MaxRegions < cfg.MinRegions:
		return nil, fmt.Errorf("segmentation: regions [%d, %d]: want 1 ≤ min ≤ max", cfg.MinRegions, cfg.MaxRegions)
	case cfg.MaxRegions > cfg.Size*cfg.Size:
		return nil, fmt.Errorf("segmentation: %d regions do not fit in %d pixels", cfg.MaxRegions, cfg.Size*cfg.Size)
	case cfg.Classes < cfg.MaxRegions:
		return nil, fmt.Errorf("segmentation: %d classes cannot label %d regions with distinct classes", cfg.Classes, cfg.MaxRegions)
	case !(cfg.Noise >= 0): // also rejects NaN
		return nil, fmt.Errorf("segmentation: noise must be ≥ 0, is %v", cfg.Noise)
	case !(cfg.Confusable >= 0 && cfg.Confusable <= 1):
		return nil, fmt.Errorf("segmentation: confusable probability %v outside [0, 1]", cfg.Confusable)
	}
	return &cfg, nil
}

// SegBatch is a batch of segmentation images, every slice row-major. Pixel
// p of an image is at x = p mod Width, y = p / Width. All images have the
// same number of pixels, so there is no padding and no mask.
type SegBatch struct {
	// Size is the number of images, Width the side of an image, Pixels =
	// Width², FeatDim = SegFeatDim, Classes the number of classes.
	Size, Width, Pixels, FeatDim, Classes int
	// X: [Size, Pixels, FeatDim] red, green, blue, x, y of each pixel.
	X []float64
	// Labels: [Size, Pixels] the class of each pixel.
	Labels []int
}

// Batch draws size images from rng. s must come from NewSegmentation.
func (s *Segmentation) Batch(rng *rand.Rand, size int) SegBatch {
	P := s.Size * s.Size
	b := SegBatch{Size: size, Width: s.Size, Pixels: P, FeatDim: SegFeatDim, Classes: s.Classes,
		X: make([]float64, size*P*SegFeatDim), Labels: make([]int, size*P)}
	g := newSegGrower(P, s.MaxRegions)
	colour := make([][3]float64, s.MaxRegions)
	scale := 1 / float64(s.Size-1)
	for i := range size {
		r := s.MinRegions + rng.IntN(s.MaxRegions-s.MinRegions+1)
		g.partition(rng, s.Size, r, max(1, P/(4*s.MaxRegions)))
		classes := rng.Perm(s.Classes)[:r]
		for k := range r {
			if k > 0 && rng.Float64() < s.Confusable {
				colour[k] = colour[rng.IntN(k)]
				continue
			}
			colour[k] = [3]float64{rng.Float64(), rng.Float64(), rng.Float64()}
		}
		for p := range P {
			k := g.best[p]
			b.Labels[i*P+p] = classes[k]
			f := b.X[(i*P+p)*SegFeatDim : (i*P+p+1)*SegFeatDim]
			for c := range 3 {
				f[c] = colour[k][c] + s.Noise*rng.NormFloat64()
			}
			f[3], f[4] = float64(p%s.Size)*scale, float64(p/s.Size)*scale
		}
	}
	return b
}

// Fixed returns count batches of the given size drawn from a generator
// seeded with (seed, stream): the same arguments always give the same
// images. Validation and test sets use different streams (ValidStream,
// TestStream).
func (s *Segmentation) Fixed(seed, stream uint64, count, size int) []SegBatch {
	rng := rand.New(rand.NewPCG(seed, stream))
	out := make([]SegBatch, count)
	for i := range out {
		out[i] = s.Batch(rng, size)
	}
	return out
}

// segGrower holds the scratch space of region growing, reused across the
// images of a batch.
type segGrower struct {
	region []int // [Pixels] region of each pixel, −1 while unassigned
	best   []int // [Pixels] the best partition drawn so far
	size   []int // pixels of each region
	seeds  []int
	cost   [][]float64 // per region: [Pixels] cost of entering each pixel
	queue  segQueue
}

func newSegGrower(pixels, regions int) *segGrower {
	g := &segGrower{
		region: make([]int, pixels), best: make([]int, pixels),
		size: make([]int, regions), seeds: make([]int, 0, regions), cost: make([][]float64, regions),
	}
	for k := range g.cost {
		g.cost[k] = make([]float64, pixels)
	}
	return g
}

// partition leaves in g.best a partition of a width×width image into r
// regions of at least minSize pixels each, redrawing grown partitions
// until one qualifies (see Segmentation).
func (g *segGrower) partition(rng *rand.Rand, width, r, minSize int) {
	bestMin := -1
	for range segMaxAttempts {
		g.grow(rng, width, r)
		clear(g.size)
		for _, k := range g.region {
			g.size[k]++
		}
		if m := slices.Min(g.size[:r]); m > bestMin {
			bestMin = m
			copy(g.best, g.region)
		}
		if bestMin >= minSize {
			return
		}
	}
}

// grow partitions a width×width image into r 4-connected regions by
// competitive growth over random terrain (see Segmentation).
func (g *segGrower) grow(rng *rand.Rand, width, r int) {
	P := width * width
	for p := range g.region {
		g.region[p] = -1
	}
	g.seeds = g.seeds[:0]
	for range r {
		best, bestD := -1, -1
		for range segSeedCandidates {
			p := rng.IntN(P)
			for slices.Contains(g.seeds, p) {
				p = rng.IntN(P)
			}
			d := 2 * P // farther than any pixel pair when there is no seed yet
			for _, q := range g.seeds {
				dx, dy := p%width-q%width, p/width-q/width
				d = min(d, dx*dx+dy*dy)
			}
			if d > bestD {
				best, bestD = p, d
			}
		}
		g.seeds = append(g.seeds, best)
	}
	var wave [segWaves]struct{ u, v, phase float64 }
	for k := range r {
		speed := segMinSpeed + (1-segMinSpeed)*rng.Float64()
		for j := range wave {
			wave[j].u = 2 * math.Pi * float64(rng.IntN(2*segMaxFreq+1)-segMaxFreq) / float64(width)
			wave[j].v = 2 * math.Pi * float64(rng.IntN(2*segMaxFreq+1)-segMaxFreq) / float64(width)
			wave[j].phase = 2 * math.Pi * rng.Float64()
		}
		for p := range P {
			x, y := float64(p%width), float64(p/width)
			var h float64
			for _, w := range wave {
				h += math.Cos(w.u*x + w.v*y + w.phase)
			}
			// √(2/segWaves)·Σ cos has unit variance over random phases.
			g.cost[k][p] = math.Exp(segRelief*math.Sqrt(2.0/segWaves)*h) / speed
		}
	}
	// Multi-source Dijkstra: a region enters a pixel from a 4-neighbour it
	// already holds, so every region stays 4-connected.
	g.queue = g.queue[:0]
	for k, p := range g.seeds {
		g.queue.push(segStep{0, p, k})
	}
	for len(g.queue) > 0 {
		s := g.queue.pop()
		if g.region[s.pixel] >= 0 {
			continue
		}
		g.region[s.pixel] = s.region
		x, y := s.pixel%width, s.pixel/width
		for _, q := range [4]int{s.pixel - 1, s.pixel + 1, s.pixel - width, s.pixel + width} {
			switch {
			case q == s.pixel-1 && x == 0, q == s.pixel+1 && x == width-1,
				q == s.pixel-width && y == 0, q == s.pixel+width && y == width-1:
				continue
			}
			if g.region[q] < 0 {
				g.queue.push(segStep{s.dist + g.cost[s.region][q], q, s.region})
			}
		}
	}
}

// Terrain of region growing. Each region k sees its own cost field
// c_k(p) = exp(segRelief·h_k(p)) / speed_k, where h_k is a unit-variance
// sum of segWaves plane waves of at most segMaxFreq cycles per image side
// and speed_k ~ U[segMinSpeed, 1): regions spread along their valleys and
// around their ridges, which bends their borders into irregular shapes.
const (
	segWaves    = 4
	segMaxFreq  = 2
	segRelief   = 1.0
	segMinSpeed = 0.5
)

// segStep is a region's offer to enter a pixel at a path cost.
type segStep struct {
	dist          float64
	pixel, region int
}

// segQueue is a binary min-heap of steps by cost, ties by pixel then region
// so that the growth does not depend on heap internals.
type segQueue []segStep

func (q segStep) less(o segStep) bool {
	if q.dist != o.dist {
		return q.dist < o.dist
	}
	if q.pixel != o.pixel {
		return q.pixel < o.pixel
	}
	return q.region < o.region
}

func (h *segQueue) push(s segStep) {
	*h = append(*h, s)
	q := *h
	for i := len(q) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q[i].less(q[parent]) {
			break
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
}

func (h *segQueue) pop() segStep {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(q) && q[l].less(q[m]) {
			m = l
		}
		if r < len(q) && q[r].less(q[m]) {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}

// PixelAccuracy returns the fraction of pixels whose predicted class equals
// the label, Σ_p [pred_p = label_p] / N over all N pixels of the slices.
// The images of a batch have equal pixel counts, so this is also the mean of
// the per-image accuracies.
func PixelAccuracy(pred, labels []int) (float64, error) {
	if len(pred) != len(labels) {
		return 0, fmt.Errorf("pixel accuracy: %d predictions for %d labels", len(pred), len(labels))
	}
	if len(labels) == 0 {
		return 0, errors.New("pixel accuracy: no pixels")
	}
	var right int
	for p, l := range labels {
		if pred[p] == l {
			right++
		}
	}
	return float64(right) / float64(len(labels)), nil
}

// MeanIoU returns the mean intersection over union of images of the given
// number of pixels; pred and labels hold len(labels)/pixels images, each
// row-major. For one image with predicted set P_c and true set T_c of class
// c,
//
//	mIoU = (1/|C|) Σ_{c∈C} |P_c ∩ T_c| / |P_c ∪ T_c|,  C = {c : P_c ∪ T_c ≠ ∅},
//
// that is the mean over the classes present in the prediction or the truth
// of the image; absent classes count neither as 0 nor as 1. The result is
// the unweighted mean of the images' mIoU.
func MeanIoU(pred, labels []int, pixels, classes int) (float64, error) {
	switch {
	case len(pred) != len(labels):
		return 0, fmt.Errorf("mean IoU: %d predictions for %d labels", len(pred), len(labels))
	case pixels <= 0 || len(labels) == 0 || len(labels)%pixels != 0:
		return 0, fmt.Errorf("mean IoU: %d labels are not a positive number of images of %d pixels", len(labels), pixels)
	case classes <= 0:
		return 0, fmt.Errorf("mean IoU: %d classes", classes)
	}
	inter, union := make([]int, classes), make([]int, classes)
	var sum float64
	images := len(labels) / pixels
	for i := range images {
		clear(inter)
		clear(union)
		for p := i * pixels; p < (i+1)*pixels; p++ {
			c, l := pred[p], labels[p]
			if c < 0 || c >= classes || l < 0 || l >= classes {
				return 0, fmt.Errorf("mean IoU: pixel %d of image %d: class %d or label %d outside [0, %d)", p-i*pixels, i, c, l, classes)
			}
			union[c]++
			if c == l {
				inter[c]++
			} else {
				union[l]++
			}
		}
		var iou float64
		var present int
		for c, u := range union {
			if u > 0 {
				iou += float64(inter[c]) / float64(u)
				present++
			}
		}
		sum += iou / float64(present)
	}
	return sum / float64(images), nil
}
