// Package diag holds what every part of coredag uses to say where something is and what is
// wrong there: source positions and diagnostics. It imports only the standard library, so the
// parser (dsl), the checker (planner), the engines (exec) and the commands share these types
// without depending on each other.
//
// # Positions
//
// A Pos is a file, a line and a column (bytes, from 1), 12 bytes in all: the planner keeps one
// per op, edge, queue and buffer, and a plan may have millions of ops. There is no byte offset:
// the printer finds a line by counting line breaks (LineStarts), and positions within a file
// compare by line and column.
//
// Files are interned in one table for the whole process (File, FileID.Name): a FileID is a
// small number, and a Pos prints itself (Pos.String) without a file set being passed along.
// The table is safe for concurrent use and only grows, which suits a command-line tool that
// reads a handful of files; a long-lived process that reads unboundedly many differently named
// files would keep their names.
//
// # Diagnostics
//
// A Diagnostic is a finding: a Code (its family, stable across releases: syntax, name, expr,
// shape, access, match, cycle, deadlock, race, expect, assert, limit, target for the checks of a plan, and
// input, fault, hang for reading and running one), a message, the primary position, Related
// positions with a label each (the other access of a race, the first declaration of a
// duplicate, the steps of a cycle), an optional Fix, and the ranks it occurs on.
//
// A plan is one text for every rank, so one mistake is usually made on many ranks. Group
// merges such instances by structure (code, position, related positions and the check that
// failed) into one diagnostic that lists the ranks; it prints as
// "msg (on rank 0; likewise on ranks 1-7)": the message is worded for the first ranks, the
// others have the same mistake with their own figures.
//
// A List holds the diagnostics of one phase; it is an error, and Sort orders it by position
// and drops duplicates. A phase that reads untrusted text adds with AddCapped, which stops it
// after MaxErrors diagnostics with a last one saying "too many errors". Print writes
// diagnostics for a person, quoting the source line (a window of it, when it is long) with a
// caret under the column and adding one indented line per related position; ToJSON gives the
// form the --json outputs use (docs/check-json.md).
//
// Whatever a diagnostic quotes from a plan or a file name may hold control characters: Print
// escapes them (EscapeControls, QuoteName) so a file cannot drive the terminal.
package diag
