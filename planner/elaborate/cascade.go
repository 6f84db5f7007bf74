package elaborate

import "github.com/coredag/coredag/dsl"

// One mistake, one message (docs/language.md §10, What `coredag check` verifies): a declaration
// that fails is reported where it is written, and the statements that use what it would have
// declared stay silent about it. Names bound by let and param become broken bindings
// (scope.bindBroken); ops and queues are recorded per rank here, by their evaluated name or, when
// even the index failed, by their base name.

// brokenNames records the declarations of one kind (ops or queues) that failed on a rank.
type brokenNames struct {
	names map[string]bool // evaluated names, e.g. "tx[3]"
	bases map[string]bool // base names whose index failed, or declared in a block that was skipped
}

// add records a failed declaration: its evaluated name, or else its base name.
func (b *brokenNames) add(name, base string) {
	if b.names == nil {
		b.names, b.bases = map[string]bool{}, map[string]bool{}
	}
	if name != "" {
		b.names[name] = true
	} else {
		b.bases[base] = true
	}
}

// has reports whether a reference to name (base name base) may be to a failed declaration.
func (b *brokenNames) has(name, base string) bool {
	return b.names[name] || b.bases[base]
}

func (b *brokenNames) reset() {
	clear(b.names)
	clear(b.bases)
}

// skipped records the ops and queues declared anywhere in stmts, a block that was not elaborated
// because its loop bounds or condition failed: any of them may be missing because of it.
func (el *elaborator) skipped(stmts []dsl.Stmt) {
	for _, st := range stmts {
		switch st := st.(type) {
		case *dsl.OpStmt:
			el.broken.ops.add("", st.Name.Ident.Name)
		case *dsl.QueueStmt:
			el.broken.queues.add("", st.Name.Ident.Name)
		case *dsl.ForStmt:
			el.skipped(st.Body)
		case *dsl.IfStmt:
			el.skipped(st.Then)
			el.skipped(st.Else)
		}
	}
}
