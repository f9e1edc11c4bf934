package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// The process tests run `hourglass serve --postgres` nodes as processes
// of their own on loopback ports, against a throwaway PostgreSQL, and
// drive them over HTTP with package client: what the in-process tests
// stand in for (a crash, a pause) done to real processes with signals.
//
// Every node connects with application_name set to its name, and
// auditTrigger records each owner's write (a timer fired: a task made
// ready or its lease settled) made while the partition's row names
// another owner: a write that a fenced-out node should never make.

// processLease is the nodes' partition lease: short, so that a takeover
// fits in a test, long enough for a loaded machine to renew it (every
// third of it).
const processLease = time.Second

// hourglassBinary builds ./cmd/hourglass once for the test binary.
var hourglassBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "hourglass-cluster-bin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "hourglass")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/hourglass")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/hourglass: %v\n%s", err, out)
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if bin, err := hourglassBinary(); err == nil {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

// proc is one node process, restartable under its name, address and log.
type proc struct {
	t    testing.TB
	bin  string
	name string
	url  string // the database, with application_name=name
	addr string
	log  string // stderr of every run, appended
	c    *client.Client

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	status error
}

// startProc starts node name on the database at dbURL, stopped (SIGKILL)
// when the test ends.
func startProc(t testing.TB, dbURL, name string) *proc {
	t.Helper()
	bin, err := hourglassBinary()
	if err != nil {
		t.Fatal(err)
	}
	sep := "?"
	if strings.Contains(dbURL, "?") {
		sep = "&"
	}
	p := &proc{t: t, bin: bin, name: name, url: dbURL + sep + "application_name=" + name,
		addr: freeAddr(t), log: filepath.Join(t.TempDir(), name+".log")}
	if p.c, err = client.New("http://"+p.addr, client.Options{}); err != nil {
		t.Fatal(err)
	}
	p.start()
	t.Cleanup(func() {
		p.signal(syscall.SIGCONT)
		p.kill()
		if t.Failed() {
			t.Logf("log of %s (last 3000 bytes):\n%s", name, p.logTail(3000))
		}
	})
	return p
}

// freeAddr returns a loopback address with a port free at the moment.
func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start runs the node and waits until it is ready.
func (p *proc) start() {
	p.t.Helper()
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	cmd := exec.Command(p.bin, "serve", "--postgres", p.url, "--node", p.name, "--http", p.addr,
		"--lease", processLease.String(), "--log-format", "json", "--log-level", "debug")
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		p.t.Fatal(err)
	}
	exited := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.status = err
		p.mu.Unlock()
		close(exited)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := p.c.Ready(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-exited:
			p.t.Fatalf("%s exited before ready (%v):\n%s", p.name, p.status, p.logTail(2000))
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s not ready within 20 s: %v\n%s", p.name, err, p.logTail(2000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// signal sends sig to the running process, if any.
func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Signal(sig)
	}
}

// kill sends SIGKILL and waits for the process to exit.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if exited != nil {
		<-exited
	}
}

// logTail returns the last n bytes of the node's log.
func (p *proc) logTail(n int) string {
	b, _ := os.ReadFile(p.log)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// logCount counts the lines of the node's log that contain s.
func (p *proc) logCount(s string) int {
	b, _ := os.ReadFile(p.log)
	return bytes.Count(b, []byte(s))
}

// sqlAudit records owner writes made while the partition's row names
// another owner (see the file comment). The flush is the only statement
// that clears fire_at without counting a release (nack) or a kick, but
// for a give-back (a reservation a flush made for a waiter that had left,
// undone by its own node with its attempt: any node may reserve).
const sqlAudit = `CREATE TABLE audit_fenced (at timestamptz DEFAULT clock_timestamp(), writer text,
		job_id bigint, partition int, owner text, old_state int, new_state int);
	CREATE FUNCTION audit_fenced() RETURNS trigger LANGUAGE plpgsql AS $$
	DECLARE o text;
	BEGIN
		IF OLD.fire_at IS NOT NULL AND NEW.fire_at IS NULL AND NEW.releases = OLD.releases AND NEW.kicks = OLD.kicks
			AND NOT (OLD.state = 2 AND NEW.state = 1 AND NEW.attempts = OLD.attempts - 1) THEN
			SELECT owner INTO o FROM hourglass_partitions WHERE partition = NEW.partition;
			IF o IS DISTINCT FROM current_setting('application_name') THEN
				INSERT INTO audit_fenced (writer, job_id, partition, owner, old_state, new_state)
				VALUES (current_setting('application_name'), NEW.job_id, NEW.partition, o, OLD.state, NEW.state);
			END IF;
		END IF;
		RETURN NULL;
	END $$;
	CREATE TRIGGER audit_fenced AFTER UPDATE ON hourglass_tasks FOR EACH ROW EXECUTE FUNCTION audit_fenced();`

// execSQL runs the statements in sql on the database at url.
func execSQL(t testing.TB, url, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatal(err)
	}
}

