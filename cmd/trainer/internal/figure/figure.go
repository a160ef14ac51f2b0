// Package figure draws the trainer's PNG figures: attention heat maps
// (WriteHeatmap) and metric curves (WriteCurves, WriteCurvesWith for a
// log-scale y axis). It is internal to
// cmd/trainer: the commands and the built-in tasks share it.
package figure

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"
	"unicode"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/probformer/probformer/graph/fileio"
)

// Heat-map geometry. A cell is heatmapCell on a side until the matrix would
// exceed heatmapMaxData, then cells shrink so that a long sentence still
// gives a PNG a viewer can open; labels overlap only beyond ~70 words.
const (
	heatmapCell     = vg.Length(0.5) * vg.Inch
	heatmapMaxData  = 24 * vg.Inch
	heatmapMinSide  = 4 * vg.Inch
	heatmapBarWidth = 0.2 * vg.Inch
	heatmapBarGap   = 0.15 * vg.Inch
	heatmapMargin   = 0.15 * vg.Inch

	// maxLabelRunes caps a tick label so one long token cannot push the
	// matrix off the canvas; longer labels end in "…".
	maxLabelRunes = 16

	curvesWidth  = 6 * vg.Inch
	curvesHeight = 4 * vg.Inch
)

// viridisControls samples matplotlib's viridis at ten evenly spaced points.
// Its lightness rises monotonically, so the ramp reads the same in greyscale
// and to colour-blind readers, and moreland.NewLuminance accepts it.
var viridisControls = [...]color.RGBA{
	{0x44, 0x01, 0x54, 0xff},
	{0x48, 0x28, 0x78, 0xff},
	{0x3e, 0x4a, 0x89, 0xff},
	{0x31, 0x68, 0x8e, 0xff},
	{0x26, 0x82, 0x8e, 0xff},
	{0x1f, 0x9e, 0x89, 0xff},
	{0x35, 0xb7, 0x79, 0xff},
	{0x6d, 0xcd, 0x59, 0xff},
	{0xb4, 0xde, 0x2c, 0xff},
	{0xfd, 0xe7, 0x25, 0xff},
}

// attentionGrid adapts an attention matrix to plotter.GridXYZ.
// weights: [rows, cols], rows = output words, cols = source words.
// Grid row r sits at y = r; the heat map's Y axis is inverted so that row 0
// is drawn at the top, as the sentence is read.
type attentionGrid [][]float64

func (g attentionGrid) Dims() (c, r int)   { return len(g[0]), len(g) }
func (g attentionGrid) Z(c, r int) float64 { return g[r][c] }
func (g attentionGrid) X(c int) float64    { return float64(c) }
func (g attentionGrid) Y(r int) float64    { return float64(r) }

// WriteHeatmap draws an attention matrix as a PNG heat map at path.
//
// weights[i][j] is the weight output word i puts on source word j; the rows
// are labelled with rowLabels top to bottom and the columns with colLabels
// left to right; labels longer than 16 characters are cut short, and
// column labels are slanted when they would not fit under their cells.
// Colours run from dark purple (low) to yellow (high) along a viridis ramp
// over [min(0, min w), max w], so a zero weight is the darkest colour (if
// no weight is negative) and the strongest weight the brightest; a colour
// bar on the right gives the scale. Cells are about 0.5 in on a side,
// smaller once a side would pass 24 in (48 words), and the image is at
// least 4 in × 4 in at 96 dpi. Words are drawn in Liberation Serif, which
// has no glyphs for scripts such as CJK; such labels come out blank.
//
// weights must be a non-empty rectangular matrix of finite numbers and the
// label counts must match its dimensions. The file is replaced atomically:
// on any error the previous file at path, if any, is left untouched.
func WriteHeatmap(path string, weights [][]float64, rowLabels, colLabels []string, title string) error {
	if err := checkHeatmap(weights, rowLabels, colLabels); err != nil {
		return fmt.Errorf("heat map %s: %w", path, err)
	}
	png, err := renderHeatmap(weights, rowLabels, colLabels, title)
	if err != nil {
		return fmt.Errorf("heat map %s: %w", path, err)
	}
	return writePNG(path, png)
}

