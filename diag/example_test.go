package diag_test

import (
	"os"

	"github.com/coredag/coredag/diag"
)

func ExamplePrint() {
	src := []byte("plan race\nbuffer data f32[4]\nop a = copy data[0:2] to data[2:4]\nop b = copy data[1:3] to data[0:2]\n")
	file := "race.dag"

	// Two ranks make the same mistake; Group merges them into one diagnostic.
	var g diag.Group
	for rank := range 2 {
		d := &diag.Diagnostic{Code: diag.Race, Pos: diag.At(file, 3, 13),
			Msg: "race on data[1]: copy a reads it, and copy b writes it"}
		d.Relate(diag.At(file, 4, 26), "copy b writes it")
		g.Add(d, "race", rank)
	}
	list := g.List(4)
	list.Sort()
	diag.Print(os.Stdout, list, diag.Sources{file: src})
	// Output:
	// race.dag:3:13: race on data[1]: copy a reads it, and copy b writes it (on ranks 0, 1)
	//     op a = copy data[0:2] to data[2:4]
	//                 ^
	//     race.dag:4:26: copy b writes it
}
