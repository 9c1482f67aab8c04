package gui

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"k3/doctor"
	"k3/storage/units"
	"k3/ui/bridge"
)

// packStep is wizard step 3: write the packed trunk (every layer's dense
// weights in one file, read in order every token) onto the fastest disk.
// Every model gets its own trunk folder; what the folder holds is checked
// against the model (another model's trunk is never reported as packed),
// and a trunk of another checkpoint can be replaced (Pack again here).
type packStep struct {
	w    *wizard
	view fyne.CanvasObject

	Info *widget.Label
	Dir  *widget.Entry
	// Compress is the choice to pack the trunk compressed (lossless:
	// the same answers from a smaller file, packing takes longer).
	Compress *widget.Check
	PackBt   *widget.Button
	Bar      *widget.ProgressBar
	Status   *widget.Label
	need     int64
	job      *bridge.Job
	Packing  bool

	// State is what the folder holds for the model (checked on entry and
	// after every change of the folder).
	State    bridge.TrunkCheck
	checked  string // the folder State is about
	checkJob *bridge.Job
	model    string // the model the folder was suggested for
	note     string // how the last pack ended, shown before the folder's state
}

func newPackStep(w *wizard) *packStep {
	s := &packStep{w: w}
	s.Info = wrapLabel("")
	s.Dir = widget.NewEntry()
	s.Dir.SetPlaceHolder("folder for the packed weights (put it on the fastest disk)")
	s.Dir.OnChanged = func(string) {
		s.note = ""
		s.dirChanged()
	}
	choose := widget.NewButton("Choose folder…", func() {
		dialog.ShowFolderOpen(func(l fyne.ListableURI, err error) {
			if err == nil && l != nil {
				s.Dir.SetText(bridge.DefaultTrunkDir(l.Path(), w.D.ModelDir))
			}
		}, w.u.Win)
	})
	s.Compress = widget.NewCheck(compressLabel, func(on bool) {
		if s.w.D.TrunkCompress != on {
			s.w.D.TrunkCompress = on
			s.note = ""
			if !s.Packing && s.checkJob == nil {
				s.showState()
			}
		}
	})
	s.Compress.SetChecked(w.D.TrunkCompress)
	compressWhy := wrapLabel("Every weight is kept exactly, in about a fifth less space, and less is read from disk for every token. " +
		"Packing takes about half again as long.")
	s.PackBt = widget.NewButton(packLabel, s.Toggle)
	s.Bar = widget.NewProgressBar()
	s.Status = wrapLabel("")
	intro := wrapLabel("The shared weights (the part of every layer that every word goes through; k3 calls it the trunk) are read from disk " +
		"for every word unless they fit in memory. Packing writes them once as one file in reading order, so reading them is as fast as the disk allows. " +
		"You can stop and continue later; finished layers are kept.")
	s.view = scroll(container.NewVBox(intro, s.Info,
		container.NewBorder(nil, nil, widget.NewLabel("Folder"), choose, s.Dir),
		s.Compress, compressWhy,
		s.PackBt, s.Bar, s.Status))
	return s
}

// packLabel is step 3's title and button, in plain words (G26: "trunk").
const packLabel = "Pack the shared weights"

// compressLabel is the compression choice, in the words of what it does.
const compressLabel = "Save disk space (smaller file, same answers; packing takes longer)"

// kindWords says how a trunk was packed.
func kindWords(compressed bool) string {
	if compressed {
		return "packed to save disk space"
	}
	return "packed without saving disk space"
}

func (s *packStep) Title() string           { return packLabel }
func (s *packStep) View() fyne.CanvasObject { return s.view }

// suggestTrunkDir picks the measured disk with the fastest sequential reads
// that has room for need bytes (plus 5%), and the model's folder on it. It
// returns "" when no disk has room.
//
// A measured path inside the app's own folder (appDir: the demo model's
// folder is one of the paths measured) is suggested only when no other
// disk has room: measurement noise made it win over the home folder on the
// same disk (G10).
func suggestTrunkDir(r *doctor.Report, need int64, modelDir, appDir string) (dir, why string) {
	if r == nil {
		return "", ""
	}
	inApp := func(p string) bool {
		rel, err := filepath.Rel(appDir, p)
		return appDir != "" && err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
	}
	if dir, why = suggestFrom(r, need, modelDir, func(p string) bool { return !inApp(p) }); dir != "" {
		return dir, why
	}
	return suggestFrom(r, need, modelDir, func(string) bool { return true })
}

func suggestFrom(r *doctor.Report, need int64, modelDir string, ok func(string) bool) (dir, why string) {
	best := -1.0
	for _, d := range r.Disks {
		if float64(d.FreeBytes) < float64(need)*1.05 || !ok(d.Path) {
			continue
		}
		speed := 0.0
		if d.SeqGBps != nil {
			speed = *d.SeqGBps
		}
		if speed > best {
			best = speed
			dir = bridge.DefaultTrunkDir(bridge.TrunkBase(d.Path), modelDir)
			why = fmt.Sprintf("suggested: the disk of %s streams at %s and has %s free", d.Path, rate(d.SeqGBps), units.Bytes(int64(d.FreeBytes)))
		}
	}
	return dir, why
}

