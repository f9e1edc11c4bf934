package broker

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// lockPhrase is how the doc comment of a function called with b.mu held
// says so, word for word; the function's name ends in lockSuffix.
const (
	lockPhrase = "b.mu must be held"
	lockSuffix = "Locked"
)

// heldDoc matches the ways a doc comment (its words joined by single
// spaces) says that its function runs with b.mu held: lockPhrase and the
// phrases it replaced. A sentence that says b.mu is not held, or is
// released, matches none of them.
var heldDoc = regexp.MustCompile(`\b(?:b|Broker)\.mu (?:is|must be) held\b|\b[Tt]he caller holds (?:b|Broker)\.mu\b|\b(?:[Cc]alled|[Rr]uns) with (?:b|Broker)\.mu held\b`)

// lockedByContract lists the methods (receiver.name) that run with b.mu
// held under a name they cannot change, each with why: they are held to
// the rule as …Locked functions are.
var lockedByContract = map[string]string{
	"poller.Left": "service.Poller's method: service.LongPoll calls it with the engine's lock held",
}

// later names the functions that run a closure given to them later, on
// another goroutine, as go does: such a closure must take b.mu itself.
var later = map[string]bool{"AfterFunc": true}

// lockedValues lists the functions that may name a …Locked function
// other than by calling it (a method value, a func passed on), which
// the check cannot follow, each with why it is called with b.mu held.
var lockedValues = map[string]string{}

// TestLockDiscipline holds the broker's lock discipline, reading its
// source (the files that are not tests): a function that needs b.mu
// held says lockPhrase in its doc comment and ends in lockSuffix (or is
// in lockedByContract), and takes and releases no lock itself; every
// function that releases b.mu took it; and a …Locked function is called
// only from a …Locked function or after its caller took b.mu (by call
// sites: a method value or a closure is not followed, see lockedValues).
func TestLockDiscipline(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files := make(map[string]any)
	for _, name := range names {
		if !strings.HasSuffix(name, "_test.go") {
			files[name] = nil // read from disk
		}
	}
	for _, p := range lockProblems(t, files) {
		t.Error(p)
	}
}

// TestLockDiscipline_Breaches shows that the check finds each kind of
// breach, and passes the closures a …Locked function arms on a timer and
// the callbacks run under b.mu.
func TestLockDiscipline_Breaches(t *testing.T) {
	src := `package broker

// a is called with the lock. b.mu is held.
func (b *Broker) a() {}

// aLocked takes the lock. b.mu must be held.
func (b *Broker) aLocked() { b.mu.Lock(); b.mu.Unlock() }

// bLocked says nothing of it.
func (b *Broker) bLocked() {}

// c releases its caller's lock.
func (b *Broker) c() { b.mu.Unlock() }

// d calls before it locks.
func (b *Broker) d() { b.aLocked(); b.mu.Lock(); defer b.mu.Unlock(); b.aLocked() }

// e takes a …Locked method as a value.
func (b *Broker) e() { f := b.aLocked; f() }

// gLocked arms a timer that locks. b.mu must be held.
func (b *Broker) gLocked() {
	b.cron.AfterFunc(0, func() { b.mu.Lock(); defer b.mu.Unlock(); b.gLocked() })
}

// h walks under the lock.
func (b *Broker) h() {
	b.mu.Lock()
	defer func() { b.mu.Unlock() }()
	b.each(func() { b.gLocked() })
}

// i starts a goroutine that does not lock.
func (b *Broker) i() { go func() { b.gLocked() }() }

// jLocked arms a timer that does not lock. b.mu must be held.
func (b *Broker) jLocked() {
	b.cron.AfterFunc(0, func() { b.gLocked() })
	go func() { b.mu.Lock(); defer b.mu.Unlock(); b.gLocked() }()
}
`
	want := []string{
		`x.go:4: a: its doc says "b.mu is held", but its name does not end in Locked`,
		`x.go:4: a: its doc says "b.mu is held": say "b.mu must be held"`,
		`x.go:7: aLocked: a …Locked function calls b.mu.Lock()`,
		`x.go:7: aLocked: a …Locked function calls b.mu.Unlock()`,
		`x.go:10: bLocked: its name ends in Locked (or it is in lockedByContract), but its doc does not say "b.mu must be held"`,
		`x.go:13: c: releases b.mu, which its caller took: take and release it in one function`,
		`x.go:16: d: calls aLocked without b.mu held: take b.mu first, or name d …Locked`,
		`x.go:19: e: takes aLocked as a value, which the check cannot follow: call it, or list e in lockedValues with why b.mu is held`,
		`x.go:34: i (a closure): calls gLocked without b.mu held: take b.mu first`,
		`x.go:38: jLocked (a closure): calls gLocked without b.mu held: take b.mu first`,
	}
	got := lockProblems(t, map[string]any{"x.go": src})
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// lockProblems parses files (by name: the source, or nil to read the
// file) and returns the breaches of the lock discipline, each as
// "file:line: what", by file name, then in source order.
func lockProblems(t *testing.T, files map[string]any) []string {
	t.Helper()
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	fset := token.NewFileSet()
	var problems []string
	report := func(pos token.Pos, format string, args ...any) {
		p := fset.Position(pos)
		problems = append(problems, fmt.Sprintf("%s:%d: %s", p.Filename, p.Line, fmt.Sprintf(format, args...)))
	}
	for _, name := range names {
		f, err := parser.ParseFile(fset, name, files[name], parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			checkFunc(fd, report)
		}
	}
	return problems
}

// checkFunc reports fd's breaches of the lock discipline.
func checkFunc(fd *ast.FuncDecl, report func(token.Pos, string, ...any)) {
	name := fd.Name.Name
	_, contract := lockedByContract[recvName(fd)+"."+name]
	locked := strings.HasSuffix(name, lockSuffix) || contract
	doc := ""
	if fd.Doc != nil {
		doc = strings.Join(strings.Fields(fd.Doc.Text()), " ")
	}
	held := heldDoc.FindString(doc)
	switch {
	case held != "" && !locked:
		report(fd.Pos(), "%s: its doc says %q, but its name does not end in %s", name, held, lockSuffix)
	case locked && !strings.Contains(doc, lockPhrase):
		report(fd.Pos(), "%s: its name ends in %s (or it is in lockedByContract), but its doc does not say %q", name, lockSuffix, lockPhrase)
	}
	if held != "" && !strings.Contains(doc, lockPhrase) {
		report(fd.Pos(), "%s: its doc says %q: say %q", name, held, lockPhrase)
	}

	c := closures{inline: map[*ast.FuncLit]bool{}, later: map[*ast.FuncLit]bool{}}
	goCalls := make(map[*ast.CallExpr]bool)
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			goCalls[n.Call] = true
		case *ast.CallExpr:
			if lit, ok := ast.Unparen(n.Fun).(*ast.FuncLit); ok {
				if goCalls[n] {
					c.later[lit] = true
				} else {
					c.inline[lit] = true
				}
			}
			if sel, ok := ast.Unparen(n.Fun).(*ast.SelectorExpr); ok && later[sel.Sel.Name] {
				for _, a := range n.Args {
					if lit, ok := ast.Unparen(a).(*ast.FuncLit); ok {
						c.later[lit] = true
					}
				}
			}
		}
		return true
	})
	checkBody(name, fd.Body, locked, false, c, report)
}

