package figure

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
)

// plotSamplesEnv names a directory that TestPlotSamples fills with example
// PNGs for a person to look at; the test is skipped when it is unset.
const plotSamplesEnv = "PROBFORMER_PLOT_SAMPLES"

// diagonal returns an n×n attention matrix with weight 1-(n-1)ε on the
// diagonal and ε elsewhere, so every row sums to 1.
func diagonal(n int) [][]float64 {
	const eps = 0.01
	w := make([][]float64, n)
	for i := range w {
		w[i] = make([]float64, n)
		for j := range w[i] {
			w[i][j] = eps
		}
		w[i][i] = 1 - float64(n-1)*eps
	}
	return w
}

func words(prefix string, n int) []string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return ws
}

// decodePNG reads the PNG at path, failing the test if it is not one.
func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	return img
}

// isViridisTop reports whether c is near the bright yellow end of the
// heat-map palette.
func isViridisTop(c color.Color) bool {
	r, g, b, _ := c.RGBA()
	return r>>8 > 0xe0 && g>>8 > 0xd0 && b>>8 < 0x60
}

// isViridisBottom reports whether c is near the dark purple end of the
// heat-map palette.
func isViridisBottom(c color.Color) bool {
	r, g, b, _ := c.RGBA()
	return r>>8 < 0x50 && g>>8 < 0x20 && b>>8 > 0x40 && b>>8 < 0x70
}

// box is the bounding box of the pixels of img for which in is true, and
// their count.
func box(img image.Image, in func(color.Color) bool) (image.Rectangle, int) {
	var bb image.Rectangle
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if !in(img.At(x, y)) {
				continue
			}
			p := image.Rect(x, y, x+1, y+1)
			if n == 0 {
				bb = p
			} else {
				bb = bb.Union(p)
			}
			n++
		}
	}
	return bb, n
}

// withoutColourBar returns a copy of a heat map with the colour bar
// blanked out, leaving the matrix as the only palette-coloured area. The
// bar is the run of columns at the right that each hold a pixel of the
// bright end of the palette; tick labels and a gap separate it from the
// matrix.
func withoutColourBar(img image.Image) *image.RGBA {
	b := img.Bounds()
	hasTop := func(x int) bool {
		for y := b.Min.Y; y < b.Max.Y; y++ {
			if isViridisTop(img.At(x, y)) {
				return true
			}
		}
		return false
	}
	barLeft := b.Max.X - 1
	for barLeft > b.Min.X && !hasTop(barLeft) {
		barLeft--
	}
	for barLeft > b.Min.X && hasTop(barLeft-1) {
		barLeft--
	}
	cells := image.NewRGBA(b)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < barLeft; x++ {
			cells.Set(x, y, img.At(x, y))
		}
	}
	return cells
}

