package gui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"k3/engine/synth"
	"k3/storage/hub"
	"k3/storage/units"
	"k3/storage/verify"
)

// ModelStep is wizard step 2: choose the checkpoint folder, or download the
// checkpoint into one, or use the demo model; then verify it.
type ModelStep struct {
	w    *Wizard
	view fyne.CanvasObject

	Dir      *widget.Entry
	Layers   *widget.Entry
	LayerMsg *widget.Label
	Status   *widget.Label
	DemoBt   *widget.Button

	Token       *widget.Entry
	Revision    *widget.Entry
	DownloadBt  *widget.Button
	DlBar       *widget.ProgressBar
	DlStatus    *widget.Label
	DlFiles     *widget.Label
	dlCancel    context.CancelFunc
	Downloading bool

	VerifyBt  *widget.Button
	VfBar     *widget.ProgressBar
	VfStatus  *widget.Label
	VfList    *widget.List
	Verified  *verify.Report
	vfCancel  context.CancelFunc
	verifying bool
}

func newModelStep(w *Wizard) *ModelStep {
	s := &ModelStep{w: w}
	u := w.u
	s.Dir = widget.NewEntry()
	s.Dir.SetPlaceHolder("/path/to/Kimi-K3 (the folder with config.json and the .safetensors shards)")
	s.Dir.OnChanged = func(string) { s.dirChanged() }
	choose := widget.NewButton("Choose folder…", func() {
		dialog.ShowFolderOpen(func(l fyne.ListableURI, err error) {
			if err == nil && l != nil {
				s.Dir.SetText(l.Path())
			}
		}, u.Win)
	})
	s.Layers = widget.NewEntry()
	s.Layers.SetPlaceHolder("all")
	s.Layers.OnChanged = func(string) { s.dirChanged() }
	s.LayerMsg = wrapLabel("")
	s.Status = wrapLabel("")
	s.DemoBt = widget.NewButton("Use the DEMO model instead (a few MB, made here in seconds; its text is not meaningful)", s.UseDemo)

	s.Token = widget.NewPasswordEntry()
	s.Token.SetPlaceHolder("access token (only if the hub asks for one; never saved)")
	s.Revision = widget.NewEntry()
	s.Revision.SetPlaceHolder("main")
	s.DownloadBt = widget.NewButton("Download into this folder", s.ToggleDownload)
	s.DlBar = widget.NewProgressBar()
	s.DlStatus = wrapLabel("")
	s.DlFiles = widget.NewLabel("")
	s.DlFiles.TextStyle = fyne.TextStyle{Monospace: true}

	s.VerifyBt = widget.NewButton("Verify the files", s.StartVerify)
	s.VfBar = widget.NewProgressBar()
	s.VfStatus = wrapLabel("")
	s.VfList = widget.NewList(func() int {
		if s.Verified == nil {
			return 0
		}
		return len(s.Verified.Files)
	}, func() fyne.CanvasObject { return widget.NewLabel("") }, func(i widget.ListItemID, o fyne.CanvasObject) {
		f := s.Verified.Files[i]
		o.(*widget.Label).SetText(describeFile(f))
	})

	folder := container.NewBorder(nil, nil, widget.NewLabel("Checkpoint folder"), choose, s.Dir)
	layers := container.NewBorder(nil, nil, widget.NewLabel("Layers to use (empty = all 93)"), nil, s.Layers)
	dl := widget.NewCard("Download", "from the model hub into the folder above; pause and resume any time, even after closing the app",
		container.NewVBox(
			container.NewBorder(nil, nil, widget.NewLabel("Token"), nil, s.Token),
			container.NewBorder(nil, nil, widget.NewLabel("Revision"), nil, s.Revision),
			s.DownloadBt, s.DlBar, s.DlStatus, s.DlFiles))
	vf := widget.NewCard("Verify", "every file's size (and checksum when the download recorded one)",
		container.NewBorder(container.NewVBox(s.VerifyBt, s.VfBar, s.VfStatus), nil, nil, nil, s.VfList))
	vfList := container.NewGridWrap(fyne.NewSize(560, 260), vf)
	s.view = scroll(container.NewVBox(folder, layers, s.LayerMsg, s.Status, s.DemoBt,
		container.NewGridWithColumns(2, dl, vfList)))
	return s
}

