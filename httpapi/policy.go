package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// The routes of a queue's policy and pause: PUT, PATCH, GET and DELETE
// /v1/queues/{queue}/policy, POST /v1/queues/{queue}/pause and resume.
// What a policy means, and every bound on its fields, is the service's
// (service/policy.go); here only the wire: api.Policy ↔ task.Policy, and
// a pause's "for" (absent: until resumed).

// setPolicy serves PUT /v1/queues/{queue}/policy: 200 with the policy as
// recorded (a rate's burst filled in); a bad field is 400 naming it, and
// nothing changes.
func (s *Server) setPolicy(w http.ResponseWriter, r *http.Request, b service.Service) {
	s.setPolicyFrom(w, r, b, r.PathValue("queue"), http.MaxBytesReader(w, r.Body, smallBody))
}

// setPolicyFrom sets queue's policy to the one body holds, answering as
// setPolicy says: the end of a PUT, and of a PATCH once merged.
func (s *Server) setPolicyFrom(w http.ResponseWriter, r *http.Request, b service.Service, queue string, body io.Reader) {
	var req api.Policy
	var raw bytes.Buffer
	err := decodeFrom(io.TeeReader(body, &raw), smallBody, &req, false)
	if err == nil {
		if e := api.CheckPolicyBody(req, raw.Bytes()); e != nil {
			err = &wireError{http.StatusBadRequest, e.Error()}
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p := fromAPIPolicy(req)
	if err := s.checkPush(req.Push, p.Push); err != nil {
		s.fail(w, r, err)
		return
	}
	p, err = b.SetPolicy(r.Context(), queue, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, withEffective(p, b))
}

// patchPolicy serves PATCH /v1/queues/{queue}/policy: the body is a JSON
// merge patch (RFC 7396, api/merge.go) on the queue's stored policy, the
// push endpoint's secrets included, so that a patch that does not name
// them keeps them. It answers 200 with the policy as recorded, as PUT
// does; a body that is not an object, writes an answer-only key, or
// merges into a policy PUT would refuse is 400 naming what is wrong, and
// nothing changes. Patches on one server are serialized (patchMu); two
// nodes of a cluster patching one queue at once may lose one of the two
// changes, as two PUTs do.
func (s *Server) patchPolicy(w http.ResponseWriter, r *http.Request, b service.Service) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, smallBody))
	if err != nil {
		s.fail(w, r, &wireError{http.StatusRequestEntityTooLarge, fmt.Sprintf("hourglass: policy: a merge patch is at most %d bytes", smallBody)})
		return
	}
	patch, err := api.CheckPolicyPatch(body)
	if err != nil {
		s.fail(w, r, &wireError{http.StatusBadRequest, err.Error()})
		return
	}
	queue := r.PathValue("queue")
	s.patchMu.Lock()
	defer s.patchMu.Unlock()
	cur, err := b.Policy(r.Context(), queue)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	stored := toAPIPolicy(cur)
	if cur.Push != nil {
		stored.Push.Secret, stored.Push.SecretSet = cur.Push.Secret, false
		stored.Push.NextSecret, stored.Push.NextSecretSet = cur.Push.NextSecret, false
	}
	raw, _ := json.Marshal(stored)
	var target map[string]any
	if err := api.DecodeNumbers(raw, &target); err != nil || target == nil {
		target = map[string]any{}
	}
	api.RefillBurst(target, patch)
	merged, _ := json.Marshal(api.MergePatch(target, patch))
	s.setPolicyFrom(w, r, b, queue, bytes.NewReader(merged))
}

