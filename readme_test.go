package hourglass_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestREADME_ExamplesAreFindable checks that README tells a reader how to
// see the runnable examples in a way that shows them: go doc prints no
// examples, so README must not send readers there, and the command and
// files it names instead must exist and hold examples.
func TestREADME_ExamplesAreFindable(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := strings.Join(strings.Fields(string(b)), " ") // lines joined
	i := strings.Index(readme, "runnable examples")
	if i < 0 {
		t.Fatal(`README does not mention the "runnable examples"`)
	}
	para := readme[i:]
	if j := strings.Index(para, "##"); j >= 0 {
		para = para[:j]
	}
	if cmd := regexp.MustCompile("`go doc [^`]+`").FindString(para); cmd != "" {
		t.Errorf("README points at %s for the examples, which go doc does not print: %q", cmd, para)
	}
	if !strings.Contains(para, "go test -run Example -v") {
		t.Errorf("README does not give `go test -run Example -v` to run the examples: %q", para)
	}
	files := regexp.MustCompile(`\(([a-z_]+_test\.go)\)`).FindAllStringSubmatch(para, -1)
	if len(files) == 0 {
		t.Errorf("README names no example file: %q", para)
	}
	for _, f := range files {
		src, err := os.ReadFile(f[1])
		if err != nil {
			t.Errorf("README names %s: %v", f[1], err)
			continue
		}
		if !strings.Contains(string(src), "\nfunc Example") {
			t.Errorf("README names %s, which holds no example", f[1])
		}
	}
}
