package diag

import "encoding/json"

// JSON is the form of a diagnostic in coredag's --json output (docs/check-json.md). Fields
// are only ever added, never renamed or removed.
type JSON struct {
	Code    Code          `json:"code"`
	File    string        `json:"file"`
	Line    int           `json:"line"`
	Col     int           `json:"col"`
	Message string        `json:"message"`           // as printed: with the ranks suffix
	Ranks   []int         `json:"ranks,omitempty"`   // Ranks and Likewise
	Related []JSONRelated `json:"related,omitempty"` // in the order of Related
	Fix     *JSONFix      `json:"fix,omitempty"`
}

// JSONRelated is a related position in JSON.
type JSONRelated struct {
	File  string `json:"file"`
	Line  int    `json:"line"`
	Col   int    `json:"col"`
	Label string `json:"label"`
}

// JSONFix is a suggested fix in JSON.
type JSONFix struct {
	Message string     `json:"message"`
	Edits   []JSONEdit `json:"edits,omitempty"`
}

// JSONEdit is a text edit in JSON: replace from line:col up to end_line:end_col with new_text.
type JSONEdit struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	EndLine int    `json:"end_line"`
	EndCol  int    `json:"end_col"`
	NewText string `json:"new_text"`
}

// ToJSON converts d to its JSON form.
func (d *Diagnostic) ToJSON() JSON {
	j := JSON{Code: d.Code, File: d.Pos.Filename(), Line: int(d.Pos.Line), Col: int(d.Pos.Col), Message: d.Text(), Ranks: d.AllRanks()}
	for _, r := range d.Related {
		j.Related = append(j.Related, JSONRelated{File: r.Pos.Filename(), Line: int(r.Pos.Line), Col: int(r.Pos.Col), Label: r.Label})
	}
	if d.Fix != nil {
		j.Fix = &JSONFix{Message: d.Fix.Msg}
		for _, e := range d.Fix.Edits {
			j.Fix.Edits = append(j.Fix.Edits, JSONEdit{File: e.Pos.Filename(), Line: int(e.Pos.Line), Col: int(e.Pos.Col),
				EndLine: int(e.End.Line), EndCol: int(e.End.Col), NewText: e.New})
		}
	}
	return j
}

// MarshalJSON writes d in its JSON form.
func (d *Diagnostic) MarshalJSON() ([]byte, error) { return json.Marshal(d.ToJSON()) }

// ToJSON converts every diagnostic of l; an empty list is an empty array, never null.
func (l List) ToJSON() []JSON {
	out := make([]JSON, len(l))
	for i, d := range l {
		out[i] = d.ToJSON()
	}
	return out
}