// dirNames lists the entries of dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteHeatmap(t *testing.T) {
	const dpi = 96
	tests := []struct {
		name       string
		weights    [][]float64
		rows, cols []string
		title      string
		// minW and minH are lower bounds on the image size in pixels:
		// 4 in, or 0.5 in per word once that is larger.
		minW, minH int
		// bright and dark are the fractions of the matrix area, in
		// cells, expected at the top and bottom ends of the palette.
		bright, dark float64
	}{
		{"1x1", [][]float64{{1}}, []string{"a"}, []string{"b"}, "", 4 * dpi, 4 * dpi, 1, 0},
		{"all zero", [][]float64{{0, 0}, {0, 0}}, words("o", 2), words("s", 2), "zero", 4 * dpi, 4 * dpi, 0, 1},
		{
			"3x4 long words",
			[][]float64{{0.7, 0, 0.1, 0.2}, {0.1, 0.7, 0.1, 0.1}, {0, 0, 0.2, 0.8}},
			[]string{"internationalisation", "des", "marchés"},
			[]string{"internationalization", "of", "markets", "<eos>"},
			"en→fr",
			4 * dpi, 4 * dpi, 1.0 / 12, 3.0 / 12,
		},
		{"20x20", diagonal(20), words("out", 20), words("src", 20), "20 words", 10 * dpi, 10 * dpi, 1.0 / 20, 19.0 / 20},
		{"2x20", [][]float64{diagonal(20)[0], diagonal(20)[19]}, words("o", 2), words("s", 20), "wide", 10 * dpi, 4 * dpi, 1.0 / 20, 19.0 / 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "attn.png")
			if err := WriteHeatmap(path, tt.weights, tt.rows, tt.cols, tt.title); err != nil {
				t.Fatalf("WriteHeatmap: %v", err)
			}
			if names := dirNames(t, dir); len(names) != 1 {
				t.Errorf("directory holds %q, want only attn.png", names)
			}
			img := decodePNG(t, path)
			b := img.Bounds()
			if b.Dx() < tt.minW || b.Dy() < tt.minH || b.Dx() > 40*dpi || b.Dy() > 40*dpi {
				t.Errorf("image is %dx%d, want at least %dx%d and at most 40 in", b.Dx(), b.Dy(), tt.minW, tt.minH)
			}
			// Cell borders and anti-aliased edges take a few per cent of
			// the area from both ends of the palette.
			cells := withoutColourBar(img)
			m, nm := box(cells, func(c color.Color) bool { return isViridisBottom(c) || isViridisTop(c) })
			_, nb := box(cells, isViridisTop)
			_, nd := box(cells, isViridisBottom)
			area := float64(m.Dx() * m.Dy())
			if nm == 0 {
				t.Fatal("no matrix pixels")
			}
			if got := float64(nb) / area; got < 0.85*tt.bright || got > tt.bright+0.01 {
				t.Errorf("bright fraction of the matrix = %.3f, want about %.3f", got, tt.bright)
			}
			if got := float64(nd) / area; got < 0.85*tt.dark || got > tt.dark+0.01 {
				t.Errorf("dark fraction of the matrix = %.3f, want about %.3f", got, tt.dark)
			}
		})
	}
}

// TestWriteHeatmapOrientation checks that row 0 is drawn at the top and
// column 0 at the left, by lighting one row or column and finding where
// the bright pixels land. The colour bar, which holds the whole palette,
// is excluded.
func TestWriteHeatmapOrientation(t *testing.T) {
	const n = 6
	lit := func(at func(i, j int) bool) [][]float64 {
		w := make([][]float64, n)
		for i := range w {
			w[i] = make([]float64, n)
			for j := range w[i] {
				if at(i, j) {
					w[i][j] = 1
				}
			}
		}
		return w
	}
	tests := []struct {
		name    string
		weights [][]float64
		// want reports whether the bright cells' bounding box bb lies
		// where it should within the matrix area m (the bounding box of
		// all cells).
		want func(bb, m image.Rectangle) bool
	}{
		{"row 0 at top", lit(func(i, _ int) bool { return i == 0 }), func(bb, m image.Rectangle) bool {
			return bb.Min.Y-m.Min.Y < 3 && bb.Max.Y < m.Min.Y+m.Dy()/n+3 && bb.Dx() > m.Dx()-6
		}},
		{"last row at bottom", lit(func(i, _ int) bool { return i == n-1 }), func(bb, m image.Rectangle) bool {
			return m.Max.Y-bb.Max.Y < 3 && bb.Min.Y > m.Max.Y-m.Dy()/n-3 && bb.Dx() > m.Dx()-6
		}},
		{"column 0 at left", lit(func(_, j int) bool { return j == 0 }), func(bb, m image.Rectangle) bool {
			return bb.Min.X-m.Min.X < 3 && bb.Max.X < m.Min.X+m.Dx()/n+3 && bb.Dy() > m.Dy()-6
		}},
		{"anti-diagonal corner", lit(func(i, j int) bool { return i == 0 && j == n-1 }), func(bb, m image.Rectangle) bool {
			return m.Max.X-bb.Max.X < 3 && bb.Min.Y-m.Min.Y < 3 && bb.Dx() < m.Dx()/n+3 && bb.Dy() < m.Dy()/n+3
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "attn.png")
			if err := WriteHeatmap(path, tt.weights, words("o", n), words("s", n), "orientation"); err != nil {
				t.Fatal(err)
			}
			img := decodePNG(t, path)
			cells := withoutColourBar(img)
			m, nm := box(cells, func(c color.Color) bool { return isViridisBottom(c) || isViridisTop(c) })
			bb, nb := box(cells, isViridisTop)
			if nm == 0 || nb == 0 {
				t.Fatalf("found %d matrix pixels and %d bright ones, want both", nm, nb)
			}
			if !tt.want(bb, m) {
				t.Errorf("bright cells at %v within matrix %v", bb, m)
			}
		})
	}
}

