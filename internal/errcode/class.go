// Package errcode tells what a client is told of an error of the storage
// layer: its MongoDB code and message, and whether it is an internal fault
// whose details belong in the server's log only. The HTTP API and the
// MongoDB wire protocol answer the same error with the same code this way;
// each adds what only its protocol knows (the HTTP status, errors of the
// HTTP layer itself, a client that went away).
package errcode

import (
	"errors"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// InternalMessage is what a client is told of an internal fault.
const InternalMessage = "internal error; see the server log"

// Class is what a client is told of an error.
type Class struct {
	Code    mongoerr.Code
	Message string
	// Internal is set for faults the client can do nothing about: the
	// caller logs the error itself. Corrupt data is one, with its
	// message shown as well.
	Internal bool
}

// Of classifies err. Corrupt data found by any layer (timeseries.IsCorrupt)
// is DataCorruptionDetected with its message, internal; a *mongoerr.Error
// anywhere in the chain is its code and message, internal when the code is
// InternalError; timeseries.ErrClosed is ShutdownInProgress. Any other
// error is not known (known false) and is classed as an internal error
// with InternalMessage, which the caller may refine first.
func Of(err error) (c Class, known bool) {
	var me *mongoerr.Error
	switch {
	case timeseries.IsCorrupt(err):
		return Class{mongoerr.DataCorruptionDetected, err.Error(), true}, true
	case errors.As(err, &me):
		return Class{me.Code, me.Message, me.Code == mongoerr.InternalError}, true
	case errors.Is(err, timeseries.ErrClosed):
		return Class{mongoerr.ShutdownInProgress, "the server is shutting down", false}, true
	}
	return Class{mongoerr.InternalError, InternalMessage, true}, false
}