func (s *ModelStep) Title() string           { return "The model" }
func (s *ModelStep) View() fyne.CanvasObject { return s.view }

func (s *ModelStep) Enter() {
	st := s.w.u.S
	if s.Dir.Text == "" {
		switch {
		case st.DownloadDest != "":
			s.Dir.SetText(st.DownloadDest)
			s.Revision.SetText(st.DownloadRevision)
			if st.DownloadLayers > 0 {
				s.Layers.SetText(strconv.Itoa(st.DownloadLayers))
			}
			s.DlStatus.SetText("A download into this folder did not finish. Press Resume to continue where it stopped.")
			s.DownloadBt.SetText("Resume download")
		case st.ModelDir != "":
			s.Dir.SetText(st.ModelDir)
			if st.Layers > 0 {
				s.Layers.SetText(strconv.Itoa(st.Layers))
			}
		}
	}
	s.dirChanged()
}

// layers returns the layer count typed (0 = all) or an error in plain words.
func (s *ModelStep) layers() (int, error) {
	t := strings.TrimSpace(s.Layers.Text)
	if t == "" || t == "all" {
		return 0, nil
	}
	n, err := strconv.Atoi(t)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("layers must be a whole number (or empty for all)")
	}
	return n, nil
}

func hasConfig(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "config.json"))
	return dir != "" && err == nil
}

func (s *ModelStep) dirChanged() {
	dir := strings.TrimSpace(s.Dir.Text)
	n, err := s.layers()
	switch {
	case err != nil:
		s.LayerMsg.SetText(err.Error())
	case n > 0:
		s.LayerMsg.SetText(fmt.Sprintf("Only the first %d layers will be used: fine for trying things out, but the text is then NOT the model's.", n))
	default:
		s.LayerMsg.SetText("")
	}
	switch {
	case dir == "":
		s.Status.SetText("Choose the folder that holds the checkpoint, or a folder to download it into.")
	case synth.IsDemo(dir):
		s.Status.SetText("This is the DEMO model: random weights with the K3 layout. Everything works, but its text is not meaningful.")
	case hasConfig(dir):
		s.Status.SetText("A checkpoint is here. Verify it before the first run.")
	default:
		s.Status.SetText("No checkpoint here yet (no config.json). Download it into this folder, or choose another one.")
	}
	if err == nil && hasConfig(dir) {
		s.w.u.S.ModelDir = dir
		s.w.u.S.Layers = n
		s.w.u.S.Demo = synth.IsDemo(dir)
		s.w.u.SaveSettings()
	}
	if s.w.u.Wizard == s.w {
		s.w.Changed()
	}
}

func (s *ModelStep) Ready() (bool, string) {
	if _, err := s.layers(); err != nil {
		return false, err.Error()
	}
	if s.Downloading {
		return false, "The download is running. Pause it or wait until it finishes."
	}
	dir := strings.TrimSpace(s.Dir.Text)
	if !hasConfig(dir) {
		return false, "Choose a folder with the checkpoint, download it, or use the demo model."
	}
	if s.Verified != nil && s.Verified.Dir == dir && !s.Verified.Complete && !synth.IsDemo(dir) {
		return true, "Some files are missing or wrong (see Verify); the run will fail on them."
	}
	return true, ""
}

