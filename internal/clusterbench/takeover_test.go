package clusterbench_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/internal/clusterbench"
	"github.com/hourglass-go/hourglass/internal/pgtest"
)

// TestTakeoverTurns runs the takeover phase alone, turn after turn, each
// on a database of its own (about 10 s a turn), and logs each turn's
// timeline (Takeover.Timeline) and the distribution of the takeover
// from the kill and from the victim's last renewal. It runs only with
//
//	HOURGLASS_CLUSTERBENCH_TAKEOVER=20       the number of turns
//	HOURGLASS_CLUSTERBENCH_VICTIM=BIN        the victim: `BIN serve --postgres`, killed
//	                                         with SIGKILL (default: a fourth node in this
//	                                         process, cut off: Cluster.Cut)
//	HOURGLASS_CLUSTERBENCH_RATE=5000         tasks/s falling due through the 3 others
//	HOURGLASS_CLUSTERBENCH_PHASES=5          kill the victim 1 s into the stream plus, turn
//	                                         by turn, 0, 1, ... 4 fifths of a renewal period
//	                                         (a third of a lease), so that the kill falls
//	                                         at every point between two renewals (default 1:
//	                                         1 s, as the bench's row)
func TestTakeoverTurns(t *testing.T) {
	turns, _ := strconv.Atoi(os.Getenv("HOURGLASS_CLUSTERBENCH_TAKEOVER"))
	if turns <= 0 {
		t.Skip("a measurement: HOURGLASS_CLUSTERBENCH_TAKEOVER=N runs N turns")
	}
	rate, _ := strconv.Atoi(os.Getenv("HOURGLASS_CLUSTERBENCH_RATE"))
	if rate <= 0 {
		rate = 5000
	}
	phases, _ := strconv.Atoi(os.Getenv("HOURGLASS_CLUSTERBENCH_PHASES"))
	phases = max(phases, 1)
	bin := os.Getenv("HOURGLASS_CLUSTERBENCH_VICTIM")
	srv := pgtest.Start(t, pgtest.Set("max_connections", "400"))
	var fromKill, fromRenewal []time.Duration
	for turn := range turns {
		load, _ := os.ReadFile("/proc/loadavg")
		killAt := time.Second + time.Duration(turn%phases)*cluster.DefaultLease/3/time.Duration(phases)
		res, err := takeoverTurn(t, srv.CreateDatabase(t), bin, rate, turn, killAt)
		if err != nil {
			// A turn the bench could not finish says nothing of the
			// takeover's time: say so, and go on with the next.
			t.Errorf("turn %d: %v", turn, err)
			continue
		}
		t.Logf("turn %d: load %s: %d partitions; %s", turn, strings.Join(strings.Fields(string(load))[:3], " "),
			res.Partitions, res.Timeline())
		t.Logf("turn %d: %v", turn, res)
		if res.Lateness.Early > 0 {
			t.Errorf("turn %d: tasks delivered early: %v", turn, res.Lateness)
		}
		fromKill = append(fromKill, res.Time)
		fromRenewal = append(fromRenewal, res.FromRenewal)
	}
	if len(fromKill) == 0 {
		return
	}
	t.Logf("takeover from the kill: %s", spread(fromKill))
	t.Logf("takeover from the last renewal: %s", spread(fromRenewal))
}

// takeoverTurn runs one takeover: 3 nodes in this process and a victim.
func takeoverTurn(t *testing.T, url, bin string, rate, turn int, killAt time.Duration) (clusterbench.Takeover, error) {
	ctx := context.Background()
	nodes := 3
	if bin == "" {
		nodes = 4
	}
	c, err := clusterbench.Start(ctx, url, nodes, 64, nil)
	if err != nil {
		return clusterbench.Takeover{}, err
	}
	defer c.Close()
	c.KillAt = killAt
	var v clusterbench.Victim
	if bin == "" {
		v = c.Cut(0)
	} else {
		v = startVictim(t, bin, url, turn)
	}
	return c.Takeover(ctx, "bench-takeover", rate, v)
}

// startVictim starts `bin serve` as node bench-victim of the cluster at
// url, its log in the test's temporary directory, and returns it as the
// victim, killed with SIGKILL.
func startVictim(t *testing.T, bin, url string, turn int) clusterbench.Victim {
	log, err := os.Create(filepath.Join(t.TempDir(), fmt.Sprintf("victim-%d.log", turn)))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--postgres", url, "--node", "bench-victim", "--http", "127.0.0.1:0")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		log.Close()
		close(done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	return clusterbench.Victim{Name: "bench-victim", Kill: cmd.Process.Kill}
}

// spread formats durations as their min, median, p90 and max, how many
// passed a lease, and every one, sorted.
func spread(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	past := 0
	var all []string
	for _, d := range s {
		if d > cluster.DefaultLease {
			past++
		}
		all = append(all, fmt.Sprintf("%.2f", d.Seconds()))
	}
	return fmt.Sprintf("%d turns: min %.2fs, median %.2fs, p90 %.2fs, max %.2fs; %d past a lease (%v); all: %s",
		len(s), s[0].Seconds(), s[len(s)/2].Seconds(), s[len(s)*9/10].Seconds(), s[len(s)-1].Seconds(),
		past, cluster.DefaultLease, strings.Join(all, " "))
}
