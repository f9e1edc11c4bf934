package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// ErrNoChartData is returned by [WriteChart] when results hold nothing to
// draw: neither the schedule-cancel nor the memory scenario ran.
var ErrNoChartData = errors.New("bench: no schedule-cancel or memory results to chart")

// chartPanel is one log-log plot: a metric of one scenario against n, a
// line per structure.
type chartPanel struct {
	scenario, metric string
	title, yLabel    string
	// logY puts the metric on a log axis; otherwise it is linear from 0.
	logY bool
}

var chartPanels = []chartPanel{
	{"schedule-cancel", "ns/op", "Schedule + cancel with n pending", "ns per schedule+cancel", true},
	{"memory", "B/timer", "Heap per pending timer", "bytes per pending timer", false},
}

// legendRoom is the share of a panel's height kept clear of data at the
// top, for the legend.
const legendRoom = 0.45

// ChartFormat returns the format WriteChart uses for a file name: "png"
// for a name ending in .png, "svg" for .svg, and an error otherwise.
func ChartFormat(name string) (string, error) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".png":
		return "png", nil
	case ".svg":
		return "svg", nil
	}
	return "", fmt.Errorf("bench: chart file %q: name must end in .svg or .png", name)
}

// WriteChart draws, side by side, the schedule-cancel cost against the
// number of pending timers on log-log axes and, if the memory scenario
// ran, the bytes per timer against the same log axis, one line per
// structure, and writes the picture to w as format ("svg" or "png").
func WriteChart(w io.Writer, format string, results []Result) error {
	var plots []*plot.Plot
	for _, p := range chartPanels {
		if pl := panelPlot(p, results); pl != nil {
			plots = append(plots, pl)
		}
	}
	if len(plots) == 0 {
		return ErrNoChartData
	}
	width, height := vg.Length(len(plots))*14*vg.Centimeter, 11*vg.Centimeter
	var canvas vg.CanvasWriterTo
	switch format {
	case "png":
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(144))}
	case "svg":
		canvas = vgsvg.New(width, height)
	default:
		return fmt.Errorf("bench: chart format %q, want svg or png", format)
	}
	dc := draw.New(canvas)
	tiles := draw.Tiles{
		Rows: 1, Cols: len(plots),
		PadX: vg.Centimeter, PadTop: vg.Points(6), PadBottom: vg.Points(6),
		PadLeft: vg.Points(6), PadRight: vg.Points(6),
	}
	for i, p := range plots {
		p.Draw(tiles.At(dc, i, 0))
	}
	_, err := canvas.WriteTo(w)
	return err
}

// panelPlot builds one panel, or returns nil if results hold no positive
// value of its metric.
func panelPlot(p chartPanel, results []Result) *plot.Plot {
	series := map[string]plotter.XYs{}
	var xs, ys []float64
	for _, r := range results {
		if r.Scenario != p.scenario || r.N <= 0 {
			continue
		}
		v, ok := r.Value(p.metric)
		if !ok || v <= 0 {
			continue // a log axis cannot show it
		}
		series[r.Structure] = append(series[r.Structure], plotter.XY{X: float64(r.N), Y: v})
		xs, ys = append(xs, float64(r.N)), append(ys, v)
	}
	if len(xs) == 0 {
		return nil
	}
	pl := plot.New()
	pl.Title.Text = p.title
	pl.X.Label.Text = "pending timers (n)"
	pl.Y.Label.Text = p.yLabel
	// Log axes are drawn as linear axes of log10 values with ticks at the
	// decades: plot.LogScale mislays the padding for a centred axis label
	// (it centres at the arithmetic mean), which pushes the plot down.
	lo, hi := logRange(xs)
	pl.X.Min, pl.X.Max = math.Log10(lo), math.Log10(hi)
	pl.X.Tick.Marker = decadeTicks{}
	if p.logY {
		lo, hi := logRange(ys)
		// Keep the top of the panel clear for the legend.
		pl.Y.Min, pl.Y.Max = math.Log10(lo), math.Log10(hi)+math.Log10(hi/lo)*legendRoom/(1-legendRoom)
		pl.Y.Tick.Marker = decadeTicks{}
	} else {
		pl.Y.Min, pl.Y.Max = 0, slices.Max(ys)*1.1/(1-legendRoom)
	}
	pl.Legend.Top, pl.Legend.Left = true, true
	pl.Add(plotter.NewGrid())
	for i, s := range StructureNames() {
		xy := series[s]
		if len(xy) == 0 {
			continue
		}
		slices.SortFunc(xy, func(a, b plotter.XY) int { return int(a.X - b.X) })
		for i := range xy {
			xy[i].X = math.Log10(xy[i].X)
			if p.logY {
				xy[i].Y = math.Log10(xy[i].Y)
			}
		}
		line, points, err := plotter.NewLinePoints(xy)
		if err != nil {
			continue
		}
		line.Color, points.Color = plotutil.Color(i), plotutil.Color(i)
		line.Width = vg.Points(1.5)
		points.Shape = plotutil.Shape(i)
		pl.Add(line, points)
		pl.Legend.Add(s, line, points)
	}
	return pl
}

// logRange returns axis bounds for positive values on a log scale: the
// smallest and largest, pushed apart to a decade either side when they
// are equal, and out by a little otherwise so points do not sit on the
// frame.
func logRange(vs []float64) (lo, hi float64) {
	lo, hi = slices.Min(vs), slices.Max(vs)
	if lo == hi {
		return lo / 10, hi * 10
	}
	return lo / 1.5, hi * 1.5
}

// decadeTicks marks an axis of log10 values: a labelled tick at each
// power of ten (100, 1k, 1M) and unlabelled ones at 2..9 times it.
type decadeTicks struct{}

func (decadeTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for d := math.Floor(min); d <= math.Ceil(max); d++ {
		for k := 1; k < 10; k++ {
			v := d + math.Log10(float64(k))
			if v < min || v > max {
				continue
			}
			t := plot.Tick{Value: v}
			if k == 1 {
				t.Label = formatRate(math.Pow(10, d))
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
