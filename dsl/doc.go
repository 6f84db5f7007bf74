// Package dsl reads and writes the text of .dag plans, the SPMD language described in
// docs/language.md. It is the first pass of coredag: it turns bytes into a syntax tree and
// back, and knows nothing of ranks, queues or memory.
//
// What it does:
//
//   - Lexing: comments, statement separators (newlines and ";", except newlines inside
//     parentheses and brackets), identifiers and reserved keywords (Keywords, IsKeyword),
//     integer literals with 0x, "_" and the byte units KiB, MiB, GiB and TiB (ParseInt reads
//     them outside a plan too, as for `coredag -p`), and float literals.
//   - Parsing: Parse turns a file into a File, the AST of this package: one node type per
//     statement, operation and expression form, arranged by the precedence rules of the
//     language, every node with the span of source it came from (Node, Span, Pos).
//   - Formatting: Format prints a File in the canonical layout that `coredag fmt` writes;
//     Equal compares two trees ignoring positions and comments, which is what "formatting
//     does not change the meaning" is tested against.
//   - Diagnostics: every node has diag.Pos positions (file:line:col, columns count bytes), and
//     Parse reports its findings as a diag.List (code syntax, or limit for the lexer's and the
//     parser's size limits), which diag.Print prints with the offending source line and a caret.
//     Closest proposes the word a misspelt name was probably meant to be.
//
// What it does not do: Parse only checks the grammar and the literals. Evaluating the text for
// every rank (elaboration), resolving names, checking bounds, matching sends with receives,
// and finding cycles, deadlocks and races belong to package planner, which consumes the File
// and reports its findings with the same diag types.
package dsl