func TestWriteHeatmapErrors(t *testing.T) {
	tests := []struct {
		name       string
		weights    [][]float64
		rows, cols []string
		wantErr    string
	}{
		{"nil matrix", nil, nil, nil, "empty"},
		{"empty row", [][]float64{{}}, []string{"a"}, nil, "empty"},
		{"ragged", [][]float64{{1, 0}, {1}}, words("o", 2), words("s", 2), "row 1 has 1 columns"},
		{"too few row labels", diagonal(3), words("o", 2), words("s", 3), "2 row labels for 3 rows"},
		{"too many column labels", diagonal(3), words("o", 3), words("s", 4), "4 column labels for 3 columns"},
		{"nil labels", diagonal(2), nil, nil, "row labels"},
		{"NaN", [][]float64{{1, math.NaN()}}, []string{"a"}, words("s", 2), "[0][1] is NaN"},
		{"Inf", [][]float64{{math.Inf(1)}}, []string{"a"}, []string{"b"}, "+Inf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "attn.png")
			if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			err := WriteHeatmap(path, tt.weights, tt.rows, tt.cols, "t")
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err = %v, want one naming %s and containing %q", err, path, tt.wantErr)
			}
			assertUntouched(t, dir, path)
		})
	}
}

// assertUntouched checks that path still holds "old" and that no temporary
// file was left beside it.
func assertUntouched(t *testing.T, dir, path string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "old" {
		t.Errorf("after the error %s holds %q (%v), want %q", path, got, err, "old")
	}
	if names := dirNames(t, dir); len(names) != 1 {
		t.Errorf("directory holds %q, want only %s", names, filepath.Base(path))
	}
}

// TestWritePlotUnwritable checks that a failure while writing, after the
// plot was drawn, leaves nothing behind.
func TestWritePlotUnwritable(t *testing.T) {
	curves := []Curve{{"a", []float64{1, 2}}}
	writers := []struct {
		name  string
		write func(path string) error
	}{
		{"heatmap", func(p string) error { return WriteHeatmap(p, diagonal(2), words("o", 2), words("s", 2), "") }},
		{"curves", func(p string) error { return WriteCurves(p, "", "x", "y", []float64{0, 1}, curves) }},
	}
	for _, w := range writers {
		t.Run(w.name+"/missing dir", func(t *testing.T) {
			dir := t.TempDir()
			if err := w.write(filepath.Join(dir, "no", "such", "plot.png")); err == nil {
				t.Error("no error writing into a missing directory")
			}
			if names := dirNames(t, dir); len(names) != 0 {
				t.Errorf("directory holds %q, want nothing", names)
			}
		})
		t.Run(w.name+"/path is a directory", func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "plot.png")
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := w.write(path); err == nil {
				t.Error("no error replacing a directory")
			}
			if names := dirNames(t, dir); len(names) != 1 {
				t.Errorf("directory holds %q, want only plot.png", names)
			}
			if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
				t.Errorf("%s is no longer a directory: %v", path, err)
			}
		})
		t.Run(w.name+"/empty path", func(t *testing.T) {
			if err := w.write(""); err == nil {
				t.Error("no error for an empty path")
			}
		})
	}
}

