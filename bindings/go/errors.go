package pccl

import (
	"errors"
	"fmt"
)

// Code is a pcclResult_t value: the result of a pccl call. Codes are
// append-only, as in include/pccl.h.
type Code int32

// Every pcclResult_t of include/pccl.h (checked against the header by the tests).
const (
	Success                    Code = 0
	NotInitialized             Code = 1
	InternalError              Code = 2
	InvalidArgument            Code = 3
	InvalidUsage               Code = 4
	TooFewPeers                Code = 5
	MasterConnectionFailed     Code = 6
	RankConnectionFailed       Code = 7
	RankConnectionLost         Code = 8
	NoSharedStateAvailable     Code = 9
	PendingAsyncOps            Code = 10
	UpdateTopologyFailed       Code = 11
	TopologyOptimizationFailed Code = 12
	Timeout                    Code = 13
	SystemError                Code = 14
	RemoteError                Code = 15
	SharedStateSyncFailed      Code = 16
	ProtocolError              Code = 17
	AuthenticationFailed       Code = 18

	// OptimizeTopologyFailed is the name PCCL's documentation uses for TopologyOptimizationFailed.
	OptimizeTopologyFailed = TopologyOptimizationFailed
)

// NumCodes is the number of distinct result codes (PCCL_RESULT_COUNT).
const NumCodes = 19

var codeNames = [NumCodes]string{
	"pcclSuccess", "pcclNotInitialized", "pcclInternalError", "pcclInvalidArgument",
	"pcclInvalidUsage", "pcclTooFewPeers", "pcclMasterConnectionFailed",
	"pcclRankConnectionFailed", "pcclRankConnectionLost", "pcclNoSharedStateAvailable",
	"pcclPendingAsyncOps", "pcclUpdateTopologyFailed", "pcclTopologyOptimizationFailed",
	"pcclTimeout", "pcclSystemError", "pcclRemoteError", "pcclSharedStateSyncFailed",
	"pcclProtocolError", "pcclAuthenticationFailed",
}

var codeMessages = [NumCodes]string{
	"success", "pcclInit was not called", "internal error", "invalid argument",
	"invalid usage", "too few peers", "master connection failed", "peer connection failed",
	"peer connection lost", "no shared state available", "asynchronous operations pending",
	"update topology failed", "topology optimization failed", "timed out", "system error",
	"remote error", "shared state synchronization failed", "protocol error",
	"authentication failed",
}

// String returns the C name of the code, e.g. "pcclInvalidArgument".
func (c Code) String() string {
	if c >= 0 && int(c) < NumCodes {
		return codeNames[c]
	}
	return fmt.Sprintf("pcclResult(%d)", int32(c))
}

// Message returns the human-readable text of the code (PCCL_RESULT_MAP).
func (c Code) Message() string {
	if c >= 0 && int(c) < NumCodes {
		return codeMessages[c]
	}
	return "unknown result"
}

// Error is the error every pccl call returns: the result code, the
// operation that failed, and an optional cause (for example
// context.DeadlineExceeded when a context ended a wait).
//
// errors.Is(err, pccl.ErrInvalidArgument) (and every other Err* sentinel)
// matches by code; errors.Is(err, context.DeadlineExceeded) matches the cause.
type Error struct {
	Code Code   // the pcclResult_t
	Op   string // the Go call that failed, e.g. "AllReduce"
	Err  error  // the cause, if any (nil for plain C results)
}

func (e *Error) Error() string {
	s := "pccl"
	if e.Op != "" {
		s += ": " + e.Op
	}
	s += ": " + e.Code.Message() + " (" + e.Code.String() + ")"
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same code and no Op or
// cause of its own (a sentinel such as ErrTimeout), or an identical *Error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	if t.Op == "" && t.Err == nil {
		return t.Code == e.Code
	}
	return t.Code == e.Code && t.Op == e.Op && t.Err == e.Err
}

// Sentinels, one per non-success code, for errors.Is.
var (
	ErrNotInitialized             = &Error{Code: NotInitialized}
	ErrInternalError              = &Error{Code: InternalError}
	ErrInvalidArgument            = &Error{Code: InvalidArgument}
	ErrInvalidUsage               = &Error{Code: InvalidUsage}
	ErrTooFewPeers                = &Error{Code: TooFewPeers}
	ErrMasterConnectionFailed     = &Error{Code: MasterConnectionFailed}
	ErrRankConnectionFailed       = &Error{Code: RankConnectionFailed}
	ErrRankConnectionLost         = &Error{Code: RankConnectionLost}
	ErrNoSharedStateAvailable     = &Error{Code: NoSharedStateAvailable}
	ErrPendingAsyncOps            = &Error{Code: PendingAsyncOps}
	ErrUpdateTopologyFailed       = &Error{Code: UpdateTopologyFailed}
	ErrTopologyOptimizationFailed = &Error{Code: TopologyOptimizationFailed}
	ErrTimeout                    = &Error{Code: Timeout}
	ErrSystemError                = &Error{Code: SystemError}
	ErrRemoteError                = &Error{Code: RemoteError}
	ErrSharedStateSyncFailed      = &Error{Code: SharedStateSyncFailed}
	ErrProtocolError              = &Error{Code: ProtocolError}
	ErrAuthenticationFailed       = &Error{Code: AuthenticationFailed}
)

// CodeOf returns the code of a pccl error (Success for nil, InternalError
// for an error that is not a *Error).
func CodeOf(err error) Code {
	if err == nil {
		return Success
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return InternalError
}

// newErr wraps a C result as an error (nil for success).
func newErr(op string, c Code) error {
	if c == Success {
		return nil
	}
	return &Error{Code: c, Op: op}
}
