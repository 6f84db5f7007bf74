package elaborate

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/coredag/coredag/dsl"
)

// ParseParams reads param overrides written NAME=VALUE (as `coredag -p` takes them), VALUE an
// integer literal of the language with an optional minus sign. Whether each NAME is declared is
// Elaborate's check, against the plan.
func ParseParams(kvs []string) (map[string]int64, error) {
	out := make(map[string]int64, len(kvs))
	for _, kv := range kvs {
		name, val, ok := strings.Cut(kv, "=")
		name, val = strings.TrimSpace(name), strings.TrimSpace(val)
		if !ok || name == "" || val == "" {
			return nil, fmt.Errorf("%q: want NAME=VALUE, e.g. ranks=8", kv)
		}
		v, err := dsl.ParseInt(val)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", kv, err)
		}
		if old, twice := out[name]; twice {
			return nil, fmt.Errorf("%s: %s is given twice (%s=%d before)", kv, name, name, old)
		}
		out[name] = v
	}
	return out, nil
}

// ParamError is a param override that the plan cannot take (coredag's -p, the library's params):
// a param it does not declare, or a world size out of range. It is the caller's mistake, not the
// plan's.
type ParamError struct {
	Msg string
}

func (e *ParamError) Error() string { return e.Msg }

// CheckParams reports, as a *ParamError, the overrides in params that f cannot take: names it
// does not declare as params, and a ranks value outside 1..MaxRanks. Elaborate reports the same
// mistakes among the plan's diagnostics; Load checks them first, so a caller can tell them apart.
func CheckParams(f *dsl.File, params map[string]int64) error {
	var declared []string
	for _, st := range f.Stmts {
		if p, ok := st.(*dsl.ParamStmt); ok && !slices.Contains(declared, p.Name.Name) {
			declared = append(declared, p.Name.Name)
		}
	}
	var msgs []string
	for _, name := range slices.Sorted(maps.Keys(params)) {
		if !slices.Contains(declared, name) {
			hint := "the plan declares no params"
			if len(declared) > 0 {
				hint = "declared params: " + strings.Join(declared, ", ")
			}
			msgs = append(msgs, fmt.Sprintf("%s = %d: the plan has no param %s (%s)", name, params[name], name, hint))
		}
	}
	if v, ok := params["ranks"]; ok && slices.Contains(declared, "ranks") && (v < 1 || v > MaxRanks) {
		msgs = append(msgs, fmt.Sprintf("ranks = %d: the world size must be between 1 and %d", v, MaxRanks))
	}
	if len(msgs) > 0 {
		return &ParamError{Msg: strings.Join(msgs, "; ")}
	}
	return nil
}