// checkHeatmap reports why weights and labels cannot be drawn, if they cannot.
func checkHeatmap(weights [][]float64, rowLabels, colLabels []string) error {
	if len(weights) == 0 || len(weights[0]) == 0 {
		return errors.New("empty weight matrix")
	}
	cols := len(weights[0])
	for i, row := range weights {
		if len(row) != cols {
			return fmt.Errorf("weight row %d has %d columns, row 0 has %d", i, len(row), cols)
		}
		for j, w := range row {
			if math.IsNaN(w) || math.IsInf(w, 0) {
				return fmt.Errorf("weight [%d][%d] is %v", i, j, w)
			}
		}
	}
	if len(rowLabels) != len(weights) {
		return fmt.Errorf("%d row labels for %d rows", len(rowLabels), len(weights))
	}
	if len(colLabels) != cols {
		return fmt.Errorf("%d column labels for %d columns", len(colLabels), cols)
	}
	return nil
}

// renderHeatmap returns the PNG encoding of the heat map; its arguments
// must have passed checkHeatmap.
func renderHeatmap(weights [][]float64, rowLabels, colLabels []string, title string) (png []byte, err error) {
	rows, cols := len(weights), len(weights[0])

	lo, hi := 0.0, math.Inf(-1)
	for _, row := range weights {
		for _, w := range row {
			lo, hi = math.Min(lo, w), math.Max(hi, w)
		}
	}
	if hi <= lo {
		// An all-zero matrix still needs a non-empty colour range, and
		// plotter.ColorBar panics on an empty one.
		hi = lo + 1
	}
	cmap, err := moreland.NewLuminance(viridisControlColors())
	if err != nil {
		return nil, fmt.Errorf("palette: %w", err)
	}
	cmap.SetMin(lo)
	cmap.SetMax(hi)

	colors, err := paletteOf(cmap, lo, hi, 256)
	if err != nil {
		return nil, err
	}
	hm := plotter.NewHeatMap(attentionGrid(weights), colors)
	hm.Min, hm.Max = lo, hi

	p := plot.New()
	p.Title.Text = title
	p.Add(hm, cellBorders{rows: rows, cols: cols})
	p.X.Padding, p.Y.Padding = 0, 0
	p.X.Label.Text = "source"
	p.Y.Label.Text = "output"
	p.Y.Scale = plot.InvertedScale{Normalizer: plot.LinearScale{}}
	p.X.Tick.Marker = wordTicks(colLabels)
	p.Y.Tick.Marker = wordTicks(rowLabels)
	// Short tick marks keep the labels off the axis lines.
	p.X.Tick.Length, p.Y.Tick.Length = vg.Points(3), vg.Points(3)

	cell := heatmapCell
	if n := vg.Length(max(rows, cols)); n*cell > heatmapMaxData {
		cell = heatmapMaxData / n
	}
	colW := maxLabelWidth(p.X.Tick.Label, colLabels)
	if colW > 0.9*cell {
		// Horizontal labels would run into each other: slant them so that
		// each ends under its own column.
		p.X.Tick.Label.Rotation = math.Pi / 4
		p.X.Tick.Label.XAlign = draw.XRight
		p.X.Tick.Label.YAlign = draw.YTop
	}

	// The frame is the data area plus an estimate of what plot.Draw puts
	// around it; plot.Draw then fits the axes exactly, so the estimate only
	// decides how close to square the cells come out.
	left := maxLabelWidth(p.Y.Tick.Label, rowLabels) + 2*p.Y.Label.TextStyle.Height("output") + heatmapMargin
	bottom := p.X.Tick.Label.Height("Mg") + 2*p.X.Label.TextStyle.Height("source") + heatmapMargin
	if p.X.Tick.Label.Rotation != 0 {
		bottom += colW * vg.Length(math.Sin(p.X.Tick.Label.Rotation))
	}
	top := heatmapMargin
	if title != "" {
		top += p.Title.TextStyle.Height(title) + p.Title.Padding
	}
	bar := plot.New()
	bar.Add(&plotter.ColorBar{ColorMap: cmap, Vertical: true})
	bar.HideX()
	bar.X.Padding, bar.Y.Padding = 0, 0
	// The bar's own Y axis, with its tick labels, sits between the matrix
	// and the bar; its width depends only on the tick labels, so any
	// canvas measures it.
	probe := draw.Canvas{Rectangle: vg.Rectangle{Max: vg.Point{X: vg.Inch, Y: vg.Inch}}}
	barAxis := bar.DataCanvas(probe).Min.X
	barStrip := heatmapBarGap + barAxis + heatmapBarWidth

	right := barStrip + heatmapMargin
	width := max(left+vg.Length(cols)*cell+right, heatmapMinSide)
	height := max(top+vg.Length(rows)*cell+bottom, heatmapMinSide)

	return renderPNG(width, height, func(c draw.Canvas) {
		c = draw.Crop(c, heatmapMargin, -heatmapMargin, heatmapMargin, -heatmapMargin)
		heatC := draw.Crop(c, 0, -barStrip, 0, 0)
		p.Draw(heatC)
		// Align the colour bar with the matrix, not with the whole frame.
		data := p.DataCanvas(heatC)
		barC := c
		barC.Min.X = heatC.Max.X + heatmapBarGap
		barC.Min.Y, barC.Max.Y = data.Min.Y, data.Max.Y
		// A tick label at either end of the bar makes plot.Draw inset the
		// bar by half the label's height; grow the canvas to undo that.
		// The inset does not depend on the canvas height, so one step is
		// exact.
		inset := bar.DataCanvas(barC)
		barC.Min.Y -= inset.Min.Y - data.Min.Y
		barC.Max.Y += data.Max.Y - inset.Max.Y
		bar.Draw(barC)
	})
}

