package planner

import (
	"fmt"
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
		out[name] = v
	}
	return out, nil
}
