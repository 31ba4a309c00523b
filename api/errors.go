package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/hourglassdb/hourglass/internal/errcode"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// httpError is an error of the HTTP layer itself (body too large, media
// type, auth): it carries its status along with the MongoDB code.
type httpError struct {
	status int
	code   mongoerr.Code
	msg    string
	// primary, on a replica set follower's refusal of a write, is the
	// leader's HTTP address, sent in the Hourglass-Primary header.
	primary string
}

func (e *httpError) Error() string { return e.msg }

func newHTTPError(status int, code mongoerr.Code, format string, args ...any) *httpError {
	return &httpError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

// badRequest is a 400 BadValue naming the problem.
func badRequest(format string, args ...any) *httpError {
	return newHTTPError(http.StatusBadRequest, mongoerr.BadValue, format, args...)
}

// statusOf maps a MongoDB code to the HTTP status of API.md "Errors".
func statusOf(c mongoerr.Code) int {
	switch c {
	case mongoerr.NamespaceNotFound, mongoerr.IndexNotFound:
		return http.StatusNotFound
	case mongoerr.NamespaceExists, mongoerr.IndexOptionsConflict, mongoerr.IndexKeySpecsConflict, mongoerr.DuplicateKey:
		return http.StatusConflict
	case mongoerr.BSONObjectTooLarge:
		return http.StatusRequestEntityTooLarge
	case mongoerr.Unauthorized:
		return http.StatusForbidden
	case mongoerr.AuthenticationFailed:
		return http.StatusUnauthorized
	case mongoerr.ShutdownInProgress, mongoerr.QueryPlanKilled:
		return http.StatusServiceUnavailable
	case mongoerr.OutOfDiskSpace:
		return http.StatusInsufficientStorage
	case mongoerr.IngressRequestRateLimitExceeded:
		return http.StatusTooManyRequests
	case mongoerr.InternalError, mongoerr.DataCorruptionDetected:
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

// classify is the one place where errors become an HTTP status, a MongoDB
// code and a message: errors of the HTTP layer carry their own, the
// storage's are classed as the MongoDB wire protocol classes them
// (errcode.Of), and a client that went away gets 499 for the log. Errors
// that are not typed are internal faults: the client sees a generic
// message and the log gets the details. Corrupt data, found by any layer
// or by Pebble, is a 500 DataCorruptionDetected naming what was found, and
// is logged too.
func classify(err error) (status int, code mongoerr.Code, msg string, internal bool) {
	var he *httpError
	if !timeseries.IsCorrupt(err) && errors.As(err, &he) {
		return he.status, he.code, he.msg, false
	}
	c, known := errcode.Of(err)
	if !known && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The client went away; the status is for the log only.
		return 499, mongoerr.InternalError, "request canceled", false
	}
	return statusOf(c.Code), c.Code, c.Message, c.Internal
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
	err = s.replicaError(err)
	setPrimary(w, err)
	status, code, msg, internal := classify(err)
	if internal {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests || status == http.StatusInsufficientStorage {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, errorBody{Error: errorDetail{Code: int(code), CodeName: codeName(code), Message: msg}})
}

// codeName is code's name.
func codeName(code mongoerr.Code) string { return code.Name() }

// setPrimary names the leader's HTTP address in a header when err is a
// follower's refusal of a write.
func setPrimary(w http.ResponseWriter, err error) {
	var he *httpError
	if errors.As(err, &he) && he.primary != "" {
		w.Header().Set(primaryHeader, he.primary)
	}
}
