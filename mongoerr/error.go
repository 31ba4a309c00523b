// Package mongoerr defines the typed error every validation failure in
// Hourglass carries: a MongoDB error code, its codeName, and a message that
// names the field and the rule that was broken.
//
// The api package maps an *Error to an HTTP status in one place; the packages
// below it (timeseries, ttl, partialfilter) only build them. Corrupt data,
// whichever layer finds it, wraps ErrCorrupt. The package is
// pure: no I/O, no dependencies beyond the standard library.
package mongoerr

import (
	"errors"
	"fmt"
)

// Code is a MongoDB error code. The values are MongoDB's and never change.
type Code int

// The MongoDB codes Hourglass uses. Values are fixed by MongoDB.
const (
	InternalError         Code = 1
	BadValue              Code = 2
	FailedToParse         Code = 9
	MaxTimeMSExpired      Code = 50
	Unauthorized          Code = 13
	TypeMismatch          Code = 14
	InvalidLength         Code = 16
	InvalidBSON           Code = 22
	AuthenticationFailed  Code = 18
	NamespaceNotFound     Code = 26
	IndexNotFound         Code = 27
	IllegalOperation      Code = 20
	NamespaceExists       Code = 48
	CannotCreateIndex     Code = 67
	InvalidOptions        Code = 72
	NoReplicationEnabled  Code = 76
	InvalidNamespace      Code = 73
	IndexOptionsConflict  Code = 85
	IndexKeySpecsConflict Code = 86
	ShutdownInProgress    Code = 91
	ExceededMemoryLimit   Code = 146
	QueryPlanKilled       Code = 175
	// Codes of plain collections: documents, updates and their indexes.
	ConflictingUpdateOperators Code = 40
	ImmutableField             Code = 66
	CannotIndexParallelArrays  Code = 171
	InvalidIndexSpecification  Code = 197
	QueryExceededMemoryLimit   Code = 292
	DuplicateKey               Code = 11000
	// IngressRequestRateLimitExceeded is MongoDB's code for a request
	// refused because the server's ingress queue is full.
	IngressRequestRateLimitExceeded Code = 462
	BSONObjectTooLarge              Code = 10334
	// DataCorruptionDetected is MongoDB's code for stored data that does not
	// verify (ErrCorrupt).
	DataCorruptionDetected Code = 301
	// OutOfDiskSpace is MongoDB's code for a write refused because the
	// filesystem of the data directory is full.
	OutOfDiskSpace Code = 14031
	// NotWritablePrimary is a write sent to a replica set member that is
	// not the primary; NotPrimaryNoSecondaryOk a read sent to one by a
	// client that asked for the primary.
	NotWritablePrimary      Code = 10107
	NotPrimaryNoSecondaryOk Code = 13435
	// InterruptedDueToReplStateChange is a write its member stopped
	// leading before it was committed: it may or may not be applied.
	InterruptedDueToReplStateChange Code = 11602
	// Codes of the wire protocol's own answers.
	CursorNotFound            Code = 43
	CommandNotFound           Code = 59
	AmbiguousIndexKeyPattern  Code = 181
	CursorKilled              Code = 237
	NotImplemented            Code = 238
	MechanismUnavailable      Code = 334
	UnsupportedOpQueryCommand Code = 352
	// UnknownField is MongoDB's code for a field its command parser does
	// not know (IDLUnknownField).
	UnknownField Code = 40415
)

