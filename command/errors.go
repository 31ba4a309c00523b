package command

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/replset"
	"github.com/hourglassdb/hourglass/timeseries"
)

// Door is a front door of the server: its errors name addresses and
// databases the way its clients know them.
type Door int

// The front doors.
const (
	HTTP Door = iota
	MongoDB
	Prometheus
)

// InternalMessage is what a client is told of an internal fault, whose
// details go to the server's log.
const InternalMessage = "internal error; see the server log"

// Class is what a client is told of an error, in every door's terms: one
// table (Classify) maps an error to its MongoDB code and name, its HTTP
// status and the Prometheus API's errorType.
type Class struct {
	Code     mongoerr.Code
	CodeName string
	Message  string
	// HTTPStatus is the status of the HTTP API (API.md "Errors").
	HTTPStatus int
	// ErrorType is the Prometheus HTTP API's errorType: bad_data,
	// not_found, execution, timeout, canceled, unavailable, internal.
	ErrorType string
	// Internal is set for faults the client can do nothing about: the
	// door logs the error itself (corrupt data too, whose message the
	// client is shown).
	Internal bool
	// Retry is set when the client should retry later (HTTP: Retry-After).
	Retry bool
	// Primary is, on a follower's refusal of a write, the leader's
	// address at this door ("" when unknown).
	Primary string
}

// statusOf is the HTTP status and Prometheus errorType of a MongoDB code.
func statusOf(c mongoerr.Code) (int, string) {
	switch c {
	case mongoerr.NamespaceNotFound, mongoerr.IndexNotFound:
		return http.StatusNotFound, "not_found"
	case mongoerr.NamespaceExists, mongoerr.IndexOptionsConflict, mongoerr.IndexKeySpecsConflict, mongoerr.DuplicateKey:
		return http.StatusConflict, "bad_data"
	case mongoerr.BSONObjectTooLarge:
		return http.StatusRequestEntityTooLarge, "bad_data"
	case mongoerr.Unauthorized:
		return http.StatusForbidden, "bad_data"
	case mongoerr.AuthenticationFailed:
		return http.StatusUnauthorized, "bad_data"
	case mongoerr.ShutdownInProgress, mongoerr.QueryPlanKilled, mongoerr.InterruptedDueToReplStateChange:
		return http.StatusServiceUnavailable, "unavailable"
	case mongoerr.OutOfDiskSpace:
		return http.StatusInsufficientStorage, "unavailable"
	case mongoerr.IngressRequestRateLimitExceeded:
		return http.StatusTooManyRequests, "unavailable"
	case mongoerr.InternalError, mongoerr.DataCorruptionDetected:
		return http.StatusInternalServerError, "internal"
	case mongoerr.MaxTimeMSExpired:
		// A wait of the server's ran out: the read may succeed later.
		return http.StatusServiceUnavailable, "timeout"
	case mongoerr.QueryExceededMemoryLimit, mongoerr.ExceededMemoryLimit:
		return http.StatusBadRequest, "execution"
	case mongoerr.NotWritablePrimary, mongoerr.NotPrimaryNoSecondaryOk:
		return http.StatusMisdirectedRequest, "unavailable"
	}
	return http.StatusBadRequest, "bad_data"
}

