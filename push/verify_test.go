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

// The test vector of the Standard Webhooks specification
// (standardwebhooks.com, its libraries' tests): a secret, a message and
// the signature every implementation computes.
const (
	specSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTime   = 1614265330
	specBody   = `{"test": 2432232314}`
	specSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

// request returns a push request of body with the given headers set
// (an empty value: left out).
func request(body, id, ts, sig string) *http.Request {
	r := httptest.NewRequest("POST", "/hooks", strings.NewReader(body))
	for k, v := range map[string]string{"webhook-id": id, "webhook-timestamp": ts, "webhook-signature": sig} {
		if v != "" {
			r.Header.Set(k, v)
		}
	}
	return r
}

// TestSign computes the specification's test vector and package api's,
// and one signature per secret, space-separated, for a rotation.
func TestSign(t *testing.T) {
	at := time.Unix(specTime, 0)
	if got, err := push.Sign(specID, at, []byte(specBody), specSecret); err != nil || got != specSig {
		t.Errorf("Sign = %q, %v; want the specification's %q", got, err, specSig)
	}
	const apiSig = "v1,IS3WiXOzYY6X8ARsgiyR5OTObsdAehXnTW/9x9LJL6A="
	if got, err := push.Sign("msg_1234_1772366399000000000", time.Unix(1772366400, 0), []byte(`{"to":"a@b.c"}`), specSecret); err != nil || got != apiSig {
		t.Errorf("Sign = %q, %v; want api.Push's %q", got, err, apiSig)
	}
	next := "whsec_" + "c2Vjb25kIGtleQ==" // "second key"
	two, err := push.Sign(specID, at, []byte(specBody), specSecret, next)
	if err != nil {
		t.Fatal(err)
	}
	first, second, ok := strings.Cut(two, " ")
	if !ok || first != specSig || !strings.HasPrefix(second, "v1,") || second == first {
		t.Errorf("Sign with two secrets = %q, want %q and another v1", two, specSig)
	}
	for _, tc := range []struct {
		secrets []string
		want    error
	}{
		{nil, push.ErrNoSecret},
		{[]string{""}, push.ErrNoSecret},
		{[]string{"whsec_"}, push.ErrBadSecret},
		{[]string{"whsec_e2e"}, push.ErrBadSecret},
		{[]string{"whsec_YQ"}, push.ErrBadSecret}, // unpadded
		{[]string{specSecret, "whsec_!!!!"}, push.ErrBadSecret},
	} {
		if _, err := push.Sign(specID, at, nil, tc.secrets...); !errors.Is(err, tc.want) {
			t.Errorf("Sign with %q: %v, want %v", tc.secrets, err, tc.want)
		}
	}
}

// TestKey decodes whsec_ secrets and takes others as raw bytes.
func TestKey(t *testing.T) {
	for secret, want := range map[string]string{
		"whsec_c2Vjb25kIGtleQ==": "second key",
		"s3cret":                 "s3cret",
		"WHSEC_YQ==":             "WHSEC_YQ==", // the prefix is case-sensitive
	} {
		if got, err := push.Key(secret); err != nil || string(got) != want {
			t.Errorf("Key(%q) = %q, %v; want %q", secret, got, err, want)
		}
	}
}

// TestVerify passes the specification's test vector and the server's
// signatures, a rotation's included, and refuses a missing, malformed,
// wrong or stale one, and a push replayed under another webhook-id.
func TestVerify(t *testing.T) {
	at := time.Unix(specTime, 0)
	ts := "1614265330"
	next := "whsec_c2Vjb25kIGtleQ=="
	raw := "s3cret"
	both, _ := push.Sign(specID, at, []byte(specBody), specSecret, next)
	nextOnly, _ := push.Sign(specID, at, []byte(specBody), next)
	rawSig, _ := push.Sign(specID, at, []byte(specBody), raw)
	other, _ := push.Sign(specID, at, []byte(specBody), "whsec_b3RoZXI=")
	for _, tc := range []struct {
		name        string
		id, ts, sig string
		body        string
		now         time.Time
		secrets     []string
		want        error
	}{
		{"spec vector", specID, ts, specSig, specBody, at, []string{specSecret}, nil},
		{"4m59s later", specID, ts, specSig, specBody, at.Add(push.Tolerance - time.Second), []string{specSecret}, nil},
		{"5m later", specID, ts, specSig, specBody, at.Add(push.Tolerance), []string{specSecret}, nil},
		{"5m earlier", specID, ts, specSig, specBody, at.Add(-push.Tolerance), []string{specSecret}, nil},
		{"raw secret", specID, ts, rawSig, specBody, at, []string{raw}, nil},
		{"rotation, old key", specID, ts, both, specBody, at, []string{specSecret}, nil},
		{"rotation, new key", specID, ts, both, specBody, at, []string{next}, nil},
		{"receiver holding both", specID, ts, nextOnly, specBody, at, []string{specSecret, next}, nil},
		{"other versions skipped", specID, ts, "v1a,AAAA v2,xyz " + specSig, specBody, at, []string{specSecret}, nil},
		{"no id", "", ts, specSig, specBody, at, []string{specSecret}, push.ErrNoSignature},
		{"no timestamp", specID, "", specSig, specBody, at, []string{specSecret}, push.ErrNoSignature},
		{"no signature", specID, ts, "", specBody, at, []string{specSecret}, push.ErrNoSignature},
		{"no secret", specID, ts, specSig, specBody, at, nil, push.ErrNoSecret},
		{"bad secret", specID, ts, specSig, specBody, at, []string{"whsec_e2e"}, push.ErrBadSecret},
		{"5m1s later", specID, ts, specSig, specBody, at.Add(push.Tolerance + time.Second), []string{specSecret}, push.ErrExpired},
		{"5m1s earlier", specID, ts, specSig, specBody, at.Add(-push.Tolerance - time.Second), []string{specSecret}, push.ErrExpired},
		{"replayed under another id", "msg_other", ts, specSig, specBody, at, []string{specSecret}, push.ErrBadSignature},
		{"other time", specID, "1614265331", specSig, specBody, at, []string{specSecret}, push.ErrBadSignature},
		{"other body", specID, ts, specSig, `{"test": 2432232315}`, at, []string{specSecret}, push.ErrBadSignature},
		{"other secret", specID, ts, other, specBody, at, []string{specSecret}, push.ErrBadSignature},
		{"rotated out", specID, ts, nextOnly, specBody, at, []string{specSecret}, push.ErrBadSignature},
		{"raw secret as whsec_", specID, ts, rawSig, specBody, at, []string{"whsec_czNjcmV0"}, nil},
		{"v0 only", specID, ts, strings.Replace(specSig, "v1,", "v0,", 1), specBody, at, []string{specSecret}, push.ErrBadSignature},
		{"not base64", specID, ts, "v1,!!!", specBody, at, []string{specSecret}, push.ErrBadSignature},
		{"short", specID, ts, specSig[:len(specSig)-4], specBody, at, []string{specSecret}, push.ErrBadSignature},
		{"garbage", specID, ts, "hello", specBody, at, []string{specSecret}, push.ErrBadSignature},
		{"time not a number", specID, "soon", specSig, specBody, at, []string{specSecret}, push.ErrBadSignature},
	} {
		err := push.Verify(request(tc.body, tc.id, tc.ts, tc.sig), []byte(tc.body), tc.now, tc.secrets...)
		if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestSetHeaders signs a request as the server does, which Verify
// accepts, and refuses under another id.
func TestSetHeaders(t *testing.T) {
	now := time.Now()
	body := []byte(`{"n":1}`)
	r := request(string(body), "", "", "")
	if err := push.SetHeaders(r.Header, "msg_7_1", now, body, specSecret); err != nil {
		t.Fatal(err)
	}
	if err := push.Verify(r, body, now, specSecret); err != nil {
		t.Errorf("Verify of SetHeaders: %v", err)
	}
	r.Header.Set("webhook-id", "msg_8_1")
	if err := push.Verify(r, body, now, specSecret); !errors.Is(err, push.ErrBadSignature) {
		t.Errorf("Verify under another id: %v, want %v", err, push.ErrBadSignature)
	}
	if err := push.SetHeaders(r.Header, "msg_9_1", now, body, "whsec_?"); !errors.Is(err, push.ErrBadSecret) || r.Header.Get("webhook-id") != "msg_8_1" {
		t.Errorf("SetHeaders with a bad secret: %v, webhook-id %q; want %v and the headers untouched", err, r.Header.Get("webhook-id"), push.ErrBadSecret)
	}
}