// policy serves GET /v1/queues/{queue}/policy: 200 with the queue's
// policy, {"effective": ...} when it has none.
func (s *Server) policy(w http.ResponseWriter, r *http.Request, b service.Service) {
	p, err := b.Policy(r.Context(), r.PathValue("queue"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, withEffective(p, b))
}

// withEffective returns p's wire form with "effective": the values b
// applies of the fields that have defaults, retry, max_attempts and ttr
// (service.Effective, b's default ttr).
func withEffective(p task.Policy, b service.Service) api.Policy {
	a := toAPIPolicy(p)
	e := toAPIPolicy(service.Effective(p, b.Limits().DefaultTTR))
	a.Effective = &api.Policy{Retry: e.Retry, MaxAttempts: e.MaxAttempts, TTR: e.TTR}
	return a
}

// deletePolicy serves DELETE /v1/queues/{queue}/policy: 204, and the
// queue's policy is the default again.
func (s *Server) deletePolicy(w http.ResponseWriter, r *http.Request, b service.Service) {
	if err := b.DeletePolicy(r.Context(), r.PathValue("queue")); err != nil {
		s.fail(w, r, err)
		return
	}
	writeEmpty(w, http.StatusNoContent)
}

// pause serves POST /v1/queues/{queue}/pause: 204, and the queue hands
// out nothing for the body's "for" (absent, or no body: until resumed).
// A "for" of 0s or less is 400 (resume says that), one over the server's
// max delay too (the service's check).
func (s *Server) pause(w http.ResponseWriter, r *http.Request, b service.Service) {
	var req api.PauseRequest
	err := decode(w, r, smallBody, &req, true)
	d := task.PauseIndefinitely
	if err == nil && req.For != nil {
		if d = req.For.D(); d <= 0 {
			err = badRequest("for %s: give more than 0s, or leave it out to pause until resumed", d)
		}
	}
	if err == nil {
		err = b.PauseQueue(r.Context(), r.PathValue("queue"), d)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeEmpty(w, http.StatusNoContent)
}

// resume serves POST /v1/queues/{queue}/resume: 204, and the queue hands
// out tasks again (a pause of 0). The body, if any, must be an empty
// object.
func (s *Server) resume(w http.ResponseWriter, r *http.Request, b service.Service) {
	var req struct{}
	err := decode(w, r, smallBody, &req, true)
	if err == nil {
		err = b.PauseQueue(r.Context(), r.PathValue("queue"), 0)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeEmpty(w, http.StatusNoContent)
}

// fromAPIPolicy turns a policy's wire form into the service's, as it is:
// the service checks it (service.CheckPolicy). "effective" is ignored.
func fromAPIPolicy(a api.Policy) task.Policy {
	p := task.Policy{
		MaxAttempts: a.MaxAttempts,
		Concurrency: a.Concurrency,
		DeadLetter:  a.DeadLetter,
	}
	if a.Retry != nil {
		p.Retry = &task.Retry{
			Initial:    a.Retry.Initial.D(),
			Max:        a.Retry.Max.D(),
			Multiplier: a.Retry.Multiplier,
			Jitter:     a.Retry.Jitter,
		}
	}
	if a.TTR != nil {
		p.TTR = a.TTR.D()
	}
	if a.Dedupe != nil {
		p.Dedupe = a.Dedupe.D()
	}
	if a.Rate != nil {
		p.Rate = &task.Rate{Limit: a.Rate.Limit, Per: a.Rate.Per.D(), Burst: a.Rate.Burst}
	}
	if k := a.PerKey; k != nil {
		p.PerKey = &task.PerKey{Concurrency: k.Concurrency}
		if k.Rate != nil {
			p.PerKey.Rate = &task.Rate{Limit: k.Rate.Limit, Per: k.Rate.Per.D(), Burst: k.Rate.Burst}
		}
	}
	if a.Push != nil {
		p.Push = &task.Push{URL: a.Push.URL, Headers: maps.Clone(a.Push.Headers), Secret: a.Push.Secret, NextSecret: a.Push.NextSecret}
		if a.Push.Timeout != nil {
			p.Push.Timeout = a.Push.Timeout.D()
		}
	}
	return p
}

// checkPush refuses what only the wire can get wrong in a policy's push
// endpoint a (its service form p): "secret_set" without the secret, or
// "next_secret_set" without the next secret, as a policy read and written
// back has (it would lose its signing); and a
// URL naming a host the server may not push to
// (Options.CheckPushTarget). The service checks the rest.
func (s *Server) checkPush(a *api.Push, p *task.Push) error {
	if a == nil {
		return nil
	}
	if a.SecretSet && a.Secret == "" {
		return badRequest("policy: push.secret_set is answered, not written: give push.secret (a policy replaces the one before whole)")
	}
	if a.NextSecretSet && a.NextSecret == "" {
		return badRequest("policy: push.next_secret_set is answered, not written: give push.next_secret (a policy replaces the one before whole)")
	}
	if s.checkPushTarget != nil {
		if err := s.checkPushTarget(p.URL); err != nil {
			return err
		}
	}
	return nil
}

// toAPIPolicy turns the service's policy into its wire form: fields at
// their defaults are left out, so that the zero Policy is {}; a push
// endpoint's secrets never leave the server ("secret_set": true,
// "next_secret_set": true).
func toAPIPolicy(p task.Policy) api.Policy {
	a := api.Policy{
		MaxAttempts: p.MaxAttempts,
		Concurrency: p.Concurrency,
		DeadLetter:  p.DeadLetter,
	}
	if p.Retry != nil {
		a.Retry = &api.Retry{
			Initial:    api.Duration(p.Retry.Initial),
			Max:        api.Duration(p.Retry.Max),
			Multiplier: p.Retry.Multiplier,
			Jitter:     p.Retry.Jitter,
		}
	}
	if p.TTR != 0 {
		d := api.Duration(p.TTR)
		a.TTR = &d
	}
	if p.Dedupe != 0 {
		d := api.Duration(p.Dedupe)
		a.Dedupe = &d
	}
	if p.Rate != nil {
		a.Rate = &api.Rate{Limit: p.Rate.Limit, Per: api.Duration(p.Rate.Per), Burst: p.Rate.Burst}
	}
	if k := p.PerKey; k != nil {
		a.PerKey = &api.PerKey{Concurrency: k.Concurrency}
		if k.Rate != nil {
			a.PerKey.Rate = &api.Rate{Limit: k.Rate.Limit, Per: api.Duration(k.Rate.Per), Burst: k.Rate.Burst}
		}
	}
	if p.Push != nil {
		a.Push = &api.Push{URL: p.Push.URL, Headers: maps.Clone(p.Push.Headers), SecretSet: p.Push.Secret != "",
			NextSecretSet: p.Push.NextSecret != ""}
		if p.Push.Timeout != 0 {
			d := api.Duration(p.Push.Timeout)
			a.Push.Timeout = &d
		}
	}
	return a
}

// toQueue turns a queue's counts, pause and policy into its wire form:
// paused while its pause ends after now, with paused_until unless it lasts
// until resumed, and its policy unless it has none.
func toQueue(q task.QueueStats, now time.Time) api.Queue {
	a := api.Queue{Name: q.Name, Delayed: q.Delayed, Ready: q.Ready, Reserved: q.Reserved, Dead: q.Dead}
	if !q.PausedUntil.IsZero() && q.PausedUntil.After(now) {
		a.Paused = true
		if !q.PausedUntil.Equal(task.PausedForever) {
			until := q.PausedUntil.UTC()
			a.PausedUntil = &until
		}
	}
	if !q.Policy.IsZero() {
		p := toAPIPolicy(q.Policy)
		a.Policy = &p
	}
	return a
}