var names = map[Code]string{
	NotWritablePrimary:              "NotWritablePrimary",
	NotPrimaryNoSecondaryOk:         "NotPrimaryNoSecondaryOk",
	InterruptedDueToReplStateChange: "InterruptedDueToReplStateChange",
	CursorNotFound:                  "CursorNotFound",
	CommandNotFound:                 "CommandNotFound",
	AmbiguousIndexKeyPattern:        "AmbiguousIndexKeyPattern",
	CursorKilled:                    "CursorKilled",
	NotImplemented:                  "NotImplemented",
	MechanismUnavailable:            "MechanismUnavailable",
	UnsupportedOpQueryCommand:       "UnsupportedOpQueryCommand",
	UnknownField:                    "IDLUnknownField",
	InternalError:                   "InternalError",
	BadValue:                        "BadValue",
	FailedToParse:                   "FailedToParse",
	Unauthorized:                    "Unauthorized",
	TypeMismatch:                    "TypeMismatch",
	InvalidLength:                   "InvalidLength",
	InvalidBSON:                     "InvalidBSON",
	AuthenticationFailed:            "AuthenticationFailed",
	NamespaceNotFound:               "NamespaceNotFound",
	IndexNotFound:                   "IndexNotFound",
	IllegalOperation:                "IllegalOperation",
	MaxTimeMSExpired:                "MaxTimeMSExpired",
	NamespaceExists:                 "NamespaceExists",
	CannotCreateIndex:               "CannotCreateIndex",
	InvalidOptions:                  "InvalidOptions",
	NoReplicationEnabled:            "NoReplicationEnabled",
	InvalidNamespace:                "InvalidNamespace",
	IndexOptionsConflict:            "IndexOptionsConflict",
	IndexKeySpecsConflict:           "IndexKeySpecsConflict",
	ShutdownInProgress:              "ShutdownInProgress",
	ExceededMemoryLimit:             "ExceededMemoryLimit",
	QueryPlanKilled:                 "QueryPlanKilled",
	ConflictingUpdateOperators:      "ConflictingUpdateOperators",
	ImmutableField:                  "ImmutableField",
	CannotIndexParallelArrays:       "CannotIndexParallelArrays",
	InvalidIndexSpecification:       "InvalidIndexSpecification",
	QueryExceededMemoryLimit:        "QueryExceededMemoryLimitNoDiskUseAllowed",
	DuplicateKey:                    "DuplicateKey",
	IngressRequestRateLimitExceeded: "IngressRequestRateLimitExceeded",
	BSONObjectTooLarge:              "BSONObjectTooLarge",
	DataCorruptionDetected:          "DataCorruptionDetected",
	OutOfDiskSpace:                  "OutOfDiskSpace",
}

// Name returns MongoDB's codeName for c, or "Location<code>" for a code
// without a name, as MongoDB does.
func (c Code) Name() string {
	if n, ok := names[c]; ok {
		return n
	}
	return fmt.Sprintf("Location%d", int(c))
}

// Error is a validation or state error with a MongoDB code. Its message is
// meant for the user: it names the offending field and the rule.
type Error struct {
	Code    Code
	Message string
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

// CodeName is MongoDB's name for e.Code.
func (e *Error) CodeName() string { return e.Code.Name() }

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, mongoerr.New(mongoerr.BadValue, "")) matches by code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// New returns an *Error with code c and a message formatted from format and
// args.
func New(c Code, format string, args ...any) *Error {
	if len(args) == 0 {
		return &Error{Code: c, Message: format}
	}
	return &Error{Code: c, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of the first *Error in err's chain, or 0 if there is
// none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// ErrCorrupt marks corrupt data: stored or logged bytes that do not decode or
// verify, whichever layer found them. Each package's own corruption sentinel
// (bucket.ErrCorrupt, document.ErrCorrupt, wal.ErrCorrupt,
// timeseries.ErrCorrupt) is made by Corrupt and wraps it, so
// errors.Is(err, mongoerr.ErrCorrupt) asks "is this corruption?" of an error
// from any of them, and CodeOf gives DataCorruptionDetected.
var ErrCorrupt = &Error{Code: DataCorruptionDetected, Message: "data corruption detected"}

// Corrupt returns a package's corruption sentinel: an error whose text is msg
// and which wraps ErrCorrupt. Each call returns a distinct error, so errors.Is
// still tells one package's sentinel from another's.
func Corrupt(msg string) error { return &corrupt{msg: msg} }

type corrupt struct{ msg string }

func (e *corrupt) Error() string { return e.msg }
func (e *corrupt) Unwrap() error { return ErrCorrupt }

// MessageOf returns the message of an *Error in err's chain, or err's text.
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}