// closures sorts the closures of a function: those called where they
// are made (inline), those run later on another goroutine (later), the
// others (callbacks, taken to run before the call they are given to
// returns).
type closures struct{ inline, later map[*ast.FuncLit]bool }

// checkBody checks body, a function's or that of a closure that runs
// apart from where it is made (passed on, or started by go), for rules
// (b) to (d) of TestLockDiscipline. locked tells whether body is a
// …Locked function's; inherited whether b.mu is held where the body
// runs: a callback is taken to run with b.mu as it was where it was
// made; a closure run later holds b.mu only once it takes it.
func checkBody(name string, body *ast.BlockStmt, locked, inherited bool, c closures, report func(token.Pos, string, ...any)) {
	var firstLock token.Pos // of b.mu.Lock() in body, closures apart left out
	var apart []*ast.FuncLit
	calls := make(map[ast.Expr]bool) // the Fun of every call
	ast.Inspect(body, func(n ast.Node) bool {
		if lit, ok := n.(*ast.FuncLit); ok && !c.inline[lit] {
			apart = append(apart, lit)
			return false
		}
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		calls[ast.Unparen(call.Fun)] = true
		switch op := muCall(call); {
		case op == "Lock" && locked, op == "Unlock" && locked:
			report(call.Pos(), "%s: a …%s function calls b.mu.%s()", name, lockSuffix, op)
		case op == "Lock":
			if firstLock == token.NoPos {
				firstLock = call.Pos()
			}
		case op == "Unlock" && firstLock == token.NoPos:
			report(call.Pos(), "%s: releases b.mu, which its caller took: take and release it in one function", name)
		}
		return true
	})
	held := func(pos token.Pos) bool {
		return locked || inherited || (firstLock != token.NoPos && firstLock < pos)
	}
	for _, lit := range apart {
		checkBody(name+" (a closure)", lit.Body, false, held(lit.Pos()) && !c.later[lit], c, report)
	}
	if locked {
		return
	}
	ast.Inspect(body, func(n ast.Node) bool {
		var id *ast.Ident
		switch e := n.(type) {
		case *ast.FuncLit:
			return c.inline[e]
		case *ast.SelectorExpr:
			id = e.Sel
		case *ast.Ident:
			id = e
		default:
			return true
		}
		if !strings.HasSuffix(id.Name, lockSuffix) || id.Name == lockSuffix {
			return true
		}
		n = ast.Unparen(n.(ast.Expr))
		switch {
		case !calls[n.(ast.Expr)]:
			if _, ok := lockedValues[strings.Fields(name)[0]]; !ok {
				report(n.Pos(), "%s: takes %s as a value, which the check cannot follow: call it, or list %s in lockedValues with why b.mu is held", name, id.Name, name)
			}
		case !held(n.Pos()) && strings.HasSuffix(name, ")"):
			report(n.Pos(), "%s: calls %s without b.mu held: take b.mu first", name, id.Name)
		case !held(n.Pos()):
			report(n.Pos(), "%s: calls %s without b.mu held: take b.mu first, or name %s …%s", name, id.Name, name, lockSuffix)
		}
		return false
	})
}

// recvName returns the name of fd's receiver type, or "".
func recvName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// muCall returns "Lock" or "Unlock" when call is b.mu.Lock() or
// b.mu.Unlock() (deferred or not), else "".
func muCall(call *ast.CallExpr) string {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || (sel.Sel.Name != "Lock" && sel.Sel.Name != "Unlock") {
		return ""
	}
	mu, ok := sel.X.(*ast.SelectorExpr)
	if !ok || mu.Sel.Name != "mu" {
		return ""
	}
	if b, ok := mu.X.(*ast.Ident); !ok || b.Name != "b" {
		return ""
	}
	return sel.Sel.Name
}
