package ir

import (
	"fmt"

	"github.com/coredag/coredag/diag"
)

// InitError is the failure of a buffer's init expression at one element on one rank.
type InitError struct {
	Pos  diag.Pos // the sub-expression that failed
	Msg  string   // what failed, e.g. "division by zero in 1 / 0"
	Elem int64    // the element, or -1 when the init does not depend on i
	Rank int
	// Format is the format of Msg: failures with one format are one kind of mistake.
	Format string
}

func (e *InitError) Error() string { return e.Pos.String() + ": " + e.Msg + " (" + e.where() + ")" }

func (e *InitError) where() string {
	if e.Elem < 0 {
		return fmt.Sprintf("on rank %d", e.Rank)
	}
	return fmt.Sprintf("at element %d on rank %d", e.Elem, e.Rank)
}

// Diagnostic words the failure for the user, naming the buffer: a positioned diagnostic.
func (e *InitError) Diagnostic(buffer string) *diag.Diagnostic {
	return &diag.Diagnostic{Code: diag.Expr, Pos: e.Pos, Msg: fmt.Sprintf("%s in the init of buffer %s %s", e.Msg, buffer, e.where())}
}
