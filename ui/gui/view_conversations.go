package gui

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// ConversationsView is the list of saved conversations with New, Rename
// and Delete.
type ConversationsView struct {
	Root     fyne.CanvasObject
	List     *widget.List
	Titles   []string
	Selected string

	NewBt, RenameBt, DeleteBt *widget.Button
	OnSelect                  func(title string)
	OnNew                     func()
	OnRename                  func(from, to string)
	OnDelete                  func(title string)
	win                       fyne.Window
	selecting                 bool
}

// NewConversationsView builds the list; win hosts its dialogs.
func NewConversationsView(win fyne.Window) *ConversationsView {
	v := &ConversationsView{win: win}
	v.List = widget.NewList(func() int { return len(v.Titles) },
		func() fyne.CanvasObject { return widget.NewLabel("conversation title") },
		func(i widget.ListItemID, o fyne.CanvasObject) {
			l := o.(*widget.Label)
			l.Truncation = fyne.TextTruncateEllipsis
			l.SetText(v.Titles[i])
		})
	v.List.OnSelected = func(i widget.ListItemID) {
		if v.selecting || i < 0 || i >= len(v.Titles) {
			return
		}
		v.Selected = v.Titles[i]
		if v.OnSelect != nil {
			v.OnSelect(v.Selected)
		}
	}
	v.NewBt = widget.NewButtonWithIcon("New", theme.ContentAddIcon(), func() {
		if v.OnNew != nil {
			v.OnNew()
		}
	})
	v.RenameBt = widget.NewButtonWithIcon("", theme.DocumentCreateIcon(), v.askRename)
	v.DeleteBt = widget.NewButtonWithIcon("", theme.DeleteIcon(), v.askDelete)
	bar := container.NewBorder(nil, nil, nil, container.NewHBox(v.RenameBt, v.DeleteBt), v.NewBt)
	v.Root = container.NewBorder(container.NewVBox(widget.NewLabelWithStyle("Conversations", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}), bar), nil, nil, nil, v.List)
	return v
}

// SetTitles shows titles with sel highlighted.
func (v *ConversationsView) SetTitles(titles []string, sel string) {
	v.Titles, v.Selected = titles, sel
	v.List.Refresh()
	v.selecting = true
	v.List.UnselectAll()
	for i, t := range titles {
		if t == sel {
			v.List.Select(i)
		}
	}
	v.selecting = false
}

func (v *ConversationsView) askRename() {
	if v.Selected == "" {
		return
	}
	from := v.Selected
	e := widget.NewEntry()
	e.SetText(from)
	dialog.ShowForm("Rename conversation", "Rename", "Cancel", []*widget.FormItem{widget.NewFormItem("Name", e)}, func(ok bool) {
		if ok && v.OnRename != nil {
			v.OnRename(from, e.Text)
		}
	}, v.win)
}

func (v *ConversationsView) askDelete() {
	if v.Selected == "" {
		return
	}
	title := v.Selected
	dialog.ShowConfirm("Delete conversation", "Delete “"+title+"”? Its history file is removed.", func(ok bool) {
		if ok && v.OnDelete != nil {
			v.OnDelete(title)
		}
	}, v.win)
}
