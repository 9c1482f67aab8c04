package gui

import (
	"image/color"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/chat"
	"k3/engine/plan"
)

// scrollsIn lists what takes a wheel in o's tree (scroll areas, lists),
// looking into containers, cards and scroll areas.
func scrollsIn(o fyne.CanvasObject) []fyne.CanvasObject {
	var out []fyne.CanvasObject
	var walk func(o fyne.CanvasObject)
	walk = func(o fyne.CanvasObject) {
		if o == nil || !o.Visible() {
			return
		}
		if _, ok := o.(fyne.Scrollable); ok {
			out = append(out, o)
		}
		if _, ok := o.(*widget.List); ok { // its scroll is inside it
			out = append(out, o)
		}
		switch x := o.(type) {
		case *fyne.Container:
			for _, c := range x.Objects {
				walk(c)
			}
		case *widget.Card:
			walk(x.Content)
		case *container.Scroll:
			walk(x.Content)
		case *sideScroll:
			walk(x.Content)
		}
	}
	walk(o)
	return out
}

// G14: in step 2 nothing but the step itself takes an up-down wheel: the
// verified files are rows of the step (a list with a scroll of its own
// caught the wheel), and the download's lines scroll sideways only, passing
// an up-down wheel to the step.
func TestModelStepWheelScrollsTheStep(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	ui(func() { u.Win.Resize(fyne.NewSize(1280, 800)) })
	ui(u.Start)
	w := u.wizard
	ui(func() {
		w.Go(1)
		w.Model.Dir.SetText(t.TempDir())
		w.Model.StartVerify()
	})
	waitFor(t, "verify", func() bool { return w.Model.Verified != nil })
	ui(func() {
		w.Model.setFiles("model-00001-of-00002.safetensors  done\nmodel-00002-of-00002.safetensors  25.00 MB/s")
		assert.Equal(t, 2, w.Model.VfList.Length())
		outer, ok := w.Model.view.(*container.Scroll)
		require.True(t, ok, "the step scrolls as one")
		var side *sideScroll
		for _, s := range scrollsIn(outer) {
			switch x := s.(type) {
			case *container.Scroll:
				assert.Same(t, outer, x, "a scroll area inside the step")
			case *sideScroll:
				side = x
			case *wheelPass: // over a one-line field: hands the wheel to the step
				assert.Same(t, outer, x.outer())
			default:
				t.Errorf("%T inside the step takes the wheel", s)
			}
		}
		require.NotNil(t, side, "the download's lines scroll sideways")
		outer.Resize(fyne.NewSize(900, 300)) // shorter than the step
		side.Scrolled(&fyne.ScrollEvent{Scrolled: fyne.Delta{DY: -120}})
		assert.Greater(t, outer.Offset.Y, float32(0), "the wheel over the download's lines scrolls the step")
	})
}

// G14: the memory plan fits the window at 1024x640: its notes wrap in rows
// instead of a block of long lines that scrolled sideways.
func TestMemoryPlanFitsAt1024(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	u.S.ModelDir = t.TempDir()
	ui(func() { u.Win.Resize(fyne.NewSize(1024, 640)) })
	ui(u.Start)
	w := u.wizard
	ui(func() {
		w.D.ModelDir = u.S.ModelDir
		w.Go(3)
	})
	waitFor(t, "plan", func() bool { return !w.Memory.busy })
	p := &plan.Plan{Pinned: []bool{true, true, false}, PinnedBytes: 3e9, Compressed: true, RingSlots: 2, RingBytes: 2e9, SlotBytes: 1e9,
		Load: 5e8, Globals: 2e9, CacheBytes: 8e9, CacheSlots: 400, Spec: 1e8, Draft: 3e8, Total: 16e9,
		Notes: []string{"the expert cache is smaller than one token's experts: every token reads experts from disk, which is slow"}}
	ui(func() {
		w.Memory.showPlan(p, nil)
		assert.Equal(t, p.String(), w.Memory.PlanText.Text)
		for _, s := range scrollsIn(w.Memory.view) {
			assert.Same(t, w.Memory.view, s, "%T inside the memory step takes the wheel", s)
		}
		assert.Less(t, w.Memory.PlanText.Root.MinSize().Width, float32(600), "the plan is narrower than the step at 1024x640")
		var rows []string
		for i, o := range w.Memory.PlanText.Root.Objects {
			if i%2 == 0 {
				rows = append(rows, o.(*widget.Label).Text)
			}
		}
		assert.Equal(t, []string{"trunk pinned", "trunk ring", "load buffer", "model tables", "expert cache", "KDA state", "MLA KV cache",
			"buffers", "spec rollback", "draft model", "process base", "total", "note"}, rows)
	})
}