func TestWriteCurves(t *testing.T) {
	clicks := []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	tests := []struct {
		name   string
		xs     []float64
		series []Curve
	}{
		{"one point", []float64{3}, []Curve{{"only", []float64{0.5}}}},
		{"accuracy vs clicks", clicks, []Curve{
			{"with adaptation", []float64{0.62, 0.74, 0.81, 0.86, 0.89, 0.91, 0.925, 0.935, 0.94, 0.945, 0.95}},
			{"without adaptation", []float64{0.62, 0.70, 0.75, 0.79, 0.82, 0.84, 0.855, 0.865, 0.87, 0.875, 0.88}},
		}},
		{"different cadences, missing points", []float64{50, 100, 150, 200, 300, 400}, []Curve{
			{"every 50", []float64{2.0, 1.5, 1.2, 1.0, math.NaN(), math.NaN()}},
			{"every 100", []float64{math.NaN(), 1.8, math.NaN(), 1.3, 1.1, 0.9}},
		}},
		{"falling loss, fractional x", []float64{0.5, 1.5, 2.5, 3.5}, []Curve{
			{"train", []float64{2.3, 1.1, 0.7, 0.5}},
			{"valid", []float64{2.4, 1.3, 1.0, 0.9}},
			{"test", []float64{2.4, 1.4, 1.0, 0.95}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "curves.png")
			if err := WriteCurves(path, "title", "x", "y", tt.xs, tt.series); err != nil {
				t.Fatalf("WriteCurves: %v", err)
			}
			if names := dirNames(t, dir); len(names) != 1 {
				t.Errorf("directory holds %q, want only curves.png", names)
			}
			img := decodePNG(t, path)
			if b := img.Bounds(); b.Dx() != 6*96 || b.Dy() != 4*96 {
				t.Errorf("image is %dx%d, want %dx%d", b.Dx(), b.Dy(), 6*96, 4*96)
			}
			// Each series must appear in its own colour, on the plot
			// or at least in the legend.
			for k, s := range tt.series {
				want := plotutil.Color(k)
				bb, n := box(img, func(c color.Color) bool { return near(c, want) })
				if n < 20 {
					t.Errorf("series %q: %d pixels in its colour, want at least 20", s.Name, n)
				}
				if len(tt.xs) > 1 && bb.Dx() < img.Bounds().Dx()/2 {
					t.Errorf("series %q spans %d pixels across, want over half the image", s.Name, bb.Dx())
				}
			}
		})
	}
}

// near reports whether a and b differ by at most 8 in each 8-bit channel.
func near(a, b color.Color) bool {
	ar, ag, ab, _ := a.RGBA()
	br, bg, bb, _ := b.RGBA()
	d := func(x, y uint32) bool { return max(x, y)-min(x, y) <= 8*257 }
	return d(ar, br) && d(ag, bg) && d(ab, bb)
}

func TestWriteCurvesErrors(t *testing.T) {
	tests := []struct {
		name    string
		xs      []float64
		series  []Curve
		wantErr string
	}{
		{"no x", nil, []Curve{{"a", nil}}, "no x values"},
		{"no series", []float64{1}, nil, "no series"},
		{"short series", []float64{1, 2}, []Curve{{"a", []float64{1, 2}}, {"b", []float64{1}}}, `"b" has 1 values for 2 x values`},
		{"long series", []float64{1}, []Curve{{"a", []float64{1, 2}}}, "2 values for 1 x values"},
		{"unnamed", []float64{1}, []Curve{{"", []float64{1}}}, "series 0 has no name"},
		{"Inf y", []float64{1, 2}, []Curve{{"a", []float64{1, math.Inf(1)}}}, `"a": y[1] is +Inf`},
		{"every y missing", []float64{1, 2}, []Curve{{"a", []float64{1, 2}}, {"b", []float64{math.NaN(), math.NaN()}}}, `"b" has no point`},
		{"Inf x", []float64{math.Inf(-1)}, []Curve{{"a", []float64{1}}}, "x[0] is -Inf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "curves.png")
			if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			err := WriteCurves(path, "t", "x", "y", tt.xs, tt.series)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err = %v, want one naming %s and containing %q", err, path, tt.wantErr)
			}
			assertUntouched(t, dir, path)
		})
	}
}

