package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// httpError is an error of the HTTP layer itself (body too large, media
// type, auth): it carries its status along with the MongoDB code.
type httpError struct {
	status int
	code   mongoerr.Code
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func newHTTPError(status int, code mongoerr.Code, format string, args ...any) *httpError {
	return &httpError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

// badRequest is a 400 BadValue naming the problem.
func badRequest(format string, args ...any) *httpError {
	return newHTTPError(http.StatusBadRequest, mongoerr.BadValue, format, args...)
}

// classify is where errors become what the API answers: errors of the
// HTTP layer carry their own status and code, every other error is
// classed by the command layer's one table (command.Service.Classify), as
// the other doors class it.
func (s *Server) classify(err error) command.Class {
	var he *httpError
	if !timeseries.IsCorrupt(err) && errors.As(err, &he) {
		c := command.Class{Code: he.code, CodeName: he.code.Name(), Message: he.msg, HTTPStatus: he.status}
		switch he.status {
		case http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusInsufficientStorage:
			c.Retry = true
		}
		return c
	}
	return s.cmd.Classify(err, command.HTTP)
}

// errorBody is the JSON error shape of API.md.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code     int    `json:"code"`
	CodeName string `json:"codeName"`
	Message  string `json:"message"`
}

// writeError replies with err in the API's error shape.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	c := s.classify(err)
	if c.Internal {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	setHeaders(w, c)
	writeJSON(w, c.HTTPStatus, errorBody{Error: errorDetail{Code: int(c.Code), CodeName: c.CodeName, Message: c.Message}})
}

// setHeaders sets what an error answer says beside its body: Retry-After
// when the client should retry, and on a follower's refusal the leader's
// HTTP address.
func setHeaders(w http.ResponseWriter, c command.Class) {
	if c.Retry {
		w.Header().Set("Retry-After", "1")
	}
	if c.Primary != "" {
		w.Header().Set(primaryHeader, c.Primary)
	}
}
