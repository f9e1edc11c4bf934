package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// reserve serves POST /v1/queues/{queue}/reserve: up to max ready tasks
// with their leases, waiting up to wait for the first. The wait ends
// early when the client goes away (the request's context) or the server
// drains; a drained wait answers what it has, usually nothing.
func (s *Server) reserve(w http.ResponseWriter, r *http.Request, b service.Service) {
	var req api.ReserveRequest
	if err := decode(w, r, smallBody, &req, true); err != nil {
		s.fail(w, r, err)
		return
	}
	n, wait, err := reserveLimits(req.Max, req.Wait)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.answerReserve(w, r, func(ctx context.Context) ([]task.Task, error) {
		return b.Reserve(ctx, r.PathValue("queue"), n, wait)
	})
}

// reserveLimits reads a reserve's max (nil: 1) and wait (nil: 0),
// refusing them out of range.
func reserveLimits(max *int, wait *api.Duration) (int, time.Duration, error) {
	n, d := 1, time.Duration(0)
	if max != nil {
		n = *max
		if n < 1 || n > api.MaxReserve {
			return 0, 0, badRequest("max %d out of range 1..%d", n, api.MaxReserve)
		}
	}
	if wait != nil {
		d = wait.D()
		if d < 0 || d > api.MaxWait {
			return 0, 0, badRequest("wait %s out of range 0s..%s", d, api.MaxWait)
		}
	}
	return n, d, nil
}

// answerReserve runs a reserve under the request's context, cut short by
// Drain, and answers its tasks with their leases.
func (s *Server) answerReserve(w http.ResponseWriter, r *http.Request, reserve func(context.Context) ([]task.Task, error)) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.drain, cancel)()

	tasks, err := reserve(ctx)
	if err != nil && !(gone(err) && ctx.Err() != nil) {
		s.fail(w, r, err)
		return
	}
	if r.Context().Err() != nil {
		// The client went away: nobody reads an answer. Tasks the broker
		// handed out regardless come back when their leases expire.
		return
	}
	writeTasks(w, tasks)
}

// lease decodes the body of ack and touch, whose lease is required.
func lease(w http.ResponseWriter, r *http.Request) (string, error) {
	var req api.LeaseRequest
	if err := decode(w, r, smallBody, &req, false); err != nil {
		return "", err
	}
	if req.Lease == "" {
		return "", errNoLease
	}
	return req.Lease, nil
}

// errNoLease is the 400 for an ack, touch, nack, release or bury without
// a lease.
var errNoLease = badRequest("lease missing")