// G14: a wheel turned over a code block scrolls the conversation, not the
// code sideways; a sideways wheel still scrolls the code.
func TestWheelOverCodeScrollsTheChat(t *testing.T) {
	test.NewTempApp(t)
	var sc *container.Scroll
	long := strings.Repeat("x := compute(a, b, c) // a long line of code that is wider than the window ", 4)
	mv := newMessageView(chat.Message{Role: "assistant", Content: "Code:\n\n```go\n" + long + "\n" + long + "\n```\n"},
		messageEnv{scroller: func() *container.Scroll { return sc }})
	spacer := canvas.NewRectangle(color.Transparent)
	spacer.SetMinSize(fyne.NewSize(10, 2000))
	sc = container.NewVScroll(container.NewVBox(mv.Root, spacer))
	w := test.NewTempWindow(t, sc)
	w.Resize(fyne.NewSize(500, 300))
	var side *sideScroll
	var find func(o fyne.CanvasObject)
	find = func(o fyne.CanvasObject) {
		switch x := o.(type) {
		case *sideScroll:
			side = x
		case *fyne.Container:
			for _, c := range x.Objects {
				find(c)
			}
		}
	}
	find(mv.body)
	require.NotNil(t, side, "the code block has no side scroll")
	side.Scrolled(&fyne.ScrollEvent{Scrolled: fyne.Delta{DY: -120}})
	assert.Greater(t, sc.Offset.Y, float32(0), "the chat did not scroll")
	assert.Equal(t, float32(0), side.Offset.X, "the code scrolled sideways on an up-down wheel")
	side.Scrolled(&fyne.ScrollEvent{Scrolled: fyne.Delta{DX: -120}})
	assert.Greater(t, side.Offset.X, float32(0), "a sideways wheel does not scroll the code")
}

// G14: a wheel turned over step 2's one-line fields (Model folder, Layers,
// Access token, Version) moves the page at 1024x640, as over the rest of
// the step; a click still puts the cursor in the field.
func TestWheelOverStep2FieldsScrollsThePage(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	ui(func() { u.Win.Resize(fyne.NewSize(1024, 640)) })
	ui(u.Start)
	w := u.wizard
	ui(func() { w.Go(1) })
	ui(func() {
		outer, ok := w.Model.view.(*container.Scroll)
		require.True(t, ok)
		c := u.Win.Canvas()
		d := fyne.CurrentApp().Driver()
		into := func(f *widget.Entry) fyne.Position {
			outer.ScrollToTop()
			top := d.AbsolutePositionForObject(outer)
			at := d.AbsolutePositionForObject(f)
			if at.Y+f.Size().Height > top.Y+outer.Size().Height { // below the view: bring it into the middle
				outer.ScrollToOffset(fyne.NewPos(0, at.Y-top.Y-outer.Size().Height/2))
				at = d.AbsolutePositionForObject(f)
			}
			return at
		}
		for name, f := range map[string]*widget.Entry{"Model folder": w.Model.Dir, "Layers": w.Model.Layers,
			"Access token": w.Model.Token, "Version": w.Model.Revision} {
			at := into(f)
			before := outer.Offset.Y
			test.Scroll(c, at.Add(fyne.NewPos(f.Size().Width/2, f.Size().Height/2)), 0, -40)
			assert.Greater(t, outer.Offset.Y, before, "the wheel over %s did not move the page", name)
			before = outer.Offset.Y
			test.Scroll(c, at.Add(fyne.NewPos(f.Size().Width/2, f.Size().Height/2)), 0, 20)
			assert.Less(t, outer.Offset.Y, before, "the wheel up over %s did not move the page", name)
		}
		// it takes nothing but the wheel: clicks, drags, hover and the text
		// cursor find the field under it
		var o any = &wheelPass{}
		for what, takes := range map[string]bool{
			"taps": is[fyne.Tappable](o), "double taps": is[fyne.DoubleTappable](o), "focus": is[fyne.Focusable](o),
			"drags": is[fyne.Draggable](o), "hover": is[desktop.Hoverable](o), "mouse": is[desktop.Mouseable](o),
			"the cursor": is[desktop.Cursorable](o)} {
			assert.False(t, takes, "the wheel's layer over a field takes %s", what)
		}
	})
}

func is[T any](o any) bool { _, ok := o.(T); return ok }