// cellBorders draws thin white lines between the cells of a rows × cols
// heat map. Without them, anti-aliasing leaves faint seams between some
// neighbouring cells and not others; deliberate borders look even and help
// the eye follow a row or column of a large matrix.
type cellBorders struct{ rows, cols int }

// Plot implements plot.Plotter.
func (b cellBorders) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	sty := draw.LineStyle{Color: color.White, Width: vg.Points(1)}
	top, bottom := trY(-0.5), trY(float64(b.rows)-0.5)
	for k := 1; k < b.cols; k++ {
		x := trX(float64(k) - 0.5)
		c.StrokeLine2(sty, x, top, x, bottom)
	}
	left, right := trX(-0.5), trX(float64(b.cols)-0.5)
	for k := 1; k < b.rows; k++ {
		y := trY(float64(k) - 0.5)
		c.StrokeLine2(sty, left, y, right, y)
	}
}

// viridisControlColors returns viridisControls as colours.
func viridisControlColors() []color.Color {
	cs := make([]color.Color, len(viridisControls))
	for i, c := range viridisControls {
		cs[i] = c
	}
	return cs
}

// wordTicks labels integer positions 0, 1, … with words.
func wordTicks(words []string) plot.ConstantTicks {
	ticks := make(plot.ConstantTicks, len(words))
	for i, w := range words {
		ticks[i] = plot.Tick{Value: float64(i), Label: shortLabel(w)}
	}
	return ticks
}

// shortLabel makes a word fit for a tick label: control characters, such
// as a newline token of a character-level vocabulary, are shown escaped
// (`\n`) instead of breaking the label across lines, and the result is cut
// to maxLabelRunes runes.
func shortLabel(s string) string {
	var r []rune
	for _, c := range s {
		if unicode.IsControl(c) {
			q := strconv.QuoteRune(c)
			r = append(r, []rune(q[1:len(q)-1])...)
			continue
		}
		r = append(r, c)
	}
	if len(r) > maxLabelRunes {
		r = append(r[:maxLabelRunes-1], '…')
	}
	return string(r)
}

// maxLabelWidth is the unrotated width of the widest label drawn in sty.
func maxLabelWidth(sty draw.TextStyle, labels []string) vg.Length {
	var w vg.Length
	for _, l := range labels {
		w = max(w, sty.Width(shortLabel(l)))
	}
	return w
}

// Curve is one named line of a WriteCurves plot; Ys[i] belongs to xs[i].
// A NaN in Ys is a missing point: the series has no value at that x (a run
// that was not evaluated at that step), so it gets no marker there and its
// line joins the points on either side. Series of different cadences thus
// share one x axis without any of their points being dropped.
type Curve struct {
	Name string
	Ys   []float64
}

// CurveOptions are the choices of WriteCurvesWith beyond the data; the
// zero value draws as WriteCurves does.
type CurveOptions struct {
	// LogY draws the y axis on a log scale, as a falling loss reads best:
	// every y must then be positive (or NaN, a missing point). The ticks
	// are the powers of ten when the values span two decades or more, 1, 2
	// and 5 times them when they span one, and evenly spaced round values
	// within a decade.
	LogY bool
}

// WriteCurves draws series against xs as lines with point markers and a
// legend, 6 in × 4 in, and writes the PNG to path; for example pixel
// accuracy against the number of clicks, with and without adaptation.
//
// There must be at least one point and one series, every series must have a
// non-empty name, one y per x (finite, or NaN for a missing point) and at
// least one point, and xs must be finite. Series are
// told apart by colour, marker shape and dash pattern, so the plot survives
// greyscale printing. The legend goes in the top or bottom right corner,
// whichever the curves leave emptier, in a band the y axis leaves free for
// it. The file is replaced atomically: on
// any error the previous file at path, if any, is left untouched.
func WriteCurves(path, title, xLabel, yLabel string, xs []float64, series []Curve) error {
	return WriteCurvesWith(path, title, xLabel, yLabel, xs, series, CurveOptions{})
}

