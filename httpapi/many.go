package httpapi

import (
	"context"
	"net/http"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// The calls on several queues or tasks at once: a reserve from many
// queues, and many acks in one request.

// reserveQueues serves POST /v1/reserve: up to max ready tasks from any
// of the queues, in delivery order across them, each with its queue and
// lease; the same long-poll as the per-queue reserve.
func (s *Server) reserveQueues(w http.ResponseWriter, r *http.Request, b service.Service) {
	var req api.ReserveQueuesRequest
	if err := decode(w, r, smallBody, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	if len(req.Queues) == 0 || len(req.Queues) > api.MaxReserveQueues {
		s.fail(w, r, badRequest("queues: 1 to %d queue names", api.MaxReserveQueues))
		return
	}
	n, wait, err := reserveLimits(req.Max, req.Wait)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.answerReserve(w, r, func(ctx context.Context) ([]task.Task, error) {
		return b.ReserveQueues(ctx, req.Queues, n, wait)
	})
}

// acksBody bounds the body of POST /v1/acks: api.MaxAcks acks of a
// queue name and an id of up to task.MaxNameLen bytes and a lease, with
// JSON around them.
const acksBody = api.MaxAcks * (2*task.MaxNameLen + 128)

// acks serves POST /v1/acks: each ack answered alone, in order, once
// every one is durable or refused. A malformed body or a count out of
// range is 400 and acks nothing.
func (s *Server) acks(w http.ResponseWriter, r *http.Request, b service.Service) {
	req, err := decodeAcks(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(req.Acks) == 0 || len(req.Acks) > api.MaxAcks {
		s.fail(w, r, badRequest("acks: 1 to %d", api.MaxAcks))
		return
	}
	acks := make([]task.Ack, len(req.Acks))
	for i, a := range req.Acks {
		acks[i] = task.Ack{Queue: a.Queue, ID: a.ID, Lease: a.Lease}
	}
	errs, err := b.AckMany(r.Context(), acks)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.AcksResponse{Results: make([]api.AckResult, len(errs))}
	for i, err := range errs {
		if err != nil {
			out.Results[i].Error = message(err)
		}
	}
	writeJSON(w, http.StatusOK, out)
}
