package gui

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"k3/doctor"
	"k3/storage/units"
)

// PackStep is wizard step 3: write the packed trunk (every layer's dense
// weights in one file, read in order every token) onto the fastest disk.
type PackStep struct {
	w    *Wizard
	view fyne.CanvasObject

	Info    *widget.Label
	Dir     *widget.Entry
	PackBt  *widget.Button
	Bar     *widget.ProgressBar
	Status  *widget.Label
	need    int64
	cancel  context.CancelFunc
	Packing bool
}

// TrunkFolderName is appended to a suggested disk.
const TrunkFolderName = "k3-trunk"

func newPackStep(w *Wizard) *PackStep {
	s := &PackStep{w: w}
	s.Info = wrapLabel("")
	s.Dir = widget.NewEntry()
	s.Dir.SetPlaceHolder("folder for the packed trunk (put it on the fastest disk)")
	choose := widget.NewButton("Choose folder…", func() {
		dialog.ShowFolderOpen(func(l fyne.ListableURI, err error) {
			if err == nil && l != nil {
				s.Dir.SetText(filepath.Join(l.Path(), TrunkFolderName))
			}
		}, w.u.Win)
	})
	s.PackBt = widget.NewButton("Pack the trunk", s.Toggle)
	s.Bar = widget.NewProgressBar()
	s.Status = wrapLabel("")
	intro := wrapLabel("The trunk (every layer's dense weights) is read from disk for every token unless it fits in memory. " +
		"Packing writes it once as one file in reading order, so streaming it is as fast as the disk allows. " +
		"You can stop and continue later; finished layers are kept.")
	s.view = scroll(container.NewVBox(intro, s.Info,
		container.NewBorder(nil, nil, widget.NewLabel("Trunk folder"), choose, s.Dir),
		s.PackBt, s.Bar, s.Status))
	return s
}

func (s *PackStep) Title() string           { return "Pack the trunk" }
func (s *PackStep) View() fyne.CanvasObject { return s.view }

// SuggestTrunkDir picks the measured disk with the fastest sequential reads
// that has room for need bytes (plus 5%). It returns "" when none has.
func SuggestTrunkDir(r *doctor.Report, need int64) (dir, why string) {
	if r == nil {
		return "", ""
	}
	best := -1.0
	for _, d := range r.Disks {
		if float64(d.FreeBytes) < float64(need)*1.05 {
			continue
		}
		speed := 0.0
		if d.SeqGBps != nil {
			speed = *d.SeqGBps
		}
		if speed > best {
			best = speed
			dir = filepath.Join(d.Path, TrunkFolderName)
			why = fmt.Sprintf("suggested: the disk of %s streams at %s and has %s free", d.Path, rate(d.SeqGBps), units.Bytes(int64(d.FreeBytes)))
		}
	}
	return dir, why
}

func (s *PackStep) Enter() {
	u := s.w.u
	if u.B.Packer == nil {
		return
	}
	need, err := u.B.Packer.TrunkBytes(u.S.ModelDir, u.S.Layers)
	if err != nil {
		s.Info.SetText(Explain(err))
		return
	}
	s.need = need
	info := fmt.Sprintf("The trunk of this checkpoint takes %s.", units.Bytes(need))
	if s.Dir.Text == "" {
		switch {
		case u.S.TrunkDir != "":
			s.Dir.SetText(u.S.TrunkDir)
		default:
			if dir, why := SuggestTrunkDir(s.w.Machine.Report, need); dir != "" {
				s.Dir.SetText(dir)
				info += " " + strings.ToUpper(why[:1]) + why[1:] + "."
			} else if u.S.ModelDir != "" {
				s.Dir.SetText(filepath.Join(filepath.Dir(u.S.ModelDir), TrunkFolderName))
			}
		}
	}
	s.Info.SetText(info)
	if u.S.TrunkDir != "" && s.Status.Text == "" {
		s.Status.SetText("The trunk is packed in " + u.S.TrunkDir + ".")
	}
}

func (s *PackStep) Ready() (bool, string) {
	if s.Packing {
		return false, "Packing is running. Cancel it or wait until it finishes."
	}
	if s.w.u.S.TrunkDir == "" {
		return true, "Not packed: every layer will be held in memory (fine for the demo and partial checkpoints)."
	}
	return true, ""
}

// Toggle starts or cancels packing.
func (s *PackStep) Toggle() {
	u := s.w.u
	if s.Packing {
		if s.cancel != nil {
			s.cancel()
		}
		return
	}
	dir := strings.TrimSpace(s.Dir.Text)
	if dir == "" {
		s.Status.SetText("Choose the folder for the packed trunk first.")
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.Packing = cancel, true
	s.PackBt.SetText("Cancel packing")
	s.Status.SetText("Packing…")
	s.w.Changed()
	model, layers := u.S.ModelDir, u.S.Layers
	lim := newLimiter(GaugeHz)
	go func() {
		err := u.B.Packer.Pack(ctx, model, dir, layers, func(p PackProgress) {
			if lim.ok() {
				u.do(func() { s.showProgress(p) })
			}
		})
		u.do(func() { s.done(dir, err) })
	}()
}

func (s *PackStep) showProgress(p PackProgress) {
	if p.Total > 0 {
		s.Bar.SetValue(float64(p.Done) / float64(p.Total))
	}
	s.Status.SetText(fmt.Sprintf("Layer %d of %d, %s of %s, %s, %s", p.Layer, p.Layers,
		units.Bytes(p.Done), units.Bytes(p.Total), units.PerSec(p.BytesPerSec), timeLeft(p.ETA)))
}

func (s *PackStep) done(dir string, err error) {
	u := s.w.u
	s.Packing, s.cancel = false, nil
	s.PackBt.SetText("Pack the trunk")
	switch {
	case err == nil:
		s.Bar.SetValue(1)
		u.S.TrunkDir = dir
		u.SaveSettings()
		s.Status.SetText("Packed into " + dir + ".")
	case errors.Is(err, context.Canceled):
		s.PackBt.SetText("Continue packing")
		s.Status.SetText("Stopped. The finished layers are kept; Continue picks up where it stopped.")
	default:
		s.Status.SetText(Explain(err))
	}
	if u.Wizard == s.w {
		s.w.Changed()
	}
}

func (s *PackStep) Cancel() {
	if s.cancel != nil {
		s.cancel()
	}
}