// WriteCurvesWith is WriteCurves with options, such as a log-scale y axis
// (CurveOptions.LogY).
func WriteCurvesWith(path, title, xLabel, yLabel string, xs []float64, series []Curve, opt CurveOptions) error {
	if err := checkCurves(xs, series, opt); err != nil {
		return fmt.Errorf("curves %s: %w", path, err)
	}
	png, err := renderCurves(title, xLabel, yLabel, xs, series, opt)
	if err != nil {
		return fmt.Errorf("curves %s: %w", path, err)
	}
	return writePNG(path, png)
}

// checkCurves reports why xs and series cannot be drawn with opt, if they
// cannot.
func checkCurves(xs []float64, series []Curve, opt CurveOptions) error {
	if len(xs) == 0 {
		return errors.New("no x values")
	}
	if len(series) == 0 {
		return errors.New("no series")
	}
	for i, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("x[%d] is %v", i, x)
		}
	}
	for k, s := range series {
		if s.Name == "" {
			return fmt.Errorf("series %d has no name", k)
		}
		if len(s.Ys) != len(xs) {
			return fmt.Errorf("series %q has %d values for %d x values", s.Name, len(s.Ys), len(xs))
		}
		points := 0
		for i, y := range s.Ys {
			if math.IsInf(y, 0) {
				return fmt.Errorf("series %q: y[%d] is %v", s.Name, i, y)
			}
			if opt.LogY && y <= 0 {
				return fmt.Errorf("series %q: y[%d] is %v, not positive, on a log scale", s.Name, i, y)
			}
			if !math.IsNaN(y) {
				points++
			}
		}
		if points == 0 {
			return fmt.Errorf("series %q has no point (every y is NaN)", s.Name)
		}
	}
	return nil
}

// points returns the series' points: (xs[i], Ys[i]) for every Ys[i] that
// is not NaN (a missing point), in the order of xs.
func (s Curve) points(xs []float64) plotter.XYs {
	xys := make(plotter.XYs, 0, len(xs))
	for i, y := range s.Ys {
		if !math.IsNaN(y) {
			xys = append(xys, plotter.XY{X: xs[i], Y: y})
		}
	}
	return xys
}

// renderCurves returns the PNG encoding of the line plot; its arguments
// must have passed checkCurves.
func renderCurves(title, xLabel, yLabel string, xs []float64, series []Curve, opt CurveOptions) ([]byte, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Add(plotter.NewGrid())

	for k, s := range series {
		line, points, err := plotter.NewLinePoints(s.points(xs))
		if err != nil {
			return nil, fmt.Errorf("series %q: %w", s.Name, err)
		}
		line.Color = plotutil.Color(k)
		line.Dashes = plotutil.Dashes(k)
		line.Width = vg.Points(1.5)
		points.Color = plotutil.Color(k)
		points.Shape = plotutil.Shape(k)
		points.Radius = vg.Points(3)
		p.Add(line, points)
		p.Legend.Add(s.Name, line, points)
	}
	if integral(xs) && p.X.Max-p.X.Min <= 20 {
		// Counts such as clicks or epochs: no ticks between whole numbers.
		p.X.Tick.Marker = integerTicks{}
	}
	// ax maps a y value to where it sits along the axis, linearly; the
	// legend band and the crowding test are reckoned there.
	ax, unax := func(y float64) float64 { return y }, func(a float64) float64 { return a }
	if opt.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
		ax, unax = math.Log10, func(a float64) float64 { return math.Pow(10, a) }
		if p.Y.Min == p.Y.Max {
			// One value: a decade around it.
			p.Y.Min, p.Y.Max = p.Y.Min/math.Sqrt(10), p.Y.Max*math.Sqrt(10)
		}
	}
	lo, hi := ax(p.Y.Min), ax(p.Y.Max)
	p.Legend.Top = !crowdedTopRight(xs, series, p.Y.Min, p.Y.Max, ax)
	p.Legend.XOffs = -vg.Points(6)
	// The legend gets a band of its own above (or below) the data, so it
	// never hides a curve: about 14 pt per entry of a data area about
	// 220 pt high.
	frac := math.Min(0.6, float64(14*len(series)+12)/220)
	room := (hi - lo) * frac / (1 - frac)
	if p.Legend.Top {
		p.Legend.YOffs = -vg.Points(6)
		p.Y.Max = unax(hi + room)
	} else {
		p.Legend.YOffs = vg.Points(6)
		p.Y.Min = unax(lo - room)
	}
	return renderPNG(curvesWidth, curvesHeight, p.Draw)
}

