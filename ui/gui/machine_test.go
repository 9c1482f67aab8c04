package gui

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// G26: step 1's problem lines end as sentences.
func TestMachineProblemIsASentence(t *testing.T) {
	assert.Equal(t, "the disk has 20 GB free, the trunk needs 109 GB.", fullStop("the disk has 20 GB free, the trunk needs 109 GB"))
	assert.Equal(t, "done.", fullStop("done."))
	assert.Equal(t, "", fullStop(" "))
}

// Walk-through 19: the machine step speaks of the app, not of flags, and
// gives the preset and speed it would have once the model has room.
func TestMachineStepWordsAndPrediction(t *testing.T) {
	r, _ := (&fakeMachine{}).Measure(t.Context(), []string{"/"}, true, func(float64, string) {})
	r.CanRun = false
	r.Problems = []string{"no directory given has room for the checkpoint: it needs 1.56 TB more and the most free space is 52.2 GB (/home); pass --dir on a disk with at least 1.67 TB free"}
	md := describeReport(r)
	assert.NotContains(t, md, "--dir")
	assert.Contains(t, md, "no disk measured has room for the checkpoint")
	assert.Contains(t, md, "Choose a model folder (step 2) on a disk with at least 1.67 TB free")
	assert.Contains(t, md, "**Once that is solved:** the *desktop* preset")
	assert.Contains(t, md, "**25.3 s per token**")
}
