package cli

import (
	"fmt"
	"io"

	"k3/doctor"
	"k3/engine/plan"
)

func init() {
	register("presets", "list the memory presets", func(args []string, stdout, stderr io.Writer) int {
		fmt.Fprint(stdout, plan.Table(doctor.Need))
		return ExitOK
	})
}