func (s *packStep) Enter() {
	u, d := s.w.u, &s.w.D
	if u.B.Packer == nil {
		return
	}
	if err := s.w.Model.Err(); err != nil {
		s.Info.SetText("The model folder cannot be used: " + bridge.Explain(err) + " Go back to step 2.")
		return
	}
	need, err := u.B.Packer.TrunkBytes(d.ModelDir, d.Layers)
	if err != nil {
		s.Info.SetText(bridge.Explain(err))
		return
	}
	s.need = need
	info := fmt.Sprintf("The shared weights of this checkpoint take %s (about a fifth less when packed to save disk space).", units.Bytes(need))
	if s.model != d.ModelDir {
		// a folder shown for another model is not this model's
		s.model = d.ModelDir
		switch {
		case d.TrunkDir != "" && d.TrunkModel == d.ModelDir:
			s.Dir.SetText(d.TrunkDir)
		default:
			if dir, why := suggestTrunkDir(s.w.Machine.Report, need, d.ModelDir, u.B.DataDir); dir != "" {
				s.Dir.SetText(dir)
				info += " " + strings.ToUpper(why[:1]) + why[1:] + "."
			} else if d.ModelDir != "" {
				s.Dir.SetText(bridge.DefaultTrunkDir(filepath.Dir(d.ModelDir), d.ModelDir))
			}
		}
	}
	s.Info.SetText(info)
	s.checked = "" // the model may have changed: check the folder again
	s.dirChanged()
}

// dirChanged checks what the folder typed holds for the model.
func (s *packStep) dirChanged() {
	dir := strings.TrimSpace(s.Dir.Text)
	if s.Packing || dir == s.checked {
		return
	}
	s.checkJob.Cancel()
	s.checked = dir
	s.State = bridge.TrunkCheck{}
	if dir == "" || s.w.u.B.Packer == nil {
		s.showState()
		return
	}
	model := s.w.D.ModelDir
	pk := s.w.u.B.Packer
	var c bridge.TrunkCheck
	s.Status.SetText("Looking at the folder…")
	var job *bridge.Job
	job = bridge.StartJob(s.w.u.do, 1, func(ctx context.Context, _ func(struct{})) error {
		c = pk.Check(model, dir)
		return nil
	}, nil, func(error) {
		// a pack that ended since knows better than this look
		if job != s.checkJob || s.checked != dir || s.w.D.ModelDir != model {
			return
		}
		s.State, s.checkJob = c, nil
		s.showState()
	})
	s.checkJob = job
}

// showState says what the folder holds and what Pack will do, and uses a
// complete trunk of this model.
func (s *packStep) showState() {
	d := &s.w.D
	dir := strings.TrimSpace(s.Dir.Text)
	st := s.State
	s.Bar.SetValue(0)
	switch {
	case st.Status == bridge.TrunkPacked && st.Compressed == d.TrunkCompress:
		d.TrunkDir, d.TrunkModel = dir, d.ModelDir
		s.Bar.SetValue(1)
		s.PackBt.SetText("Packed")
		s.PackBt.Disable()
		s.Status.SetText("This model's shared weights are packed in " + dir + " (" + kindWords(st.Compressed) + ").")
	case st.Status == bridge.TrunkPacked:
		// the other kind still gives the same answers: it is used until
		// it is replaced
		d.TrunkDir, d.TrunkModel = dir, d.ModelDir
		s.Bar.SetValue(1)
		if d.TrunkCompress {
			s.PackBt.SetText("Pack again to save disk space (replaces it)")
		} else {
			s.PackBt.SetText("Pack again without saving disk space (replaces it)")
		}
		s.PackBt.Enable()
		s.Status.SetText("This model's shared weights are packed in " + dir + ", " + kindWords(st.Compressed) +
			". It is used as it is; pack again to replace it.")
	case st.Status == bridge.TrunkPartial && st.Compressed == d.TrunkCompress:
		s.notUsed()
		s.PackBt.SetText("Continue packing")
		s.PackBt.Enable()
		if st.Total > 0 {
			s.Bar.SetValue(float64(st.Done) / float64(st.Total))
		}
		s.Status.SetText(fmt.Sprintf("An interrupted pack of this model is here (%d of %d parts done). Continue picks up where it stopped.", st.Done, st.Total))
	case st.Status == bridge.TrunkPartial:
		s.notUsed()
		s.PackBt.SetText("Start over (drops the interrupted pack)")
		s.PackBt.Enable()
		if st.Total > 0 {
			s.Bar.SetValue(float64(st.Done) / float64(st.Total))
		}
		how := "An interrupted pack of this model without saving disk space is here (%d of %d parts done). Untick \"Save disk space\" to continue it, or start over."
		if st.Compressed {
			how = "An interrupted pack of this model that saves disk space is here (%d of %d parts done). Tick \"Save disk space\" to continue it, or start over."
		}
		s.Status.SetText(fmt.Sprintf(how, st.Done, st.Total))
	case st.Status == bridge.TrunkOther:
		s.notUsed()
		s.PackBt.SetText("Pack again here (replaces it)")
		s.PackBt.Enable()
		// the reason ("3 source files, the checkpoint has 13") is the
		// manifest's: the user needs only what to do (G26)
		s.Status.SetText("This folder holds another model's packed weights, so it will not be used. " +
			"Pack again here to replace it, or choose another folder.")
	case st.Status == bridge.TrunkBroken:
		s.notUsed()
		s.PackBt.SetText("Pack again here (replaces it)")
		s.PackBt.Enable()
		s.Status.SetText("The packed weights in this folder cannot be used (" + st.Why + "). Pack again here to replace it.")
	default:
		s.notUsed()
		s.PackBt.SetText(packLabel)
		s.PackBt.Enable()
		switch {
		case st.Err != nil:
			s.Status.SetText("The model cannot be read: " + bridge.Explain(st.Err))
		default:
			s.Status.SetText("")
		}
	}
	if s.note != "" {
		s.Status.SetText(strings.TrimSpace(s.note + " " + s.Status.Text))
	}
	if s.w.u.wizard == s.w {
		s.w.Changed()
	}
}

