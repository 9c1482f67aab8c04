package gui

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"k3/storage/hub"
	"k3/storage/verify"
	"k3/ui/bridge"
)

// ModelStep is wizard step 2: choose the checkpoint folder, or download the
// checkpoint into one, or use the demo model; then verify it.
type ModelStep struct {
	w    *Wizard
	view fyne.CanvasObject

	Dir       *widget.Entry
	Layers    *widget.Entry
	LayersLbl *widget.Label
	LayerMsg  *widget.Label
	Status    *widget.Label
	DemoBt    *widget.Button

	Token       *widget.Entry
	Revision    *widget.Entry
	DownloadBt  *widget.Button
	DlBar       *widget.ProgressBar
	DlStatus    *widget.Label
	DlFiles     *widget.Label
	dlJob       *bridge.Job
	Downloading bool

	VerifyBt  *widget.Button
	VfBar     *widget.ProgressBar
	VfStatus  *widget.Label
	VfList    *widget.List
	Verified  *verify.Report
	vfJob     *bridge.Job
	verifying bool
}

func newModelStep(w *Wizard) *ModelStep {
	s := &ModelStep{w: w}
	u := w.u
	s.Dir = widget.NewEntry()
	s.Dir.SetPlaceHolder("the folder that holds (or will hold) the Kimi K3 files")
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
	s.LayerMsg.Hide()
	s.Status = wrapLabel("")
	s.DemoBt = widget.NewButton("Use the DEMO model instead", s.UseDemo)

	s.Token = widget.NewPasswordEntry()
	s.Token.SetPlaceHolder("only if the hub asks for one; never saved")
	s.Revision = widget.NewEntry()
	s.Revision.SetPlaceHolder("main (the latest)")
	s.DownloadBt = widget.NewButton("Download into this folder", s.ToggleDownload)
	s.DlBar = widget.NewProgressBar()
	s.DlStatus = wrapLabel("")
	s.DlFiles = widget.NewLabel("")
	s.DlFiles.TextStyle = fyne.TextStyle{Monospace: true}
	s.DlFiles.Hide()

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

	folder := container.NewBorder(nil, nil, widget.NewLabel("Model folder"), choose, s.Dir)
	s.LayersLbl = widget.NewLabel("Layers to use (empty = all)")
	layers := container.NewBorder(nil, nil, s.LayersLbl, nil, s.Layers)
	// a list in a box is one row high: the spacer gives it room for several
	listRoom := canvas.NewRectangle(color.Transparent)
	listRoom.SetMinSize(fyne.NewSize(0, 180))
	dl := widget.NewCard("Download", "", container.NewVBox(
		wrapLabel("From the model hub into the folder above. You can pause and resume at any time, even after closing the app."),
		container.NewBorder(nil, nil, widget.NewLabel("Access token"), nil, s.Token),
		container.NewBorder(nil, nil, widget.NewLabel("Version"), nil, s.Revision),
		s.DownloadBt, s.DlBar, s.DlStatus, container.NewHScroll(s.DlFiles)))
	vf := widget.NewCard("Verify", "", container.NewVBox(
		wrapLabel("Checks every file's size, and its checksum when the download recorded one."),
		s.VerifyBt, s.VfBar, s.VfStatus, container.NewStack(listRoom, s.VfList)))
	demo := container.NewBorder(nil, nil, s.DemoBt, nil,
		wrapLabel("A few MB, made here in seconds, so you can try everything; its text is not meaningful."))
	s.view = scroll(container.NewVBox(folder, layers, s.LayerMsg, s.Status, demo, dl, vf))
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
		setNote(s.LayerMsg, err.Error())
	case n > 0:
		setNote(s.LayerMsg, fmt.Sprintf("Only the first %d layers will be used: fine for trying things out, but the text is then NOT the model's.", n))
	default:
		setNote(s.LayerMsg, "")
	}
	switch {
	case dir == "":
		s.Status.SetText("Choose the folder that holds the checkpoint, or a folder to download it into.")
	case bridge.IsDemoModel(dir):
		s.Status.SetText("This is the DEMO model: random weights with the K3 layout. Everything works, but its text is not meaningful.")
	case hasConfig(dir):
		s.Status.SetText("A checkpoint is here. Verify it before the first run.")
	default:
		s.Status.SetText("No checkpoint here yet (no config.json). Download it into this folder, or choose another one.")
	}
	if err == nil && hasConfig(dir) {
		s.w.u.S.ModelDir = dir
		s.w.u.S.Layers = n
		s.w.u.S.Demo = bridge.IsDemoModel(dir)
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
	if s.Verified != nil && s.Verified.Dir == dir && !s.Verified.Complete && !bridge.IsDemoModel(dir) {
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
				s.Status.SetText(bridge.Explain(err))
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
		s.dlJob.Cancel()
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
	req := bridge.DownloadRequest{Dest: dir, Revision: strings.TrimSpace(s.Revision.Text), Layers: n, Token: s.Token.Text}
	u.S.DownloadDest, u.S.DownloadRevision, u.S.DownloadLayers = req.Dest, req.Revision, req.Layers
	u.SaveSettings()
	s.Downloading = true
	s.DownloadBt.SetText("Pause")
	s.DlStatus.SetText("Starting…")
	s.w.Changed()
	dl := u.B.Downloader
	s.dlJob = bridge.StartJob(u.do, bridge.GaugeHz, func(ctx context.Context, progress func(hub.Event)) error {
		return dl.Download(ctx, req, progress)
	}, s.showDownload, s.downloadDone)
}

func (s *ModelStep) showDownload(ev hub.Event) {
	sn := ev.Snap
	if sn.Total > 0 {
		s.DlBar.SetValue(float64(sn.Done) / float64(sn.Total))
	}
	switch ev.Kind {
	case hub.EventRetry:
		s.DlStatus.SetText(fmt.Sprintf("%s: the connection failed (%s); trying again in %s.", ev.File, bridge.Explain(ev.Err), ev.Wait.Round(time.Second)))
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
		lines = append(lines, fmt.Sprintf("%-44s %6.1f%%  %7.1f MB/s", f.Name, 100*float64(f.Done)/float64(max(f.Total, 1)), f.Rate/1e6))
	}
	setNote(s.DlFiles, strings.Join(lines, "\n"))
}

// describeSnapshot is the download's one-line summary.
func describeSnapshot(sn hub.Snapshot) string {
	eta := "estimating time left"
	if sn.ETA >= 0 {
		eta = "about " + sn.ETA.Round(time.Second).String() + " left"
	}
	return fmt.Sprintf("%.2f of %.2f GB, %d of %d files, %.1f MB/s, %s", float64(sn.Done)/1e9, float64(sn.Total)/1e9,
		sn.FilesDone, sn.FilesTotal, sn.Rate/1e6, eta)
}

func (s *ModelStep) downloadDone(err error) {
	u := s.w.u
	s.Downloading, s.dlJob = false, nil
	switch {
	case err == nil:
		u.S.DownloadDest, u.S.DownloadRevision, u.S.DownloadLayers = "", "", 0
		u.SaveSettings()
		s.DlBar.SetValue(1)
		s.DownloadBt.SetText("Download into this folder")
		s.DlStatus.SetText("Downloaded and verified.")
		setNote(s.DlFiles, "")
	case errors.Is(err, context.Canceled):
		s.DownloadBt.SetText("Resume download")
		s.DlStatus.SetText("Paused. Finished files and partial files are kept; Resume continues where it stopped, even after a restart.")
	default:
		s.DownloadBt.SetText("Resume download")
		s.DlStatus.SetText(bridge.Explain(err))
	}
	s.dirChanged()
}

// StartVerify checks the folder's files in the background.
func (s *ModelStep) StartVerify() {
	u := s.w.u
	if s.verifying {
		s.vfJob.Cancel()
		return
	}
	dir := strings.TrimSpace(s.Dir.Text)
	if bridge.IsDemoModel(dir) {
		s.VfStatus.SetText("The demo model was generated here: there is nothing to verify.")
		return
	}
	n, _ := s.layers()
	if u.B.Verifier == nil || dir == "" {
		return
	}
	s.verifying = true
	s.VerifyBt.SetText("Cancel verification")
	s.VfStatus.SetText("Checking…")
	vf := u.B.Verifier
	var rep *verify.Report
	s.vfJob = bridge.StartJob(u.do, bridge.GaugeHz, func(ctx context.Context, progress func(float64)) error {
		var err error
		rep, err = vf.Verify(ctx, dir, n, func(done, total int64) {
			if total > 0 {
				progress(float64(done) / float64(total))
			}
		})
		return err
	}, s.VfBar.SetValue, func(err error) { s.verifyDone(rep, err) })
}

func (s *ModelStep) verifyDone(rep *verify.Report, err error) {
	s.verifying, s.vfJob = false, nil
	s.VerifyBt.SetText("Verify the files")
	if err != nil {
		s.VfStatus.SetText(bridge.Explain(err))
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
		return fmt.Sprintf("All %d required files are here and right (%s checked, %.1f GB).", r.Required, what, float64(r.Bytes)/1e9)
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
	s.dlJob.Cancel()
	s.vfJob.Cancel()
}
