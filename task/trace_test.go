package task_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/hourglass-go/hourglass/task"
)

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestTraceClean(t *testing.T) {
	long := strings.Repeat("a", 256)
	members := make([]string, 33)
	for i := range members {
		members[i] = "k" + strconv.Itoa(i) + "=v"
	}
	for _, c := range []struct {
		name string
		in   task.Trace
		want task.Trace
	}{
		{"none", task.Trace{}, task.Trace{}},
		{"parent", task.Trace{Parent: parent}, task.Trace{Parent: parent}},
		{"parent and state", task.Trace{parent, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"}, task.Trace{parent, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"}},
		{"state with spaces and empty members", task.Trace{parent, " a=1 ,, b@c=x y\t"}, task.Trace{parent, " a=1 ,, b@c=x y\t"}},
		{"state alone", task.Trace{State: "a=1"}, task.Trace{}},
		{"upper-case hex", task.Trace{Parent: strings.ToUpper(parent)}, task.Trace{}},
		{"version ff", task.Trace{Parent: "ff" + parent[2:]}, task.Trace{}},
		{"zero trace id", task.Trace{Parent: "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}, task.Trace{}},
		{"zero parent id", task.Trace{Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"}, task.Trace{}},
		{"version 00 too long", task.Trace{Parent: parent + "-x"}, task.Trace{}},
		{"short", task.Trace{Parent: parent[:54]}, task.Trace{}},
		{"bad dash", task.Trace{Parent: strings.Replace(parent, "-", "_", 1)}, task.Trace{}},
		{"later version", task.Trace{Parent: "01" + parent[2:] + "-what-comes"}, task.Trace{Parent: "01" + parent[2:] + "-what-comes"}},
		{"later version no dash", task.Trace{Parent: "01" + parent[2:] + "x"}, task.Trace{}},
		{"later version too long", task.Trace{Parent: "01" + parent[2:] + "-" + long}, task.Trace{}},
		{"state key upper", task.Trace{parent, "A=1"}, task.Trace{Parent: parent}},
		{"state no =", task.Trace{parent, "a"}, task.Trace{Parent: parent}},
		{"state empty value", task.Trace{parent, "a="}, task.Trace{Parent: parent}},
		{"state duplicate key", task.Trace{parent, "a=1,a=2"}, task.Trace{Parent: parent}},
		{"state value =", task.Trace{parent, "a=b=c"}, task.Trace{Parent: parent}},
		{"state control", task.Trace{parent, "a=\x01"}, task.Trace{Parent: parent}},
		{"state 33 members", task.Trace{parent, strings.Join(members, ",")}, task.Trace{Parent: parent}},
		{"state 32 members", task.Trace{parent, strings.Join(members[:32], ",")}, task.Trace{parent, strings.Join(members[:32], ",")}},
		{"state over 512 bytes", task.Trace{parent, "a=" + long + ",b=" + long}, task.Trace{Parent: parent}},
		{"state bad tenant", task.Trace{parent, "a@=1"}, task.Trace{Parent: parent}},
		{"state long system", task.Trace{parent, "a@" + strings.Repeat("b", 15) + "=1"}, task.Trace{Parent: parent}},
	} {
		if got := c.in.Clean(); got != c.want {
			t.Errorf("%s: Clean(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}
