package push_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/push"
)

// TestVerify passes a good signature, its test vector of package api
// included, and refuses a missing, malformed, wrong or stale one.
func TestVerify(t *testing.T) {
	const secret = "whsec_test"
	body := []byte(`{"to":"a@b.c"}`)
	signedAt := time.Unix(1772366400, 0)
	req := func(sig string) *http.Request {
		r := httptest.NewRequest("POST", "/hooks", strings.NewReader(string(body)))
		if sig != "" {
			r.Header.Set("Hourglass-Signature", sig)
		}
		return r
	}
	const vector = "t=1772366400,v1=e857f1fb727ab71e92f638753255f758b7118be61094698108742f86ce2c73a7"
	if got := push.Sign(secret, body, signedAt); got != vector {
		t.Errorf("Sign = %s, want the documented %s", got, vector)
	}
	good := push.Sign(secret, body, signedAt)
	other := push.Sign("other", body, signedAt)
	for _, tc := range []struct {
		name string
		sig  string
		body []byte
		now  time.Time
		want error
	}{
		{"good", good, body, signedAt, nil},
		{"4m59s later", good, body, signedAt.Add(Tolerance - time.Second), nil},
		{"5m later", good, body, signedAt.Add(Tolerance), nil},
		{"5m earlier", good, body, signedAt.Add(-Tolerance), nil},
		{"rotated secret", other + ",v1=" + strings.Split(good, "v1=")[1], body, signedAt, nil},
		{"spaces", strings.ReplaceAll(good, ",", ", "), body, signedAt, nil},
		{"missing", "", body, signedAt, push.ErrNoSignature},
		{"5m1s later", good, body, signedAt.Add(Tolerance + time.Second), push.ErrExpired},
		{"5m1s earlier", good, body, signedAt.Add(-Tolerance - time.Second), push.ErrExpired},
		{"other secret", other, body, signedAt, push.ErrBadSignature},
		{"other body", good, []byte(`{"to":"x@b.c"}`), signedAt, push.ErrBadSignature},
		{"other time", strings.Replace(good, "t=1772366400", "t=1772366401", 1), body, signedAt, push.ErrBadSignature},
		{"no time", good[strings.Index(good, ",")+1:], body, signedAt, push.ErrBadSignature},
		{"no v1", "t=1772366400", body, signedAt, push.ErrBadSignature},
		{"v0 only", strings.Replace(good, "v1=", "v0=", 1), body, signedAt, push.ErrBadSignature},
		{"not hex", "t=1772366400,v1=zz", body, signedAt, push.ErrBadSignature},
		{"short", good[:len(good)-2], body, signedAt, push.ErrBadSignature},
		{"garbage", "hello", body, signedAt, push.ErrBadSignature},
		{"time not a number", "t=soon,v1=00", body, signedAt, push.ErrBadSignature},
	} {
		if err := push.Verify(secret, req(tc.sig), tc.body, tc.now); !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
			t.Errorf("%s: Verify(%q) = %v, want %v", tc.name, tc.sig, err, tc.want)
		}
	}
}

// Tolerance is push.Tolerance, shortened for the table.
const Tolerance = push.Tolerance
