package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// put serves POST /v1/queues/{queue}/tasks: 201 with the task when it is
// new, 200 with the existing one (or its replacement) when the id exists,
// 200 with the finished record (api.FinishedRecord) when the queue's
// dedupe window answers the put (service.Dedupes).
func (s *Server) put(w http.ResponseWriter, r *http.Request, b service.Service) {
	p, err := decodePut(w, r, s.putBody)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	withTrace(&p, headerTrace(r.Header))
	req, err := putRequest(p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	queue := r.PathValue("queue")
	t, created, err := b.Put(r.Context(), queue, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if t.State == task.Done {
		writeJSON(w, http.StatusOK, toFinished(t))
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
		w.Header().Set("Location", "/v1/queues/"+url.PathEscape(t.Queue)+"/tasks/"+url.PathEscape(t.ID))
	}
	writeJSON(w, code, toTask(t, false))
}

// toFinished returns the record of t, the answer of a deduped put.
func toFinished(t task.Task) *api.FinishedRecord {
	return &api.FinishedRecord{ID: t.ID, JobID: t.JobID, Queue: t.Queue, State: api.StateFinished,
		Outcome: t.Outcome, Finished: utc(t.Finished), Attempts: t.Attempts, LastError: t.LastError}
}

// putBatch serves POST /v1/queues/{queue}/tasks:batch. The body as a
// whole must be JSON of the right shape; each item is then checked on its
// own, so that one bad item (an unknown field, a number for a duration,
// or whatever the broker refuses) answers an error in its place and the
// others are put, all in one commit.
func (s *Server) putBatch(w http.ResponseWriter, r *http.Request, b service.Service) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.batchBody))
	if err != nil {
		s.fail(w, r, decodeError(err, s.batchBody))
		return
	}
	// Most batches are well-formed throughout: one pass decodes them. When
	// that pass fails, a second one finds which items are bad, so that
	// each answers its own error and the others are put.
	var items []api.PutRequest
	var itemErrs []error
	var whole api.BatchRequest
	if plain, ok := parsePuts(data); ok {
		items = plain // the plain form, read by hand: putsjson.go
	} else if decodeFrom(bytes.NewReader(data), s.batchBody, &whole, false) == nil {
		items = whole.Tasks
	} else {
		var body struct {
			Tasks []json.RawMessage `json:"tasks"`
		}
		if err := decodeFrom(bytes.NewReader(data), s.batchBody, &body, false); err != nil {
			s.fail(w, r, err)
			return
		}
		items = make([]api.PutRequest, len(body.Tasks))
		itemErrs = make([]error, len(body.Tasks))
		for i, raw := range body.Tasks {
			itemErrs[i] = decodeStrict(raw, &items[i])
		}
	}
	if len(items) > api.MaxBatch {
		s.fail(w, r, badRequest("%d tasks in one batch, over the limit of %d", len(items), api.MaxBatch))
		return
	}
	if err := service.CheckQueue(r.PathValue("queue")); err != nil {
		s.fail(w, r, err) // as a single put answers: the batch as a whole is bad
		return
	}
	results := make([]api.BatchResult, len(items))
	reqs := make([]task.PutRequest, 0, len(items))
	trace := headerTrace(r.Header)
	at := make([]int, 0, len(items)) // at[i]: the item reqs[i] came from
	for i, p := range items {
		var err error
		if itemErrs != nil {
			err = itemErrs[i]
		}
		var req task.PutRequest
		if err == nil {
			withTrace(&p, trace)
			req, err = putRequest(p)
		}
		if err != nil {
			results[i].Status, results[i].Error = status(err), message(err)
			continue
		}
		reqs = append(reqs, req)
		at = append(at, i)
	}
	if len(reqs) > 0 {
		out := b.PutBatch(r.Context(), r.PathValue("queue"), reqs)
		if len(out) != len(reqs) {
			s.fail(w, r, errBatchAnswer)
			return
		}
		for j, res := range out {
			r := &results[at[j]]
			switch {
			case res.Err != nil:
				r.Status, r.Error = status(res.Err), message(res.Err)
			case res.Task.State == task.Done:
				r.Status, r.Finished = http.StatusOK, toFinished(res.Task)
			default:
				t := toTask(res.Task, false)
				r.Task, r.Status = &t, http.StatusOK
				if res.Created {
					r.Status = http.StatusCreated
				}
			}
		}
	}
	writeJSON(w, http.StatusOK, api.BatchResponse{Results: results})
}

// errBatchAnswer is the 500 for a broker that answered a batch with the
// wrong number of results.
var errBatchAnswer = &wireError{http.StatusInternalServerError, "hourglass: the broker answered a batch with the wrong number of results"}

// get serves GET /v1/queues/{queue}/tasks/{id}: the task without its
// lease; a task no longer live whose record the history keeps, its
// finished record (api.FinishedRecord); else 404.
func (s *Server) get(w http.ResponseWriter, r *http.Request, b service.Service) {
	t, f, err := service.GetOrFinished(r.Context(), b, r.PathValue("queue"), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if f != nil {
		writeJSON(w, http.StatusOK, api.FinishedRecord{ID: f.ID, JobID: f.JobID, Queue: f.Queue, State: api.StateFinished,
			Outcome: f.Outcome, Finished: utc(f.Finished), Attempts: f.Attempts, LastError: f.LastError})
		return
	}
	writeJSON(w, http.StatusOK, toTask(t, false))
}

// delete serves DELETE /v1/queues/{queue}/tasks/{id}: 204, or 404.
func (s *Server) delete(w http.ResponseWriter, r *http.Request, b service.Service) {
	if err := b.Delete(r.Context(), r.PathValue("queue"), r.PathValue("id")); err != nil {
		s.fail(w, r, err)
		return
	}
	writeEmpty(w, http.StatusNoContent)
}

// headerTrace returns the trace context of a put request's headers
// (api.TraceparentHeader): its traceparent, none when the header is
// repeated (W3C: a receiver ignores it), and its tracestate headers
// joined with commas as one list. It is checked with the put
// (service.CheckPut drops a malformed one).
func headerTrace(h http.Header) task.Trace {
	parents := h.Values(api.TraceparentHeader)
	if len(parents) != 1 {
		return task.Trace{}
	}
	return task.Trace{Parent: parents[0], State: strings.Join(h.Values(api.TracestateHeader), ",")}
}

// withTrace gives p the trace context tr, the request's, unless p has
// its own traceparent.
func withTrace(p *api.PutRequest, tr task.Trace) {
	if p.Traceparent == "" {
		p.Traceparent, p.Tracestate = tr.Parent, tr.State
	}
}
