package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// WriteMarkdown writes results as Markdown: a heading and a table per
// scenario, in the order the results come, with a row per structure and
// size and a column per metric. A cell whose metric a row lacks shows -.
func WriteMarkdown(w io.Writer, results []Result) error {
	var order []string
	by := map[string][]Result{}
	for _, r := range results {
		if _, ok := by[r.Scenario]; !ok {
			order = append(order, r.Scenario)
		}
		by[r.Scenario] = append(by[r.Scenario], r)
	}
	var b strings.Builder
	for i, sc := range order {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "### %s\n\n", sc)
		if doc := ScenarioDoc(sc); doc != "" {
			fmt.Fprintf(&b, "%s.\n\n", upperFirst(doc))
		}
		writeTable(&b, by[sc])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTable writes one scenario's results as a table.
func writeTable(b *strings.Builder, rs []Result) {
	var names []string
	units := map[string]string{}
	hasN, hasCase, hasNote := false, false, false
	for _, r := range rs {
		for _, m := range r.Metrics {
			if !slices.Contains(names, m.Name) {
				names = append(names, m.Name)
				units[m.Name] = m.Unit
			}
		}
		hasN = hasN || r.N > 0
		hasCase = hasCase || r.Case != ""
		hasNote = hasNote || r.Note != "" || r.Err != ""
	}
	head := []string{"structure"}
	if hasN {
		head = append(head, "n")
	}
	if hasCase {
		head = append(head, "case")
	}
	head = append(head, names...)
	if hasNote {
		head = append(head, "note")
	}
	row(b, head)
	align := make([]string, len(head))
	for i := range align {
		align[i] = "---:"
	}
	align[0] = "---"
	if hasCase {
		align[slices.Index(head, "case")] = "---"
	}
	if hasNote {
		align[len(align)-1] = "---"
	}
	row(b, align)
	for _, r := range rs {
		cells := []string{r.Structure}
		if hasN {
			cells = append(cells, formatCount(float64(r.N)))
		}
		if hasCase {
			cells = append(cells, r.Case)
		}
		for _, name := range names {
			if v, ok := r.Value(name); ok {
				cells = append(cells, FormatValue(units[name], v))
			} else {
				cells = append(cells, "-")
			}
		}
		if hasNote {
			note := r.Note
			if r.Err != "" {
				note = strings.TrimSpace(note + " error: " + r.Err)
			}
			cells = append(cells, strings.ReplaceAll(note, "|", `\|`))
		}
		row(b, cells)
	}
}

func row(b *strings.Builder, cells []string) {
	b.WriteString("| ")
	b.WriteString(strings.Join(cells, " | "))
	b.WriteString(" |\n")
}

// FormatValue formats v for a table according to its unit.
func FormatValue(unit string, v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	switch unit {
	case unitNs:
		if v < 100 {
			return strconv.FormatFloat(v, 'f', 1, 64)
		}
		return strconv.FormatFloat(v, 'f', 0, 64)
	case unitSec:
		return formatDuration(time.Duration(v * float64(time.Second)))
	case unitBytes, unitMiB:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case unitAllocs, unitRatio, unitCores:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case unitPct:
		return strconv.FormatFloat(v, 'f', 1, 64) + "%"
	case unitRate:
		return formatRate(v)
	case unitHz:
		if v < 100 {
			return strconv.FormatFloat(v, 'f', 2, 64)
		}
		return formatRate(v)
	case unitPerSec:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case unitCount:
		return formatCount(v)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// formatRate prints a rate with three significant digits and a k or M
// suffix: 2.5M, 250k, 999.
func formatRate(v float64) string {
	v = roundSignificant(v, 3)
	switch {
	case v >= 1e6:
		return trimZeros(strconv.FormatFloat(v/1e6, 'f', digitsAfter(v/1e6), 64)) + "M"
	case v >= 1e3:
		return trimZeros(strconv.FormatFloat(v/1e3, 'f', digitsAfter(v/1e3), 64)) + "k"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// roundSignificant rounds v to digits significant digits, so that
// 999,999 becomes 1,000,000 before a suffix is chosen for it.
func roundSignificant(v float64, digits int) float64 {
	if v <= 0 {
		return v
	}
	scale := math.Pow(10, float64(digits)-math.Ceil(math.Log10(v)))
	return math.Round(v*scale) / scale
}

// digitsAfter returns how many decimals give v (1 ≤ v < 1000) three
// significant digits.
func digitsAfter(v float64) int {
	switch {
	case v < 10:
		return 2
	case v < 100:
		return 1
	}
	return 0
}

func trimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// formatCount prints a whole number with thousands separators: 1,000,000.
func formatCount(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// formatDuration prints d with three significant digits: 1.02ms, 538µs.
func formatDuration(d time.Duration) string {
	if d < 0 {
		// A difference of two durations (the keys scenario's + p99).
		return "-" + formatDuration(-d)
	}
	switch {
	case d >= time.Second:
		return trimZeros(strconv.FormatFloat(d.Seconds(), 'f', 2, 64)) + "s"
	case d >= time.Millisecond:
		ms := float64(d) / float64(time.Millisecond)
		return trimZeros(strconv.FormatFloat(ms, 'f', digitsAfter(ms), 64)) + "ms"
	case d >= time.Microsecond:
		us := float64(d) / float64(time.Microsecond)
		return trimZeros(strconv.FormatFloat(us, 'f', digitsAfter(us), 64)) + "µs"
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
