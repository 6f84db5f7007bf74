// Package archtest holds no code, only the test of the project's layering: which packages may
// depend on which (README.md, Layout). A rule broken here is an import to remove, not a rule to
// relax.
package archtest