// UseDemo writes the demo model (if needed) and selects it.
func (s *ModelStep) UseDemo() {
	u := s.w.u
	if u.B.MakeDemo == nil {
		return
	}
	dir := u.demoDir()
	s.DemoBt.Disable()
	s.Status.SetText("Writing the demo model…")
	go func() {
		err := u.B.MakeDemo(dir)
		u.do(func() {
			s.DemoBt.Enable()
			if err != nil {
				s.Status.SetText(Explain(err))
				return
			}
			s.Layers.SetText("")
			s.Dir.SetText(dir)
			s.dirChanged()
		})
	}()
}

// ToggleDownload starts, pauses or resumes the download.
func (s *ModelStep) ToggleDownload() {
	if s.Downloading {
		if s.dlCancel != nil {
			s.dlCancel()
		}
		return
	}
	u := s.w.u
	dir := strings.TrimSpace(s.Dir.Text)
	n, err := s.layers()
	if err != nil {
		s.DlStatus.SetText(err.Error())
		return
	}
	if dir == "" {
		s.DlStatus.SetText("Choose the folder to download into first.")
		return
	}
	if u.B.Downloader == nil {
		return
	}
	req := DownloadRequest{Dest: dir, Revision: strings.TrimSpace(s.Revision.Text), Layers: n, Token: s.Token.Text}
	u.S.DownloadDest, u.S.DownloadRevision, u.S.DownloadLayers = req.Dest, req.Revision, req.Layers
	u.SaveSettings()
	ctx, cancel := context.WithCancel(context.Background())
	s.dlCancel, s.Downloading = cancel, true
	s.DownloadBt.SetText("Pause")
	s.DlStatus.SetText("Starting…")
	s.w.Changed()
	lim := newLimiter(GaugeHz)
	go func() {
		err := u.B.Downloader.Download(ctx, req, func(ev hub.Event) {
			final := ev.Kind == hub.EventDone || ev.Kind == hub.EventRetry || ev.Kind == hub.EventNote
			if final || lim.ok() {
				u.do(func() { s.showDownload(ev) })
			}
		})
		u.do(func() { s.downloadDone(err) })
	}()
}

func (s *ModelStep) showDownload(ev hub.Event) {
	sn := ev.Snap
	if sn.Total > 0 {
		s.DlBar.SetValue(float64(sn.Done) / float64(sn.Total))
	}
	switch ev.Kind {
	case hub.EventRetry:
		s.DlStatus.SetText(fmt.Sprintf("%s: the connection failed (%s); trying again in %s.", ev.File, Explain(ev.Err), ev.Wait.Round(time.Second)))
		return
	case hub.EventNote:
		s.DlStatus.SetText(ev.Message)
		return
	}
	s.DlStatus.SetText(describeSnapshot(sn))
	var lines []string
	for i, f := range sn.Active() {
		if i == 6 {
			break
		}
		lines = append(lines, fmt.Sprintf("%-44s %6.1f%%  %12s", f.Name, 100*float64(f.Done)/float64(max(f.Total, 1)), units.PerSec(f.Rate)))
	}
	s.DlFiles.SetText(strings.Join(lines, "\n"))
}

// describeSnapshot is the download's one-line summary.
func describeSnapshot(sn hub.Snapshot) string {
	return fmt.Sprintf("%s of %s, %d of %d files, %s, %s", units.Bytes(sn.Done), units.Bytes(sn.Total),
		sn.FilesDone, sn.FilesTotal, units.PerSec(sn.Rate), timeLeft(sn.ETA))
}

// timeLeft renders an ETA (-1: unknown) for a progress line.
func timeLeft(eta time.Duration) string {
	if eta < 0 {
		return "estimating time left"
	}
	return "about " + eta.Round(time.Second).String() + " left"
}

