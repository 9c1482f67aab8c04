package gui

import (
	"slices"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/data/binding"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// convList is the list of saved conversations with search, New,
// Rename and Delete. The list shows a bound string list; selecting the
// conversation already shown does nothing, so no guard is needed when the
// view highlights it.
type convList struct {
	Root     fyne.CanvasObject
	List     *focusList
	Titles   binding.StringList
	Selected string
	Query    *searchEntry
	NoMatch  *widget.Label // "No conversation matches." under a search that found nothing
	// OnLeave is Esc in the search: the search is cleared, then the
	// chat takes the keys again (N8)
	OnLeave func()

	NewBt, RenameBt, DeleteBt *widget.Button
	OnSelect                  func(title string)
	OnNew                     func()
	OnRename                  func(from, to string)
	OnDelete                  func(title string)
	// Refuse, when set, says why nothing can be deleted now ("" when it can)
	Refuse func() string
	// Search returns the titles matching a query (all for "").
	Search func(query string) ([]string, error)
	win    fyne.Window
	all    []string
	// Tip shows a cut title whole under the pointer
	Tip *tipLayer
}

// newConvList builds the list; win hosts its dialogs.
func newConvList(win fyne.Window) *convList {
	v := &convList{win: win, Titles: binding.NewStringList(), Tip: newTipLayer()}
	v.List = newFocusList(v.Titles,
		func() fyne.CanvasObject { return newTipLabel("conversation title", v.Tip) },
		func(i binding.DataItem, o fyne.CanvasObject) { o.(*tipLabel).Bind(i.(binding.String)) })
	v.List.OnSelected = func(i widget.ListItemID) {
		t, err := v.Titles.GetValue(i)
		if err != nil {
			return
		}
		v.Selected = t
		if v.OnSelect != nil {
			v.OnSelect(t)
		}
	}
	v.Query = newSearchEntry(func() {
		if v.OnLeave != nil {
			v.OnLeave()
		}
	})
	v.Query.SetPlaceHolder("Search conversations")
	v.Query.OnChanged = func(string) { v.filter() }
	v.NewBt = widget.NewButtonWithIcon("New", theme.ContentAddIcon(), func() {
		if v.OnNew != nil {
			v.OnNew()
		}
	})
	v.RenameBt = widget.NewButtonWithIcon("", theme.DocumentCreateIcon(), v.askRename)
	v.DeleteBt = widget.NewButtonWithIcon("", theme.DeleteIcon(), v.askDelete)
	bar := container.NewBorder(nil, nil, nil, container.NewHBox(v.RenameBt, v.DeleteBt), v.NewBt)
	head := container.NewVBox(widget.NewLabelWithStyle("Conversations", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}), bar, v.Query)
	v.NoMatch = widget.NewLabel("No conversation matches.")
	v.NoMatch.Importance = widget.LowImportance
	v.NoMatch.Hide()
	v.Root = container.NewStack(container.NewBorder(container.NewVBox(head, v.NoMatch), nil, nil, nil, v.List.Root()), v.Tip.Root)
	return v
}

// SetTitles shows titles (filtered by the search) with sel highlighted.
func (v *convList) SetTitles(titles []string, sel string) {
	v.all, v.Selected = titles, sel
	v.filter()
}

func (v *convList) filter() {
	shown := v.all
	if q := v.Query.Text; q != "" && v.Search != nil {
		if found, err := v.Search(q); err == nil {
			shown = found
		}
	}
	_ = v.Titles.Set(slices.Clone(shown))
	// an empty list would be a Tab stop with nothing to show (G8)
	if len(shown) == 0 {
		v.List.Hide()
	} else {
		v.List.Show()
	}
	if v.Query.Text != "" && len(shown) == 0 {
		v.NoMatch.Show() // G21: a search with no match says so
	} else {
		v.NoMatch.Hide()
	}
	v.Highlight(v.Selected)
}

// Highlight selects title in the list (the conversation shown).
func (v *convList) Highlight(title string) {
	v.Selected = title
	titles, _ := v.Titles.Get()
	if i := slices.Index(titles, title); i >= 0 {
		v.List.Select(i)
	} else {
		v.List.UnselectAll()
	}
}

// Shown are the titles the list shows now.
func (v *convList) Shown() []string {
	t, _ := v.Titles.Get()
	return t
}

func (v *convList) askRename() {
	if v.Selected == "" {
		return
	}
	from := v.Selected
	e := widget.NewEntry()
	e.SetText(from)
	d := dialog.NewForm("Rename conversation", "Rename", "Cancel", []*widget.FormItem{widget.NewFormItem("Name", e)}, func(ok bool) {
		if ok && v.OnRename != nil {
			v.OnRename(from, e.Text)
		}
	}, v.win)
	e.OnSubmitted = func(string) { d.Submit() }
	d.Resize(fyne.NewSize(min(480, v.win.Canvas().Size().Width-40), 180))
	d.Show()
	v.win.Canvas().Focus(e)
}

func (v *convList) askDelete() {
	if v.Selected == "" {
		return
	}
	title := v.Selected
	if v.Refuse != nil {
		if why := v.Refuse(); why != "" {
			dialog.ShowInformation("Delete conversation", why, v.win)
			return
		}
	}
	dialog.ShowConfirm("Delete conversation", "Delete “"+title+"”? Its history file is removed.", func(ok bool) {
		if ok && v.OnDelete != nil {
			v.OnDelete(title)
		}
	}, v.win)
}

// searchEntry is the conversation search: Esc clears it and leaves it (N8:
// the filter stayed, the list showing only "No conversation matches.").
type searchEntry struct {
	widget.Entry
	leave func()
}

func newSearchEntry(leave func()) *searchEntry {
	e := &searchEntry{leave: leave}
	e.ExtendBaseWidget(e)
	return e
}

// TypedKey clears the search on Esc.
func (e *searchEntry) TypedKey(k *fyne.KeyEvent) {
	if k.Name != fyne.KeyEscape {
		e.Entry.TypedKey(k)
		return
	}
	e.SetText("")
	if e.leave != nil {
		e.leave()
	}
}