// query runs sql on the database at url and returns the rows' first
// columns as strings, joined by spaces.
func query(t testing.TB, url, sql string, args ...any) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		var f []string
		for _, v := range vals {
			f = append(f, fmt.Sprint(v))
		}
		out = append(out, strings.Join(f, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// ledger accounts for what clients were told: answered puts, answered
// acks, and every delivery, and finds the broken promises.
type ledger struct {
	mu        sync.Mutex
	put       map[string]time.Time // answered puts: id → due
	acked     map[string]time.Time // answered acks: id → when answered
	delivered map[string]int
	wrong     []string
}

func newLedger() *ledger {
	return &ledger{put: map[string]time.Time{}, acked: map[string]time.Time{}, delivered: map[string]int{}}
}

// delivery records task handed out by a reserve that started at asked
// and was answered at got: it must be due by then, and not acked before
// the reserve began.
func (l *ledger) delivery(node string, tk api.Task, asked, got time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.delivered[tk.ID]++
	if got.Before(tk.Due) {
		l.wrong = append(l.wrong, fmt.Sprintf("%s delivered by %s %v early", tk.ID, node, tk.Due.Sub(got)))
	}
	if at, ok := l.acked[tk.ID]; ok && at.Before(asked) {
		l.wrong = append(l.wrong, fmt.Sprintf("%s delivered by %s at %v, after its ack was answered at %v",
			tk.ID, node, got.Format(time.StampMicro), at.Format(time.StampMicro)))
	}
}

// produce puts tasks due within 1.5 s through the nodes in turn
// (starting at first), ids "p<first>-<k>", one every 10 ms or so, until
// ctx ends, and records the answered ones.
func (l *ledger) produce(ctx context.Context, nodes []*proc, first int, r *rand.Rand, queue string) {
	for k := 0; ctx.Err() == nil; k++ {
		p := nodes[(first+k)%len(nodes)]
		id := fmt.Sprintf("p%d-%d", first, k)
		delay := api.Duration(time.Duration(r.Int64N(int64(1500 * time.Millisecond))))
		ttr := api.Duration(2 * time.Second)
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		task, _, err := p.c.Put(pctx, queue, api.PutRequest{ID: id, Delay: &delay, TTR: &ttr})
		cancel()
		if err == nil {
			l.mu.Lock()
			l.put[id] = task.Due
			l.mu.Unlock()
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// consume reserves from the nodes (starting at first, moving on after an
// error) and acks what it gets, until ctx ends.
func (l *ledger) consume(ctx context.Context, nodes []*proc, first int, queue string) {
	k := first
	for ctx.Err() == nil {
		p := nodes[k%len(nodes)]
		asked := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		tasks, err := p.c.Reserve(rctx, queue, 10, 500*time.Millisecond)
		cancel()
		got := time.Now()
		if err != nil {
			k++
			time.Sleep(20 * time.Millisecond)
			continue
		}
		for _, tk := range tasks {
			l.delivery(p.name, tk, asked, got)
		}
		for _, tk := range tasks {
			actx, cancel := context.WithTimeout(ctx, 3*time.Second)
			err := p.c.Ack(actx, queue, tk.ID, tk.Lease)
			cancel()
			if err == nil {
				l.mu.Lock()
				l.acked[tk.ID] = time.Now()
				l.mu.Unlock()
			}
		}
	}
}

// check fails t with the broken promises, and with the answered puts
// never delivered.
func (l *ledger) check(t testing.TB) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var missing []string
	for id := range l.put {
		if l.delivered[id] == 0 {
			missing = append(missing, id)
		}
	}
	redelivered := 0
	for _, k := range l.delivered {
		if k > 1 {
			redelivered++
		}
	}
	t.Logf("%d puts answered, %d tasks delivered (%d more than once, allowed before an ack), %d acks answered",
		len(l.put), len(l.delivered), redelivered, len(l.acked))
	if len(l.wrong) > 0 {
		t.Errorf("%d broken promises, first: %s", len(l.wrong), strings.Join(l.wrong[:min(5, len(l.wrong))], "; "))
	}
	if len(missing) > 0 {
		t.Errorf("%d answered puts never delivered, e.g. %v", len(missing), missing[:min(5, len(missing))])
	}
}

// settled reports whether every answered put was delivered and is
// acked: the ack answered, or (an ack whose answer was lost) the task
// gone from the database.
func (l *ledger) settled(t testing.TB, url string) bool {
	l.mu.Lock()
	var open []string
	for id := range l.put {
		if l.delivered[id] == 0 {
			l.mu.Unlock()
			return false
		}
		if _, ok := l.acked[id]; !ok {
			open = append(open, id)
		}
	}
	l.mu.Unlock()
	return len(open) == 0 || query(t, url, "SELECT count(*) FROM hourglass_tasks WHERE id = ANY($1)", open)[0] == "0"
}

// allAcked reports whether every answered put has an answered ack.
func (l *ledger) allAcked() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.put {
		if _, ok := l.acked[id]; !ok {
			return false
		}
	}
	return true
}

// unacked describes the answered puts not acked: their rows, and their
// partitions' owners.
func (l *ledger) unacked(t testing.TB, url string) []string {
	l.mu.Lock()
	var ids []string
	for id := range l.put {
		if _, ok := l.acked[id]; !ok {
			ids = append(ids, id)
		}
	}
	l.mu.Unlock()
	return append([]string{fmt.Sprintf("%d; job state fire_at-now attempts partition owner epoch lease_until-now:", len(ids))},
		query(t, url, `SELECT t.id, t.job_id, t.state, (t.fire_at - hourglass_now()) / 1000000 || 'ms', t.attempts, t.partition,
			p.owner, p.epoch, p.lease_until - clock_timestamp()
		FROM hourglass_tasks t JOIN hourglass_partitions p USING (partition) WHERE t.id = ANY($1) LIMIT 10`, ids)...)
}

// within polls cond every 10 ms until it holds (true) or d passes.
func within(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// auditClean fails t if a node wrote as owner of a partition another
// held.
func auditClean(t testing.TB, url string) {
	t.Helper()
	if bad := query(t, url, "SELECT writer, job_id, partition, owner, old_state, new_state, at FROM audit_fenced ORDER BY at"); len(bad) > 0 {
		t.Errorf("%d owner writes by a node that did not own the partition (writer job partition owner old new at), first: %v",
			len(bad), bad[:min(5, len(bad))])
	}
}

// ownedBy returns the number of partitions whose live lease each node
// holds.
func ownedBy(t testing.TB, url string) map[string]int {
	out := map[string]int{}
	for _, r := range query(t, url, `SELECT owner, count(*) FROM hourglass_partitions
		WHERE owner IS NOT NULL AND lease_until > clock_timestamp() GROUP BY owner`) {
		name, k, _ := strings.Cut(r, " ")
		out[name], _ = strconv.Atoi(k)
	}
	return out
}

// seed returns the seed of a randomised test: $HOURGLASS_SEED, or the
// time. The test logs it, so that a failure can be run again.
func seed(t testing.TB) uint64 {
	if s, err := strconv.ParseUint(os.Getenv("HOURGLASS_SEED"), 10, 64); err == nil {
		return s
	}
	return uint64(time.Now().UnixNano())
}

// TestProcessKill: three node processes, producers and consumers spread
// over them; nodes killed with SIGKILL at seeded random moments and
// restarted. Every answered put is delivered, none early, none after its
// ack was answered; each killed node's partitions are taken over by the
// others (all partitions under live leases of other nodes) before it
// comes back; no node writes as owner of a partition it does not hold.
func TestProcessKill(t *testing.T) {
	if testing.Short() {
		t.Skip("kills node processes for about 30 s; skipped with -short")
	}
	t.Parallel()
	began := time.Now()
	url := server(t).CreateDatabase(t)
	nodes := []*proc{startProc(t, url, "a")}
	execSQL(t, url, sqlAudit)
	nodes = append(nodes, startProc(t, url, "b"), startProc(t, url, "c"))
	total := 64
	t.Logf("server and nodes up in %v", time.Since(began).Round(time.Millisecond))

	s := seed(t)
	t.Logf("seed %d (HOURGLASS_SEED=%d to run again)", s, s)
	rng := rand.New(rand.NewPCG(s, 14))
	const load = 12 * time.Second
	l := newLedger()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	putCtx, stopPuts := context.WithTimeout(ctx, load)
	defer stopPuts()
	var producers, consumers sync.WaitGroup
	for pi := range 6 {
		producers.Go(func() { l.produce(putCtx, nodes, pi, rand.New(rand.NewPCG(s, uint64(pi))), "work") })
	}
	for ci := range 6 {
		consumers.Go(func() { l.consume(ctx, nodes, ci, "work") })
	}

	// The killer: a node every 1.5 to 3 s, back 0 to 0.5 s after the
	// others hold all of its partitions.
	var kills, takeovers []time.Duration
	for time.Sleep(time.Second); putCtx.Err() == nil; {
		time.Sleep(1500*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond))))
		if putCtx.Err() != nil {
			break
		}
		v := nodes[rng.IntN(len(nodes))]
		held := ownedBy(t, url)[v.name]
		v.kill()
		killed := time.Now()
		took := eventually(t, 5*processLease, v.name+"'s partitions taken over", func() bool {
			o := ownedBy(t, url)
			return o[v.name] == 0 && sumOwned(o) == total
		})
		takeovers = append(takeovers, took)
		t.Logf("%s killed at %s holding %d partitions; all %d held by the others %v later: %v",
			v.name, killed.Format("15:04:05.000"), held, total, took.Round(time.Millisecond), ownedBy(t, url))
		time.Sleep(time.Duration(rng.Int64N(int64(500 * time.Millisecond))))
		v.start()
		kills = append(kills, time.Since(killed))
	}
	producers.Wait()
	t.Logf("%d kills; takeovers %v; load ended at %v", len(kills), takeovers, time.Since(began).Round(time.Millisecond))
	if len(kills) == 0 {
		t.Fatal("no node was killed")
	}
	if !within(20*time.Second, func() bool { return l.settled(t, url) }) {
		t.Errorf("answered puts not settled within 20 s after the load: %v", l.unacked(t, url))
	}
	t.Logf("settled at %v", time.Since(began).Round(time.Millisecond))
	cancel()
	consumers.Wait()
	l.check(t)
	auditClean(t, url)
	eventually(t, 5*processLease, "every partition held after the restarts", func() bool {
		return sumOwned(ownedBy(t, url)) == total
	})
}

func sumOwned(o map[string]int) int {
	k := 0
	for _, n := range o {
		k += n
	}
	return k
}

// TestProcessFencing: a node stopped with SIGSTOP past its lease, while
// tasks in its partitions fall due, is replaced by the other node, which
// delivers them; resumed with SIGCONT, its wheel fires the stale timers
// and its lease loop runs with stale leases, and it writes nothing that
// counts: no owner write on a partition it no longer holds (the audit),
// no task delivered again after its ack, none early. It then rejoins
// and takes its share at a new epoch.
func TestProcessFencing(t *testing.T) {
	if testing.Short() {
		t.Skip("pauses a node process past its lease; skipped with -short")
	}
	t.Parallel()
	url := server(t).CreateDatabase(t)
	a := startProc(t, url, "a")
	execSQL(t, url, sqlAudit)
	b := startProc(t, url, "b")
	eventually(t, 10*processLease, "two shares", func() bool {
		o := ownedBy(t, url)
		return o["a"] == 32 && o["b"] == 32
	})
	epochs := query(t, url, "SELECT partition, epoch FROM hourglass_partitions WHERE owner = 'a' ORDER BY partition")

	// Tasks due 1.5 to 3.5 s from now, about half in a's partitions: put
	// through b, announced to a, armed in a's wheel.
	l := newLedger()
	const tasks = 300
	var reqs []api.PutRequest
	r := rand.New(rand.NewPCG(seed(t), 1))
	for k := range tasks {
		d := api.Duration(1500*time.Millisecond + time.Duration(r.Int64N(int64(2*time.Second))))
		reqs = append(reqs, api.PutRequest{ID: fmt.Sprintf("t%d", k), Delay: &d})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := b.c.PutBatch(ctx, "work", reqs)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range res {
		if x.Task == nil {
			t.Fatalf("put: %v", x.Error)
		}
		l.put[x.Task.ID] = x.Task.Due
	}
	time.Sleep(200 * time.Millisecond) // a's listener arms the announced timers
	a.signal(syscall.SIGSTOP)
	stopped := time.Now()
	t.Logf("a stopped holding partitions (partition epoch): %v", epochs)

	var consumers sync.WaitGroup
	for ci := range 3 {
		consumers.Go(func() { l.consume(ctx, []*proc{b}, ci, "work") })
	}
	took := eventually(t, 5*processLease, "a's partitions taken by b", func() bool { return ownedBy(t, url)["b"] == 64 })
	t.Logf("b holds all 64 partitions %v after a stopped", took.Round(time.Millisecond))
	eventually(t, 30*time.Second, "every task acked while a is stopped", l.allAcked)
	time.Sleep(time.Until(stopped.Add(4 * time.Second)))

	// Resume a: every timer of its old window fires at once.
	a.signal(syscall.SIGCONT)
	resumed := time.Now()
	eventually(t, 10*processLease, "a back with its share at a new epoch", func() bool {
		o := ownedBy(t, url)
		return o["a"] == 32 && o["b"] == 32
	})
	time.Sleep(500 * time.Millisecond)
	cancel()
	consumers.Wait()
	t.Logf("a resumed; back with 32 partitions %v later; its log: %d \"fenced out\", %d \"partitions lost\"",
		time.Since(resumed).Round(time.Millisecond), a.logCount("fenced out of partitions"), a.logCount("partitions lost"))
	l.check(t)
	auditClean(t, url)
	if k := query(t, url, "SELECT count(*) FROM hourglass_tasks"); k[0] != "0" {
		t.Errorf("%s tasks left after every one was acked", k[0])
	}
}