func (s *ModelStep) downloadDone(err error) {
	u := s.w.u
	s.Downloading, s.dlCancel = false, nil
	switch {
	case err == nil:
		u.S.DownloadDest, u.S.DownloadRevision, u.S.DownloadLayers = "", "", 0
		u.SaveSettings()
		s.DlBar.SetValue(1)
		s.DownloadBt.SetText("Download into this folder")
		s.DlStatus.SetText("Downloaded and verified.")
		s.DlFiles.SetText("")
	case errors.Is(err, context.Canceled):
		s.DownloadBt.SetText("Resume download")
		s.DlStatus.SetText("Paused. Finished files and partial files are kept; Resume continues where it stopped, even after a restart.")
	default:
		s.DownloadBt.SetText("Resume download")
		s.DlStatus.SetText(Explain(err))
	}
	s.dirChanged()
}

// StartVerify checks the folder's files in the background.
func (s *ModelStep) StartVerify() {
	u := s.w.u
	if s.verifying {
		if s.vfCancel != nil {
			s.vfCancel()
		}
		return
	}
	dir := strings.TrimSpace(s.Dir.Text)
	if synth.IsDemo(dir) {
		s.VfStatus.SetText("The demo model was generated here: there is nothing to verify.")
		return
	}
	n, _ := s.layers()
	if u.B.Verifier == nil || dir == "" {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.vfCancel, s.verifying = cancel, true
	s.VerifyBt.SetText("Cancel verification")
	s.VfStatus.SetText("Checking…")
	lim := newLimiter(GaugeHz)
	go func() {
		rep, err := u.B.Verifier.Verify(ctx, dir, n, func(done, total int64) {
			if lim.ok() && total > 0 {
				u.do(func() { s.VfBar.SetValue(float64(done) / float64(total)) })
			}
		})
		u.do(func() { s.verifyDone(rep, err) })
	}()
}

func (s *ModelStep) verifyDone(rep *verify.Report, err error) {
	s.verifying, s.vfCancel = false, nil
	s.VerifyBt.SetText("Verify the files")
	if err != nil {
		s.VfStatus.SetText(Explain(err))
		return
	}
	s.Verified = rep
	s.VfBar.SetValue(1)
	s.VfList.Refresh()
	s.VfStatus.SetText(describeVerify(rep))
	s.w.Changed()
}

// describeVerify summarises a verification in plain words.
func describeVerify(r *verify.Report) string {
	if r.Complete {
		what := "sizes"
		if r.Hashed {
			what = "sizes and checksums"
		}
		return fmt.Sprintf("All %d required files are here and right (%s checked, %s).", r.Required, what, units.Bytes(r.Bytes))
	}
	var parts []string
	if r.Missing > 0 {
		parts = append(parts, fmt.Sprintf("%d missing", r.Missing))
	}
	if r.WrongSize > 0 {
		parts = append(parts, fmt.Sprintf("%d with the wrong size", r.WrongSize))
	}
	if r.HashBad > 0 {
		parts = append(parts, fmt.Sprintf("%d with the wrong checksum", r.HashBad))
	}
	if r.Partial > 0 {
		parts = append(parts, fmt.Sprintf("%d partly downloaded", r.Partial))
	}
	if r.Unreadable > 0 {
		parts = append(parts, fmt.Sprintf("%d unreadable", r.Unreadable))
	}
	return fmt.Sprintf("%d of %d required files are right; %s. Press Download (or Resume) to fetch just those files again.",
		r.OK, r.Required, strings.Join(parts, ", "))
}

// describeFile is one line of the per-file results.
func describeFile(f verify.FileResult) string {
	mark := "✗"
	switch f.Status {
	case verify.StatusOK:
		mark = "✓"
	case verify.StatusExtra, verify.StatusKnown, verify.StatusNotNeeded:
		mark = "·"
	}
	line := fmt.Sprintf("%s %s — %s", mark, f.Name, f.Status)
	if f.Detail != "" {
		line += " (" + f.Detail + ")"
	}
	return line
}

func (s *ModelStep) Cancel() {
	if s.dlCancel != nil {
		s.dlCancel()
	}
	if s.vfCancel != nil {
		s.vfCancel()
	}
}
