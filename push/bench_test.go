package push_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/push"
)

// BenchmarkPush_Verify_Body verifies a push of a 1 KiB body signed under
// a secret and a next one, with one and with both secrets held: the
// receiver's cost per push.
func BenchmarkPush_Verify_Body(b *testing.B) {
	body := []byte(strings.Repeat("x", 1024))
	now := time.Now()
	secrets := []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_c2Vjb25kIGtleQ=="}
	r := httptest.NewRequest("POST", "/", nil)
	if err := push.SetHeaders(r.Header, "msg_1_1", now, body, secrets...); err != nil {
		b.Fatal(err)
	}
	for n := 1; n <= 2; n++ {
		b.Run(fmt.Sprintf("secrets=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if err := push.Verify(r, body, now, secrets[:n]...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
