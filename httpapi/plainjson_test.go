package httpapi

import "strings"

// listBody returns the body {"key":[item(0),…,item(n-1)]} and a newline:
// the plain form of a batch of puts or of acks.
func listBody(key string, n int, item func(i int) string) string {
	var b strings.Builder
	b.WriteString(`{"` + key + `":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item(i))
	}
	b.WriteString("]}\n")
	return b.String()
}
