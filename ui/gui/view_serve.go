package gui

import (
	"context"
	"errors"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"k3/engine"
	"k3/ui/bridge"
)

// ServePanel starts and stops `k3 serve` over the model the chat has
// loaded, so other programs (OpenAI clients, editors, agents) can use it
// while the app stays open. The chat and the server take turns on the
// engine.
type ServePanel struct {
	Addr   *widget.Entry
	Key    *widget.Entry
	Toggle *widget.Button
	Status *widget.Label
	Root   fyne.CanvasObject

	u    *appUI
	busy bool
}

// localEngine returns the chat's local engine, making it when no turn has
// yet.
func (u *appUI) localEngine() (bridge.Server, error) {
	if u.S.Backend == bridge.BackendServer {
		return nil, errors.New("the chat runs on a server: serving needs the model on this machine (Model location…)")
	}
	if u.Chat == nil {
		return nil, errors.New("open the chat first: the server serves the model the chat loads")
	}
	if u.Chat.engine == nil {
		if u.B.NewChat == nil {
			return nil, errors.New("no chat engine is configured")
		}
		e, err := u.B.NewChat(u.S)
		if err != nil {
			return nil, err
		}
		u.Chat.engine = e
	}
	ec, ok := u.Chat.engine.(bridge.Server)
	if !ok {
		return nil, errors.New("this chat engine cannot be served")
	}
	return ec, nil
}

// NewServePanel builds the panel for the current state.
func NewServePanel(u *appUI) *ServePanel {
	p := &ServePanel{u: u}
	if a, _ := u.N.ServeAddr.Get(); a == "" {
		u.N.ServeAddr.Set(bridge.DefaultServeAddr)
	}
	p.Addr = widget.NewEntryWithData(u.N.ServeAddr) // what is typed is kept for the next time
	p.Key = widget.NewPasswordEntry()
	p.Key.SetPlaceHolder("none (needed when the address is not 127.0.0.1)")
	p.Status = widget.NewLabel("")
	p.Status.Wrapping = fyne.TextWrapWord
	p.Toggle = widget.NewButton("", p.toggle)
	if _, err := u.localEngine(); err != nil {
		p.Status.SetText(err.Error())
	}
	p.refresh()
	p.Root = container.NewVBox(
		widget.NewForm(widget.NewFormItem("Address", p.Addr), widget.NewFormItem("API key", p.Key)),
		p.Toggle, p.Status)
	return p
}

func (p *ServePanel) running() string {
	if ec, err := p.u.localEngine(); err == nil {
		return ec.ServerURL()
	}
	return ""
}

func (p *ServePanel) refresh() {
	if p.u.Chat != nil && p.u.Chat.Picker != nil {
		p.u.Chat.Picker.Refresh() // G13: the chat header says the model is served
	}
	switch url := p.running(); {
	case p.busy:
		p.Toggle.SetText("Starting…")
		p.Toggle.Disable()
	case url != "":
		p.Toggle.SetText("Stop serving")
		p.Toggle.Enable()
		p.Status.SetText("Serving at " + url + " (OpenAI base URL). Other programs can use the model while the app is open.")
		p.Addr.Disable()
		p.Key.Disable()
	case p.u.S.Backend == bridge.BackendServer:
		// G25: serving needs the model on this machine; the status says why
		p.Toggle.SetText("Start serving")
		p.Toggle.Disable()
		p.Addr.Disable()
		p.Key.Disable()
	default:
		p.Toggle.SetText("Start serving")
		p.Toggle.Enable()
		p.Addr.Enable()
		p.Key.Enable()
	}
}

func (p *ServePanel) toggle() {
	u := p.u
	ec, err := u.localEngine()
	if err != nil {
		p.Status.SetText(err.Error())
		return
	}
	if ec.ServerURL() != "" {
		go func() {
			ec.StopServer()
			u.do(func() { p.Status.SetText("Stopped."); p.refresh() })
		}()
		return
	}
	addr, key := p.Addr.Text, p.Key.Text
	chatV := u.Chat
	p.busy = true
	p.Status.SetText("Loading the model…")
	p.refresh()
	go func() {
		on := func(ev engine.Event) {
			if ev.Kind == engine.EventPhase {
				u.do(func() { p.Status.SetText(ev.Text) })
			}
		}
		_, err := ec.StartServer(context.Background(), addr, key, on)
		if ce, ok := ec.(bridge.ChatEngine); ok && err == nil && chatV != nil {
			// the server loaded the model: the Engine panel says which,
			// with its plan, before the chat's first message
			if info, oerr := ce.Open(context.Background(), func(engine.Event) {}); oerr == nil {
				chatV.opened(info)
			}
		}
		u.do(func() {
			if w, ok := ec.(bridge.ServeWatcher); ok && err == nil && u.Chat != nil {
				u.Chat.watchServer(w)
			}
			p.busy = false
			if err != nil {
				p.Status.SetText("Not started: " + bridge.Explain(err))
			}
			p.refresh()
		})
	}()
}

// showServeDialog opens the serve panel.
func (u *appUI) showServeDialog() {
	p := NewServePanel(u)
	d := dialog.NewCustom("Serve the model over HTTP", "Close", p.Root, u.Win)
	d.Resize(fyne.NewSize(560, 300))
	d.Show()
}
