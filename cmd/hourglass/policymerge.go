package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// `hourglass policy QUEUE --set JSON` changes only what JSON names: JSON
// is a JSON merge patch (RFC 7396) on the queue's stored policy. An
// object merges into the object it names, key by key; a null removes the
// key; any other value replaces it. So on a policy of
//
//	{"push":{"url":"http://app/hook"},"retry":{"initial":"1s","max":"1m0s","multiplier":2,"jitter":0},"max_attempts":3}
//
// `--set '{"max_attempts":5,"retry":{"max":"1h"}}'` keeps the push
// endpoint and the retry's other fields, and `--set '{"retry":null}'`
// drops the retry. --replace makes JSON the whole policy instead.
//
// The server has no PATCH of a policy yet, so the merge is made here: a
// GET of the policy, the patch applied to it, a PUT of the result. Three
// things follow from that:
//
//   - A change another client makes between the GET and the PUT is
//     overwritten. The policy's answer carries no version or ETag that
//     the PUT could be made conditional on, so the race is accepted: a
//     policy is set by an operator, rarely by two at once.
//   - A rate's burst is stored filled in (the limit, when none is
//     given), so the merge cannot tell a given burst from a filled-in
//     one; refillBurst takes a burst equal to the limit for filled in.
//   - The answer is not all stored policy. The keys in answerOnly are
//     the server's, answered and never written; they are taken out of
//     the GET's answer before the merge and refused in a patch. The
//     push endpoint's secret is never answered either, so a merge
//     cannot carry it: when the endpoint has one ("secret_set": true)
//     the patch must give "push": {"secret": ...} again, or null to
//     drop it, or remove the endpoint ("push": null); otherwise the
//     merge is refused before the PUT, and the policy is left as it was.
//     The same holds for a next secret ("next_secret_set": true).

// answerOnly lists the keys of a policy's GET answer that are not part
// of the stored policy, by the object holding them ("" the policy,
// "push" its endpoint): "effective", the values in force with the
// server's defaults filled in, and "secret_set" and "next_secret_set",
// whether the endpoint has a secret and a next one.
var answerOnly = map[string][]string{
	"":     {"effective"},
	"push": {"secret_set", "next_secret_set"},
}

// errSecretNotAnswered refuses a merge that would drop the push
// endpoint's secret.
var errSecretNotAnswered = errors.New(`policy: the queue's push endpoint has a secret, which the server never answers, so a merge cannot keep it: ` +
	`give it again with the change ({"push":{"secret":"..."}}), drop it ({"push":{"secret":null}}), or give the whole policy with --replace`)

// checkPatch refuses a patch that is not a JSON object or writes an
// answer-only key. Linear in the size of patch.
func checkPatch(patch []byte) error {
	var p map[string]any
	if err := json.Unmarshal(patch, &p); err != nil || p == nil {
		return errors.New("policy: give a JSON object")
	}
	for obj, keys := range answerOnly {
		m := p
		if obj != "" {
			m, _ = p[obj].(map[string]any)
		}
		for _, k := range keys {
			if _, ok := m[k]; ok {
				name := k
				if obj != "" {
					name = obj + "." + k
				}
				return fmt.Errorf("policy: %s is answered by the server, not written", name)
			}
		}
	}
	return nil
}

// setPolicyMerged applies patch, a JSON merge patch that checkPatch and
// decodePolicy accepted, to queue's stored policy and makes the result
// the queue's policy: a GET and a PUT, racing with other writers as the
// comment above says. It returns the policy as the server recorded it.
func setPolicyMerged(ctx context.Context, c *client.Client, queue string, patch []byte) (api.Policy, error) {
	current, err := c.Policy(ctx, queue)
	if err != nil {
		return api.Policy{}, err
	}
	stored, err := jsonObject(current)
	if err != nil {
		return api.Policy{}, err
	}
	secrets := storedPart(stored)
	var p any
	if err := decodeNumbers(patch, &p); err != nil {
		return api.Policy{}, fmt.Errorf("policy: %s", err)
	}
	refillBurst(stored, p)
	merged, _ := mergePatch(stored, p).(map[string]any)
	if _, ok := merged["push"].(map[string]any); ok {
		for _, k := range secrets {
			if !patchNamesPush(p, k) {
				return api.Policy{}, fmt.Errorf("%w (push.%s)", errSecretNotAnswered, k)
			}
		}
	}
	b, err := json.Marshal(merged)
	if err != nil {
		return api.Policy{}, err
	}
	var out api.Policy
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return api.Policy{}, fmt.Errorf("policy: the merged policy: %s", err)
	}
	return c.SetPolicy(ctx, queue, out)
}

// storedPart takes the keys of answerOnly out of a policy's GET answer
// m, in place, leaving the stored policy, and returns the keys of the
// secrets its push endpoint has ("secret", "next_secret").
func storedPart(m map[string]any) (secrets []string) {
	if push, ok := m["push"].(map[string]any); ok {
		for _, k := range []string{"secret", "next_secret"} {
			if push[k+"_set"] == true {
				secrets = append(secrets, k)
			}
		}
	}
	for obj, keys := range answerOnly {
		o := m
		if obj != "" {
			o, _ = m[obj].(map[string]any)
		}
		for _, k := range keys {
			delete(o, k)
		}
	}
	return secrets
}

// refillBurst drops the stored rate's burst when the patch p gives the
// rate a limit and no burst, and the stored burst is the one the server
// fills in for none (equal to the stored limit): the server then fills
// it in again from the new limit, as it did from the old. A burst set
// apart from the limit stays.
func refillBurst(stored map[string]any, p any) {
	pm, _ := p.(map[string]any)
	pr, _ := pm["rate"].(map[string]any)
	sr, _ := stored["rate"].(map[string]any)
	_, limit := pr["limit"]
	_, burst := pr["burst"]
	if limit && !burst && sr != nil && fmt.Sprint(sr["burst"]) == fmt.Sprint(sr["limit"]) {
		delete(sr, "burst")
	}
}

// patchNamesPush reports whether the patch p gives push.key, as a value
// or as null (dropping it).
func patchNamesPush(p any, key string) bool {
	m, _ := p.(map[string]any)
	push, _ := m["push"].(map[string]any)
	_, ok := push[key]
	return ok
}

// jsonObject returns v's JSON form as a map, numbers as json.Number.
func jsonObject(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := decodeNumbers(b, &m); err != nil {
		return nil, err
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// decodeNumbers decodes the JSON b into v keeping numbers as
// json.Number, so that a merge writes them back exactly as given.
func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// mergePatch returns target with patch applied as RFC 7396 section 2
// says: a patch that is not an object replaces target; an object's keys
// merge one by one, null removing a key. target's maps may be changed.
// Linear in the size of patch.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
		} else {
			t[k] = mergePatch(t[k], v)
		}
	}
	return t
}