// notUsed drops a trunk folder that holds no usable trunk of this model.
func (s *packStep) notUsed() {
	d := &s.w.D
	if d.TrunkModel != d.ModelDir || d.TrunkDir == strings.TrimSpace(s.Dir.Text) {
		d.TrunkDir, d.TrunkModel = "", ""
	}
}

func (s *packStep) Ready() (bool, string) {
	switch {
	case s.Packing:
		return false, "Packing is running. Cancel it or wait until it finishes."
	case s.checkJob != nil:
		return false, "Looking at the folder…"
	case s.State.Status == bridge.TrunkOther:
		return true, "The folder holds another model's packed weights: they will not be used. Without packed weights every layer is held in memory."
	case s.w.D.TrunkDir == "":
		return true, "Not packed: every layer will be held in memory (fine for the demo and partial checkpoints)."
	}
	return true, ""
}

// Toggle starts, continues or cancels packing; for another model's trunk
// it replaces it.
func (s *packStep) Toggle() {
	u := s.w.u
	if s.Packing {
		s.job.Cancel()
		return
	}
	dir := strings.TrimSpace(s.Dir.Text)
	if dir == "" {
		s.Status.SetText("Choose the folder for the packed weights first.")
		return
	}
	st := s.State
	opt := bridge.PackOptions{Compress: s.w.D.TrunkCompress,
		Force: st.Status == bridge.TrunkOther || st.Status == bridge.TrunkBroken ||
			(st.Status == bridge.TrunkPacked || st.Status == bridge.TrunkPartial) && st.Compressed != s.w.D.TrunkCompress}
	s.Packing = true
	s.Compress.Disable()
	s.PackBt.SetText("Cancel packing")
	s.Status.SetText("Packing…")
	s.w.Changed()
	model, layers := s.w.D.ModelDir, s.w.D.Layers
	pk := u.B.Packer
	s.job = bridge.StartJob(u.do, bridge.GaugeHz, func(ctx context.Context, progress func(bridge.PackProgress)) error {
		return pk.Pack(ctx, model, dir, layers, opt, progress)
	}, s.showProgress, func(err error) { s.done(model, dir, opt.Compress, err) })
}

func (s *packStep) showProgress(p bridge.PackProgress) {
	if p.Total > 0 {
		s.Bar.SetValue(float64(p.Done) / float64(p.Total))
	}
	eta := "estimating time left"
	if p.ETA >= 0 && p.Done > 0 {
		eta = "about " + p.ETA.Round(time.Second).String() + " left"
	}
	what := "Packing"
	if p.Checking {
		what = "Checking the parts packed before"
	}
	s.Status.SetText(fmt.Sprintf("%s: %d of %d parts done, %s of %s, %s, %s", what, p.Parts, p.PartsTotal,
		units.Bytes(p.Done), units.Bytes(p.Total), units.PerSec(p.Rate), eta))
}

func (s *packStep) done(model, dir string, compressed bool, err error) {
	s.Packing, s.job = false, nil
	s.checkJob.Cancel()
	s.checkJob = nil
	s.Compress.Enable()
	d := &s.w.D
	switch {
	case err == nil && d.ModelDir == model:
		d.TrunkDir, d.TrunkModel = dir, model
		s.note = ""
		s.State, s.checked = bridge.TrunkCheck{Status: bridge.TrunkPacked, Compressed: compressed}, dir
		s.showState()
		s.Status.SetText("Packed into " + dir + " (" + kindWords(compressed) + ").")
	case errors.Is(err, context.Canceled):
		s.note = "Stopped."
		s.checked = ""
		s.dirChanged()
	default:
		s.note = ""
		if err != nil {
			s.note = bridge.Explain(err)
		}
		s.checked = ""
		s.dirChanged()
	}
	if s.w.u.wizard == s.w {
		s.w.Changed()
	}
}

func (s *packStep) Cancel() {
	s.job.Cancel()
	s.checkJob.Cancel()
}
