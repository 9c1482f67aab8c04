package machine

import (
	"runtime"

	"golang.org/x/sys/cpu"
)

// Features lists the SIMD features relevant to the kernels that this
// process may use, from golang.org/x/sys/cpu.
func Features() []string {
	var f []string
	add := func(ok bool, name string) {
		if ok {
			f = append(f, name)
		}
	}
	switch runtime.GOARCH {
	case "amd64", "386":
		x := cpu.X86
		add(x.HasSSE42, "sse4.2")
		add(x.HasAVX, "avx")
		add(x.HasAVX2, "avx2")
		add(x.HasFMA, "fma")
		add(x.HasBMI2, "bmi2")
		add(x.HasAVX512F, "avx512f")
		add(x.HasAVX512BW, "avx512bw")
		add(x.HasAVX512VL, "avx512vl")
		add(x.HasAVX512DQ, "avx512dq")
		add(x.HasAVX512VNNI, "avx512vnni")
		add(x.HasAVX512BF16, "avx512bf16")
		add(x.HasAVX512VBMI, "avx512vbmi")
		add(x.HasAVXVNNI, "avxvnni")
	case "arm64":
		a := cpu.ARM64
		add(a.HasASIMD, "asimd")
		add(a.HasFPHP, "fp16")
		add(a.HasASIMDDP, "asimddp")
		add(a.HasSVE, "sve")
		add(a.HasSVE2, "sve2")
	}
	return f
}
