package gui

import (
	"fmt"

	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"k3/storage/units"
	"k3/ui/bridge"
)

// savedPromptsItem is the settings row of the prompt cache: how much the
// saved prompts take on disk, and a button that deletes them (the next
// messages then read their whole conversation again).
func savedPromptsItem() *widget.FormItem {
	label := widget.NewLabel("")
	show := func() {
		n, b := bridge.PromptCacheSize()
		if n == 0 {
			label.SetText("none saved")
			return
		}
		label.SetText(fmt.Sprintf("%d saved, %s on disk", n, units.Bytes(b)))
	}
	show()
	clear := widget.NewButton("Clear", func() {
		if err := bridge.ClearPromptCache(); err != nil {
			label.SetText("Not all cleared: " + bridge.Explain(err))
			return
		}
		show()
	})
	item := widget.NewFormItem("Saved prompts", container.NewBorder(nil, nil, nil, clear, label))
	item.HintText = "Conversations start from these instead of reading the same beginning again."
	return item
}
