package gui

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// G26: the wizard's first screen speaks plainly: no "trunk %d GB", no
// kernels or dtypes, every note a sentence.
func TestMachineStepWords(t *testing.T) {
	r, err := (&fakeMachine{}).Measure(t.Context(), []string{"/fast"}, true, func(float64, string) {})
	assert.NoError(t, err)
	r.Warnings = []string{"no AVX2: the kernels run on their portable path, several times slower",
		"/fast has room for the checkpoint but not for the packed trunk (~110 GB more): put the trunk on another disk"}
	r.Problems = []string{"not enough memory"}
	text := describeReport(r)
	assert.Contains(t, text, "**Recommended:** the *desktop* preset (16 GB for the layers every word needs, 10 GB for the experts)")
	assert.Contains(t, text, "- Note: this processor lacks AVX2, so k3 computes several times slower on it.\n")
	assert.Contains(t, text, "- Note: /fast has room for the checkpoint but not for the trunk, the copy of the layers every word needs that step 3 packs (~110 GB more): choose another disk for it there.\n")
	assert.Contains(t, text, "- Problem: not enough memory.\n")
	for _, jargon := range []string{"trunk 16", "kernels", "portable path", "ring"} {
		assert.NotContains(t, text, jargon)
	}
	assert.Equal(t, "measuring how fast this processor computes", progressWords("timing the exact bf16 and MXFP4 kernels"))
	assert.False(t, strings.Contains(progressWords("timing the exact bf16 and MXFP4 kernels"), "MXFP4"))
}