// ack serves POST /v1/queues/{queue}/tasks/{id}/ack: 204 and the task is
// gone.
func (s *Server) ack(w http.ResponseWriter, r *http.Request, b service.Service) {
	l, err := lease(w, r)
	if err == nil {
		err = b.Ack(r.Context(), r.PathValue("queue"), r.PathValue("id"), l)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeEmpty(w, http.StatusNoContent)
}

// touch serves POST /v1/queues/{queue}/tasks/{id}/touch: 200 with the
// task, whose lease now lasts another ttr.
func (s *Server) touch(w http.ResponseWriter, r *http.Request, b service.Service) {
	l, err := lease(w, r)
	var t task.Task
	if err == nil {
		t, err = b.Touch(r.Context(), r.PathValue("queue"), r.PathValue("id"), l)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toTask(t, true))
}

// nack serves POST /v1/queues/{queue}/tasks/{id}/nack: 200 with the task
// as it is after: delayed by the body's delay (or as the queue's retry
// policy says without one), dead when its attempts are used up, or in
// the queue's dead-letter queue; the body's error is kept as its last
// error, cut to api.MaxError bytes.
func (s *Server) nack(w http.ResponseWriter, r *http.Request, b service.Service) {
	var req api.NackRequest
	err := decode(w, r, smallBody, &req, false)
	if err == nil && req.Lease == "" {
		err = errNoLease
	}
	var t task.Task
	if err == nil {
		delay := task.RetryDelay
		if req.Delay != nil {
			delay, err = leaseDelay(req.Delay)
		}
		if err == nil {
			t, err = b.Nack(r.Context(), r.PathValue("queue"), r.PathValue("id"), req.Lease, delay, service.CutError(req.Error))
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toTask(t, false))
}

// leaseDelay reads the delay of a nack or release: a negative one is
// refused here, where an absent one and task.RetryDelay (-1ns) are still
// told apart.
func leaseDelay(d *api.Duration) (time.Duration, error) {
	if d.D() < 0 {
		return 0, badRequest("delay %s: give 0s or more", d.D())
	}
	return d.D(), nil
}

// release serves POST /v1/queues/{queue}/tasks/{id}/release: 200 with
// the task, ready again after the body's delay (at once without one),
// its attempt not counted.
func (s *Server) release(w http.ResponseWriter, r *http.Request, b service.Service) {
	var req api.ReleaseRequest
	err := decode(w, r, smallBody, &req, false)
	if err == nil && req.Lease == "" {
		err = errNoLease
	}
	var t task.Task
	if err == nil {
		var delay time.Duration
		if req.Delay != nil {
			delay, err = leaseDelay(req.Delay)
		}
		if err == nil {
			t, err = b.Release(r.Context(), r.PathValue("queue"), r.PathValue("id"), req.Lease, delay)
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toTask(t, false))
}

// bury serves POST /v1/queues/{queue}/tasks/{id}/bury: 200 with the task,
// dead at once whatever attempts are left (or in the queue's dead-letter
// queue), the body's error kept as its last error, cut to api.MaxError
// bytes.
func (s *Server) bury(w http.ResponseWriter, r *http.Request, b service.Service) {
	var req api.BuryRequest
	err := decode(w, r, smallBody, &req, false)
	if err == nil && req.Lease == "" {
		err = errNoLease
	}
	var t task.Task
	if err == nil {
		t, err = b.Bury(r.Context(), r.PathValue("queue"), r.PathValue("id"), req.Lease, service.CutError(req.Error))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toTask(t, false))
}

// kick serves POST /v1/queues/{queue}/tasks/{id}/kick: 204 and the dead
// task is ready again; 409 if it is not dead. The body, if any, must be
// an empty object.
func (s *Server) kick(w http.ResponseWriter, r *http.Request, b service.Service) {
	var req struct{}
	err := decode(w, r, smallBody, &req, true)
	if err == nil {
		err = b.Kick(r.Context(), r.PathValue("queue"), r.PathValue("id"))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeEmpty(w, http.StatusNoContent)
}

// cancel serves POST /v1/queues/{queue}/tasks/{id}/cancel: 204 and the
// task is deleted, in any state, recorded cancelled; a reserved task's
// holder is told to stop (service.Cancel); 404 if there is no such task,
// a second cancel of it included. The body, if any, must be an empty
// object.
func (s *Server) cancel(w http.ResponseWriter, r *http.Request, b service.Service) {
	var req struct{}
	err := decode(w, r, smallBody, &req, true)
	if err == nil {
		err = b.Cancel(r.Context(), r.PathValue("queue"), r.PathValue("id"))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeEmpty(w, http.StatusNoContent)
}

// cancelledLeases serves POST /v1/leases:cancelled: which of the leases
// named (1 to api.MaxAcks) were ended by a delete or a cancel of their
// tasks, lately (service.CancelledLeases). It reads memory only: what a
// worker asks about once a second while it holds tasks.
func (s *Server) cancelledLeases(w http.ResponseWriter, r *http.Request, b service.Service) {
	var req api.LeasesRequest
	err := decode(w, r, acksBody, &req, false)
	var ended []string
	if err == nil {
		ended, err = b.CancelledLeases(req.Leases)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if ended == nil {
		ended = []string{}
	}
	writeJSON(w, http.StatusOK, api.LeasesResponse{Cancelled: ended})
}