// Classify is the one table from errors to what clients are told, at
// door. Corrupt data found by any layer (timeseries.IsCorrupt) is
// DataCorruptionDetected with its message, internal; a *mongoerr.Error
// anywhere in the chain is its code and message (internal when the code
// is InternalError); the engine closing is ShutdownInProgress; a client
// that went away is 499 "request canceled" for the log; the replica set's
// own errors (not the leader, leadership lost, not committed in time,
// halted) are MongoDB's codes for them. Any other error is an internal
// fault: InternalMessage. Service.Classify adds what only a replica set
// member knows: the primary's address at the door.
func Classify(err error, door Door) Class {
	var c Class
	var me *mongoerr.Error
	var nl *replset.NotLeaderError
	var it *ingestTimeout
	switch {
	case timeseries.IsCorrupt(err):
		c = Class{Code: mongoerr.DataCorruptionDetected, Message: err.Error(), Internal: true}
	case errors.As(err, &nl):
		c = Class{Code: mongoerr.NotWritablePrimary, Message: nl.Error()}
		if nl.LeaderID == "" {
			c.HTTPStatus, c.ErrorType = http.StatusServiceUnavailable, "unavailable"
		}
	case errors.As(err, &it):
		// Refused after a wait: the server is overloaded, not the client.
		c = Class{Code: it.err.Code, Message: it.err.Message, HTTPStatus: http.StatusServiceUnavailable, ErrorType: "unavailable"}
	case errors.As(err, &me):
		c = Class{Code: me.Code, Message: me.Message, Internal: me.Code == mongoerr.InternalError}
	case errors.Is(err, timeseries.ErrClosed):
		c = Class{Code: mongoerr.ShutdownInProgress, Message: "the server is shutting down"}
	case errors.Is(err, replset.ErrLeadershipLost):
		c = Class{Code: mongoerr.InterruptedDueToReplStateChange,
			Message: err.Error() + ": the set is electing a primary; retry (a retry may apply it twice)"}
	case errors.Is(err, replset.ErrTimeout):
		c = Class{Code: mongoerr.InternalError, Message: err.Error() + " (it may still be applied: a retry may apply it twice)",
			HTTPStatus: http.StatusServiceUnavailable, ErrorType: "unavailable"}
	case errors.Is(err, replset.ErrHalted), errors.Is(err, replset.ErrClosed):
		c = Class{Code: mongoerr.ShutdownInProgress, Message: err.Error()}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The client went away; the status is for the log only.
		c = Class{Code: mongoerr.InternalError, Message: "request canceled", HTTPStatus: 499, ErrorType: "canceled"}
	default:
		c = Class{Code: mongoerr.InternalError, Message: InternalMessage, Internal: true}
	}
	return finish(c)
}

// finish fills in what follows from the code: the HTTP status and
// errorType unless set, Retry, the code's name.
func finish(c Class) Class {
	if c.HTTPStatus == 0 {
		c.HTTPStatus, c.ErrorType = statusOf(c.Code)
	}
	switch c.HTTPStatus {
	case http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusInsufficientStorage:
		c.Retry = true
	}
	c.CodeName = c.Code.Name()
	return c
}

// Classify is the package's Classify with the primary named at door's
// address on a follower's refusals, and a secondary's refusal of a read
// worded for door.
func (s *Service) Classify(err error, door Door) Class {
	var nl *replset.NotLeaderError
	var sr *secondaryReadError
	switch {
	case timeseries.IsCorrupt(err) || s.opts.Node == nil:
	case errors.As(err, &nl):
		return finish(s.notPrimary(nl, door))
	case errors.As(err, &sr):
		return finish(s.secondaryRead(sr, door))
	}
	return Classify(err, door)
}

// notPrimary is a follower's refusal of a write: the leader named at the
// door's address, or 503 while no leader is known.
func (s *Service) notPrimary(nl *replset.NotLeaderError, door Door) Class {
	c := Class{Code: mongoerr.NotWritablePrimary}
	node := s.opts.Node
	if node == nil {
		c.Message = nl.Error()
		return c
	}
	set := s.opts.SetName
	if nl.LeaderID == "" {
		c.HTTPStatus, c.ErrorType = http.StatusServiceUnavailable, "unavailable"
		switch door {
		case MongoDB:
			c.Message = fmt.Sprintf("not primary: replica set %s has no primary now (an election may be running); retry", set)
		default:
			c.Message = fmt.Sprintf("member %s of replica set %s is not the primary and knows none (an election may be running); retry", node.ID(), set)
		}
		return c
	}
	addrs := node.MemberAddrs(nl.LeaderID)
	switch door {
	case MongoDB:
		c.Primary = addrs.Mongo
		if c.Primary == "" {
			c.Message = fmt.Sprintf("not primary: replica set %s has no primary now (an election may be running); retry", set)
			break
		}
		c.Message = fmt.Sprintf("not primary: the primary of replica set %s is %s", set, c.Primary)
	default:
		c.Primary = addrs.HTTP
		if c.Primary == "" {
			c.Message = fmt.Sprintf("member %s of replica set %s is not the primary; the primary is %s (raft %s), whose HTTP address this member does not know",
				node.ID(), set, nl.LeaderID, nl.Leader)
			break
		}
		c.Message = fmt.Sprintf("member %s of replica set %s is not the primary; write to the primary %s at %s", node.ID(), set, nl.LeaderID, c.Primary)
	}
	return c
}