// integral reports whether every x is a whole number.
func integral(xs []float64) bool {
	for _, x := range xs {
		if x != math.Trunc(x) {
			return false
		}
	}
	return true
}

// crowdedTopRight reports whether the right half of the plot holds more
// points in its top half than in its bottom half, where a legend in the
// top right corner would hide them. ax maps a y value to its linear
// position along the axis (math.Log10 on a log scale).
func crowdedTopRight(xs []float64, series []Curve, ymin, ymax float64, ax func(float64) float64) bool {
	xmin, xmax := xs[0], xs[0]
	for _, x := range xs {
		xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
	}
	xmid, ymid := (xmin+xmax)/2, (ax(ymin)+ax(ymax))/2
	var upper, lower int
	for _, s := range series {
		for i, x := range xs {
			switch {
			case x < xmid || math.IsNaN(s.Ys[i]):
			case ax(s.Ys[i]) > ymid:
				upper++
			default:
				lower++
			}
		}
	}
	return upper > lower
}

// logTicks marks a log-scale axis of positive values. Over two decades
// or more it labels the powers of ten and marks 2…9 times them unlabelled
// (as plot.LogTicks does); over one decade or more it labels 1, 2 and 5
// times the powers of ten; within a decade, where no power of ten might
// fall in range, it labels plot.DefaultTicks' round values. Only ticks in
// [min, max] are returned.
type logTicks struct{}

// Ticks implements plot.Ticker.
func (logTicks) Ticks(min, max float64) []plot.Tick {
	if !(min > 0) || !(max > min) {
		return nil
	}
	decades := math.Log10(max) - math.Log10(min)
	if decades < 1 {
		var ticks []plot.Tick
		for _, t := range (plot.DefaultTicks{}).Ticks(min, max) {
			if t.Value > 0 {
				ticks = append(ticks, t)
			}
		}
		return ticks
	}
	labelled := map[int]bool{1: true}
	if decades < 2 {
		labelled[2], labelled[5] = true, true
	}
	var ticks []plot.Tick
	for e := int(math.Floor(math.Log10(min))); e <= int(math.Ceil(math.Log10(max))); e++ {
		for m := 1; m < 10; m++ {
			v := float64(m) * math.Pow(10, float64(e))
			if v < min*(1-1e-12) || v > max*(1+1e-12) {
				continue
			}
			t := plot.Tick{Value: v}
			if labelled[m] {
				t.Label = strconv.FormatFloat(v, 'g', 6, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// integerTicks puts a labelled tick on every whole number in range.
type integerTicks struct{}

// Ticks implements plot.Ticker.
func (integerTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for v := math.Ceil(min); v <= max; v++ {
		if v == 0 {
			v = 0 // math.Ceil(-0.5) is -0, which would be labelled "-0".
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	return ticks
}

// renderPNG draws onto a width × height canvas at vgimg.DefaultDPI and
// returns the PNG encoding. gonum/plot reports some invalid states (an
// empty colour range, a bad palette) by panicking; those become errors so
// that a plot never takes a training run down with it.
func renderPNG(width, height vg.Length, drawFn func(draw.Canvas)) (png []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			png, err = nil, fmt.Errorf("render: %v", r)
		}
	}()
	img := vgimg.New(width, height)
	drawFn(draw.New(img))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("encode png: %w", err)
	}
	return buf.Bytes(), nil
}

// writePNG atomically replaces the file at path with png.
func writePNG(path string, png []byte) error {
	if path == "" {
		return errors.New("write png: empty path")
	}
	return fileio.WriteFileAtomic(path, func(w io.Writer) error {
		_, err := w.Write(png)
		return err
	})
}

// Compile-time checks that the adapters satisfy the gonum interfaces.
var (
	_ plotter.GridXYZ = attentionGrid(nil)
	_ plot.Ticker     = integerTicks{}
	_ plot.Ticker     = logTicks{}
)

// paletteOf samples cmap at n points of [lo, hi]. moreland's own Palette
// computes lo + (hi−lo)/(n−1)·(n−1), which can round past hi, and then
// panics.
func paletteOf(cmap palette.ColorMap, lo, hi float64, n int) (palette.Palette, error) {
	colors := make([]color.Color, n)
	for i := range colors {
		c, err := cmap.At(math.Min(lo+(hi-lo)*float64(i)/float64(n-1), hi))
		if err != nil {
			return nil, fmt.Errorf("palette: %w", err)
		}
		colors[i] = c
	}
	return fixedPalette(colors), nil
}

// fixedPalette is a palette.Palette of given colours.
type fixedPalette []color.Color

func (p fixedPalette) Colors() []color.Color { return p }
