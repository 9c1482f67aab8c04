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
		fmt.Fprint(stdout, presetsBaseNote())
		return ExitOK
	})
}

// presetsBaseNote says which process the planned figures are of: k3 run
// and k3 chat (their measured base, with the checkpoint's tensor index),
// and what the app adds (its window toolkit).
func presetsBaseNote() string {
	return fmt.Sprintf("The plans are of k3 run and k3 chat: a process base of %.2f GB (the Go runtime, the tokenizer, the checkpoint's tensor index of %.2f GB). The app's plans are %.2f GB more (its window toolkit): ultra %.2f GB, laptop %.2f GB.\n",
		float64(doctor.K3.Baseline())/plan.GB, float64(doctor.K3.IndexBytes())/plan.GB, float64(doctor.AppBaselineBytes-doctor.CLIBaselineBytes)/plan.GB,
		float64(doctor.AppBytes(doctor.Need(plan.Presets[0].Budget())))/plan.GB, float64(doctor.AppBytes(doctor.Need(plan.Presets[1].Budget())))/plan.GB)
}