// TestCurvePoints: a NaN is a missing point, left out of the series'
// points (no marker, the line joins its neighbours); every other y is
// drawn at its own x.
func TestCurvePoints(t *testing.T) {
	nan := math.NaN()
	xs := []float64{50, 100, 150, 200}
	tests := []struct {
		name string
		ys   []float64
		want plotter.XYs
	}{
		{"all present", []float64{4, 3, 2, 1}, plotter.XYs{{X: 50, Y: 4}, {X: 100, Y: 3}, {X: 150, Y: 2}, {X: 200, Y: 1}}},
		{"every other missing", []float64{nan, 3, nan, 1}, plotter.XYs{{X: 100, Y: 3}, {X: 200, Y: 1}}},
		{"ends early", []float64{4, 3, nan, nan}, plotter.XYs{{X: 50, Y: 4}, {X: 100, Y: 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Curve{Name: "a", Ys: tt.ys}).points(xs); !slices.Equal(got, tt.want) {
				t.Errorf("points = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCrowdedTopRight(t *testing.T) {
	xs := []float64{0, 1, 2, 3}
	tests := []struct {
		name   string
		series []Curve
		want   bool
	}{
		{"rising", []Curve{{"a", []float64{0, 1, 2, 3}}}, true},
		{"falling", []Curve{{"a", []float64{3, 2, 1, 0}}}, false},
		{"one rising one falling ties low", []Curve{{"a", []float64{0, 1, 2, 3}}, {"b", []float64{3, 2, 1, 0}}}, false},
		{"left half ignored", []Curve{{"a", []float64{3, 3, 0, 0}}}, false},
	}
	for _, tt := range tests {
		if got := crowdedTopRight(xs, tt.series, 0, 3, func(y float64) float64 { return y }); got != tt.want {
			t.Errorf("%s: crowdedTopRight = %v, want %v", tt.name, got, tt.want)
		}
	}
	// On a log scale the middle is the geometric mean: a loss falling
	// from 1000 to 30 and 10 stays in the top half of [1, 1000] on a log
	// axis (above 31.6), though it is in the bottom half on a linear one.
	loss := []Curve{{"loss", []float64{1000, 100, 40, 35}}}
	if !crowdedTopRight(xs, loss, 1, 1000, math.Log10) {
		t.Error("log scale: a loss above the geometric middle is not crowding the top")
	}
	if crowdedTopRight(xs, loss, 1, 1000, func(y float64) float64 { return y }) {
		t.Error("linear scale: a loss far below the middle is crowding the top")
	}
}

// TestLogTicks: the ticks of a log axis lie in range, and the labelled
// ones are powers of ten over two decades, 1-2-5 over one, and round
// values within one.
func TestLogTicks(t *testing.T) {
	tests := []struct {
		min, max float64
		want     []string // the labels, in order
	}{
		{0.01, 10, []string{"0.01", "0.1", "1", "10"}},
		{0.003, 0.5, []string{"0.01", "0.1"}},
		{0.003, 0.2, []string{"0.005", "0.01", "0.02", "0.05", "0.1", "0.2"}},
		{0.3, 6, []string{"0.5", "1", "2", "5"}},
		{1.5, 2.1, []string{"1.5", "1.7", "1.9", "2.1"}},
		{0, 1, nil},
		{2, 2, nil},
	}
	for _, tt := range tests {
		var got []string
		for _, tk := range (logTicks{}).Ticks(tt.min, tt.max) {
			if tk.Value < tt.min || tk.Value > tt.max || tk.Value <= 0 {
				t.Errorf("Ticks(%g, %g): tick at %g out of range", tt.min, tt.max, tk.Value)
			}
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("Ticks(%g, %g) labels = %q, want %q", tt.min, tt.max, got, tt.want)
		}
	}
}

// colourRow is the mean row of the pixels near c in column x of img,
// among rows [y0, y1), or -1 when there is none.
func colourRow(img image.Image, x, y0, y1 int, c color.Color) float64 {
	var sum, n int
	for y := y0; y < y1; y++ {
		if near(img.At(x, y), c) {
			sum += y
			n++
		}
	}
	if n == 0 {
		return -1
	}
	return float64(sum) / float64(n)
}

// TestWriteCurvesLogY: with LogY, a loss falling tenfold a step is a
// straight line, so its middle point is halfway between its first and
// last; on a linear axis the middle point is almost down at the last.
// Log-scale plots of every shape (decades, within a decade, one value,
// missing points, the legend below or above) render, and a value that is
// not positive is refused.
func TestWriteCurvesLogY(t *testing.T) {
	t.Parallel()
	xs := []float64{0, 1, 2, 3, 4}
	falling := []Curve{{"loss", []float64{1e4, 1e3, 1e2, 10, 1}}}
	// middle is how far down from the first point to the last the middle
	// point is drawn. The markers are 3 pt (4 px) in radius; the legend
	// (top right, as the curve falls) is kept out of the last point's
	// column by looking only at the lower half of the image there.
	middle := func(logY bool) float64 {
		path := filepath.Join(t.TempDir(), "loss.png")
		if err := WriteCurvesWith(path, "loss", "step", "loss", xs, falling, CurveOptions{LogY: logY}); err != nil {
			t.Fatal(err)
		}
		img := decodePNG(t, path)
		want := plotutil.Color(0)
		bb, _ := box(img, func(c color.Color) bool { return near(c, want) })
		h := img.Bounds().Dy()
		x0, x4 := bb.Min.X+4, bb.Max.X-1-4
		y0 := colourRow(img, x0, 0, h, want)
		y2 := colourRow(img, (x0+x4)/2, 0, h, want)
		y4 := colourRow(img, x4, h/2, h, want)
		if y0 < 0 || y2 < 0 || y4 < 0 || y4 <= y0 {
			t.Fatalf("logY=%v: points at rows %.1f, %.1f, %.1f", logY, y0, y2, y4)
		}
		return (y2 - y0) / (y4 - y0)
	}
	if f := middle(true); math.Abs(f-0.5) > 0.05 {
		t.Errorf("log scale: the middle point is %.2f of the way down, want 0.5", f)
	}
	if f := middle(false); f < 0.95 {
		t.Errorf("linear scale: the middle point is %.2f of the way down, want about 0.99", f)
	}
	nan := math.NaN()
	for _, tt := range []struct {
		name   string
		series []Curve
	}{
		{"within a decade", []Curve{{"a", []float64{2.1, 1.9, 1.8, 1.7, 1.65}}}},
		{"one value", []Curve{{"a", []float64{0.5, nan, nan, nan, nan}}}},
		{"rising, legend below", []Curve{{"a", []float64{1, 3, 10, 30, 100}}, {"b", []float64{nan, 2, nan, 20, nan}}}},
		{"tiny values", []Curve{{"a", []float64{1e-3, 1e-5, 1e-7, 1e-8, 1e-9}}}},
	} {
		path := filepath.Join(t.TempDir(), "c.png")
		if err := WriteCurvesWith(path, tt.name, "step", "y", xs, tt.series, CurveOptions{LogY: true}); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	for _, ys := range [][]float64{{1, 0, 1, 1, 1}, {1, 2, -3, 1, 1}} {
		dir := t.TempDir()
		path := filepath.Join(dir, "c.png")
		os.WriteFile(path, []byte("old"), 0o644)
		err := WriteCurvesWith(path, "t", "x", "y", xs, []Curve{{"a", ys}}, CurveOptions{LogY: true})
		if err == nil || !strings.Contains(err.Error(), "not positive") {
			t.Errorf("%v on a log scale: err = %v, want not positive", ys, err)
		}
		assertUntouched(t, dir, path)
	}
}

func TestIntegerTicks(t *testing.T) {
	tests := []struct {
		min, max float64
		want     []string
	}{
		{0, 3, []string{"0", "1", "2", "3"}},
		{-0.5, 1.5, []string{"0", "1"}},
		{0.2, 0.8, nil},
	}
	for _, tt := range tests {
		var got []string
		for _, tk := range (integerTicks{}).Ticks(tt.min, tt.max) {
			if tk.Value != math.Trunc(tk.Value) {
				t.Errorf("Ticks(%g, %g): tick at %g is not whole", tt.min, tt.max, tk.Value)
			}
			got = append(got, tk.Label)
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("Ticks(%g, %g) labels = %q, want %q", tt.min, tt.max, got, tt.want)
		}
	}
}

func TestShortLabel(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"marchés", "marchés"},
		{"sixteen-letters!", "sixteen-letters!"},
		{"seventeen-letters", "seventeen-lette…"},
		{"ééééééééééééééééé", "ééééééééééééééé…"},
		{"\n", `\n`},
		{"a\tb\x00", `a\tb\x00`},
		{"line\nbreak-and-more-text", `line\nbreak-and…`},
	}
	for _, tt := range tests {
		if got := shortLabel(tt.in); got != tt.want {
			t.Errorf("shortLabel(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestPlotSamples writes example plots into $PROBFORMER_PLOT_SAMPLES for a
// person to inspect: labels readable, row 0 at the top, legend clear of the
// curves.
func TestPlotSamples(t *testing.T) {
	dir := os.Getenv(plotSamplesEnv)
	if dir == "" {
		t.Skipf("set %s to a directory to write sample plots", plotSamplesEnv)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := strings.Fields("the agreement on the european economic area was signed in august 1992 .")
	out := strings.Fields("l' accord sur la zone économique européenne a été signé en août 1992 .")
	w := make([][]float64, len(out))
	// A near-diagonal alignment with the French adjective–noun swap.
	align := []int{0, 1, 2, 3, 6, 5, 4, 7, 7, 8, 9, 10, 11, 12}
	for i := range w {
		w[i] = make([]float64, len(src))
		for j := range w[i] {
			w[i][j] = 0.02
		}
		w[i][align[i]] = 1 - 0.02*float64(len(src)-1)
	}
	samples := []struct {
		name string
		err  error
	}{
		{"heatmap.png", WriteHeatmap(filepath.Join(dir, "heatmap.png"), w, out, src, "attention: en → fr")},
		{"heatmap-1x1.png", WriteHeatmap(filepath.Join(dir, "heatmap-1x1.png"), [][]float64{{1}}, []string{"oui"}, []string{"yes"}, "1×1")},
		{"heatmap-20x20.png", WriteHeatmap(filepath.Join(dir, "heatmap-20x20.png"), diagonal(20), words("out", 20), words("source-word-", 20), "20×20 diagonal")},
		{"curves.png", WriteCurves(filepath.Join(dir, "curves.png"), "pixel accuracy vs clicks", "clicks", "pixel accuracy",
			[]float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, []Curve{
				{"with adaptation", []float64{0.62, 0.74, 0.81, 0.86, 0.89, 0.91, 0.925, 0.935, 0.94, 0.945, 0.95}},
				{"without adaptation", []float64{0.62, 0.70, 0.75, 0.79, 0.82, 0.84, 0.855, 0.865, 0.87, 0.875, 0.88}},
			})},
		{"curves-loss.png", WriteCurves(filepath.Join(dir, "curves-loss.png"), "loss", "epoch", "cross-entropy",
			[]float64{1, 2, 3, 4, 5}, []Curve{
				{"train", []float64{2.3, 1.1, 0.7, 0.5, 0.42}},
				{"valid", []float64{2.4, 1.3, 1.0, 0.9, 0.88}},
			})},
		{"curves-loss-log.png", WriteCurvesWith(filepath.Join(dir, "curves-loss-log.png"), "train_loss", "step", "train_loss",
			[]float64{100, 200, 300, 400, 500, 600, 700, 800}, []Curve{
				{"scratch", []float64{40, 9, 2.5, 0.8, 0.3, 0.12, 0.07, 0.05}},
				{"pretrained", []float64{5, 1.2, 0.4, 0.15, 0.08, 0.05, math.NaN(), math.NaN()}},
			}, CurveOptions{LogY: true})},
	}
	for _, s := range samples {
		if s.err != nil {
			t.Errorf("%s: %v", s.name, s.err)
		}
	}
}

// TestHeatmapPaletteRounding: a maximum whose palette steps round past it
// once made gonum's Palette panic.
func TestHeatmapPaletteRounding(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.png")
	for _, hi := range []float64{0.997, 0.8123456789, 0.3, 1 - 1e-12} {
		if err := WriteHeatmap(path, [][]float64{{hi, 1 - hi}}, []string{"a"}, []string{"b", "c"}, ""); err != nil {
			t.Fatalf("max %v: %v", hi, err)
		}
	}
}
