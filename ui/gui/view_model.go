package gui

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"k3/storage/hub"
	"k3/storage/units"
	"k3/storage/verify"
	"k3/ui/bridge"
)

// modelStep is wizard step 2: choose the checkpoint folder, or download the
// checkpoint into one, or use the demo model; then verify it. Every folder
// chosen is checked at once (config, every shard's size and header), and
// what is shown about downloads and verification belongs to that folder.
type modelStep struct {
	w    *wizard
	view fyne.CanvasObject

	Dir       *widget.Entry
	Layers    *widget.Entry
	LayersLbl *widget.Label
	LayerMsg  *widget.Label
	Status    *widget.Label
	DemoBt    *widget.Button
	ServerBt  *widget.Button // "Use a server instead…": where the model runs

	// Check is the folder check of the folder typed (nil while it runs).
	Check    *bridge.FolderCheck
	checkJob *bridge.Job
	checkFor string // the folder and layers the check in flight is for

	Token       *widget.Entry
	Revision    *widget.Entry
	DownloadBt  *widget.Button
	RetryBt     *widget.Button
	DlBar       *widget.ProgressBar
	DlStatus    *noteLabel
	DlFiles     *widget.Label
	dlSide      *sideScroll // DlFiles, scrolled sideways; hidden with it
	dlJob       *bridge.Job
	dlDir       string // the folder the download status is about
	Downloading bool
	retrying    bool // Try again now: the cancelled download restarts

	VerifyBt  *widget.Button
	VfBar     *widget.ProgressBar
	VfStatus  *noteLabel
	VfList    *textRows
	Verified  *verify.Report
	vfJob     *bridge.Job
	verifying bool
}

func newModelStep(w *wizard) *modelStep {
	s := &modelStep{w: w}
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
	s.RetryBt = widget.NewButton("Try again now", s.RetryNow)
	s.RetryBt.Hide()
	s.DlBar = widget.NewProgressBar()
	s.DlStatus = newNoteLabel(true)
	s.DlFiles = widget.NewLabel("")
	s.DlFiles.TextStyle = fyne.TextStyle{Monospace: true}
	s.DlFiles.Hide()

	s.VerifyBt = widget.NewButton("Verify the files", s.StartVerify)
	s.VfBar = widget.NewProgressBar()
	s.VfStatus = newNoteLabel(true)
	s.VfList = newTextRows(func() []string {
		if s.Verified == nil {
			return nil
		}
		out := make([]string, len(s.Verified.Files))
		for i, f := range s.Verified.Files {
			out[i] = describeFile(f)
		}
		return out
	})

	var outer *container.Scroll
	page := func() *container.Scroll { return outer }
	s.dlSide = newSideScroll(s.DlFiles, page)
	s.dlSide.Hide()
	folder := container.NewBorder(nil, nil, widget.NewLabel("Model folder"), choose, passWheel(s.Dir, page))
	s.LayersLbl = widget.NewLabel("Layers to use (empty = all)")
	layers := container.NewBorder(nil, nil, s.LayersLbl, nil, passWheel(s.Layers, page))
	dl := widget.NewCard("Download", "", container.NewVBox(
		wrapLabel("From the model hub into the folder above. You can pause and resume at any time, even after closing the app."),
		container.NewBorder(nil, nil, widget.NewLabel("Access token"), nil, passWheel(s.Token, page)),
		container.NewBorder(nil, nil, widget.NewLabel("Version"), nil, passWheel(s.Revision, page)),
		container.NewBorder(nil, nil, nil, s.RetryBt, s.DownloadBt), s.DlBar, s.DlStatus, s.dlSide))
	vf := widget.NewCard("Verify", "", container.NewVBox(
		wrapLabel("Verify checks what the command line checks: every file's size, every shard's header and config.json. The weights themselves are compared with checksums only for a folder k3 downloaded, which records them."),
		s.VerifyBt, s.VfBar, s.VfStatus, s.VfList.Root))
	demo := container.NewBorder(nil, nil, s.DemoBt, nil,
		wrapLabel("A few MB, made here in seconds, so you can try everything: a tiny K3 that knows sayings and coloured shapes, and little else."))
	s.ServerBt = widget.NewButton("Use a server instead…", func() { w.u.showBackendSettings() })
	server := container.NewBorder(nil, nil, s.ServerBt, nil,
		wrapLabel("Run the model on a server (vLLM, SGLang or another k3 serve) and chat with it here."))
	// one scroll for the step: the wheel over the file lists moves the
	// step (G14), the download's lines scroll sideways only
	outer = container.NewVScroll(container.NewVBox(folder, layers, s.LayerMsg, s.Status, demo, server, dl, vf))
	s.view = outer
	return s
}

// setFiles shows the download's file lines; none take no room.
func (s *modelStep) setFiles(text string) {
	setNote(s.DlFiles, text)
	if text == "" {
		s.dlSide.Hide()
	} else {
		s.dlSide.Show()
	}
}

func (s *modelStep) Title() string           { return "The model" }
func (s *modelStep) View() fyne.CanvasObject { return s.view }

// Enter shows the model in use the first time; a download that did not
// finish is offered again when its folder is the one shown.
func (s *modelStep) Enter() {
	d := s.w.D
	pending, rev, layers := s.w.u.N.pending()
	if s.Dir.Text == "" {
		switch {
		case d.ModelDir != "":
			s.Dir.SetText(d.ModelDir)
			if d.Layers > 0 {
				s.Layers.SetText(strconv.Itoa(d.Layers))
			}
		case pending != "":
			s.Dir.SetText(pending)
			s.Revision.SetText(rev)
			if layers > 0 {
				s.Layers.SetText(strconv.Itoa(layers))
			}
		}
	}
	s.dirChanged()
}

// layers returns the layer count typed (0 = all) or an error in plain words.
func (s *modelStep) layers() (int, error) {
	t := strings.TrimSpace(s.Layers.Text)
	if t == "" || t == "all" {
		return 0, nil
	}
	n, err := strconv.Atoi(t)
	if err != nil || n < 1 {
		return 0, errors.New("layers to use must be a whole number from 1 up, or empty for all of them")
	}
	if c := s.Check; c != nil && c.Dir == s.dir() && c.Layers > 0 && n > c.Layers {
		return 0, fmt.Errorf("this model has %d layers: type a number from 1 to %d, or leave the field empty for all of them", c.Layers, c.Layers)
	}
	return n, nil
}

func (s *modelStep) dir() string { return strings.TrimSpace(s.Dir.Text) }

// dirChanged follows the folder and layers typed: status of another folder
// is cleared, and the new folder is checked in the background.
func (s *modelStep) dirChanged() {
	dir := s.dir()
	n, err := s.layers()
	switch {
	case err != nil:
		setNote(s.LayerMsg, err.Error())
	case n > 0:
		setNote(s.LayerMsg, fmt.Sprintf("Only the first %d layers will be used: fine for trying things out, but the text is then NOT the model's.", n))
	default:
		setNote(s.LayerMsg, "")
	}
	if s.Verified != nil && s.Verified.Dir != dir {
		s.Verified = nil
		s.VfList.Refresh()
		s.VfBar.SetValue(0)
		s.VfStatus.SetText("")
	}
	if !s.Downloading && s.dlDir != dir {
		s.showDownloadState(dir)
	}
	key := fmt.Sprintf("%s\x00%d", dir, n)
	if s.Check != nil && s.checkFor == key {
		s.showCheck()
		return
	}
	s.checkJob.Cancel()
	s.Check, s.checkFor = nil, key
	if dir == "" {
		s.Status.SetText("Choose the folder that holds the checkpoint, or a folder to download it into.")
		s.changed()
		return
	}
	s.Status.SetText("Checking the folder…")
	s.changed()
	var c *bridge.FolderCheck
	s.checkJob = bridge.StartJob(s.w.u.do, 1, func(ctx context.Context, _ func(struct{})) error {
		c = bridge.CheckFolder(ctx, dir, n)
		return ctx.Err()
	}, nil, func(err error) {
		if err != nil || s.checkFor != key {
			return // a newer folder was typed
		}
		s.Check, s.checkJob = c, nil
		s.showCheck()
	})
}

func (s *modelStep) showCheck() {
	c := s.Check
	if c.Layers > 0 {
		s.LayersLbl.SetText(fmt.Sprintf("Layers to use (empty = all %d)", c.Layers))
	} else {
		s.LayersLbl.SetText("Layers to use (empty = all)")
	}
	demo, trained := s.w.u.B.IsDemo(c.Dir)
	_, layersErr := s.layers()
	switch {
	case layersErr != nil:
		// more layers than the model has: said once, in the same words
		// under the field and here (issue 27, G15)
		// under the field only (the polish of issue 41: it was there
		// twice, and in the footer, in lower case)
		setNote(s.LayerMsg, bridge.Sentence(layersErr))
		s.Status.SetText("")
	case !c.HasConfig:
		s.Status.SetText("No checkpoint here yet (no config.json). Download it into this folder, or choose another one.")
	case !c.OK():
		s.Status.SetText(c.Summary())
	case demo && trained:
		s.Status.SetText("This is the DEMO model: a tiny Kimi K3 (2.1 million parameters) trained on fortune-cookie sayings and drawings. Everything works; it knows sayings and coloured shapes (attach a drawing with Picture…) and little else.")
	case demo:
		s.Status.SetText("This is a DEMO model: random weights with the K3 layout. Everything works, but its text is not meaningful.")
	default:
		s.Status.SetText(fmt.Sprintf("A checkpoint is here: %d files, %s, every header readable. "+
			"Verify checks that each file is whole; it compares their contents only in a folder k3 downloaded (it keeps their checksums).", len(c.Shards), units.Bytes(c.Bytes)))
	}
	n, err := s.layers()
	if err == nil && c.OK() {
		s.w.D.ModelDir, s.w.D.Layers, s.w.D.Demo = c.Dir, n, demo
	}
	s.changed()
}

// isDemo says whether dir holds the demo model.
func (s *modelStep) isDemo(dir string) bool {
	demo, _ := s.w.u.B.IsDemo(dir)
	return demo
}

func (s *modelStep) changed() {
	if s.w.u.wizard == s.w {
		s.w.Changed()
	}
}

func (s *modelStep) Ready() (bool, string) {
	if _, err := s.layers(); err != nil {
		return false, "The number of layers to use needs changing (see under the field)."
	}
	if s.Downloading {
		return false, "The download is running. Pause it or wait until it finishes."
	}
	c := s.Check
	switch {
	case s.dir() == "":
		return false, "Choose a folder with the checkpoint, download it, or use the demo model."
	case c == nil:
		return false, "Checking the folder…"
	case !c.HasConfig:
		return false, "Choose a folder with the checkpoint, download it, or use the demo model."
	case !c.OK():
		return false, "This folder's checkpoint cannot be used yet: " + c.Summary()
	case s.Verified != nil && s.Verified.Dir == c.Dir && !s.Verified.Complete && !s.isDemo(c.Dir):
		return true, "Some files are missing or wrong (see Verify); the run will fail on them."
	}
	return true, ""
}

// Err is the cause the later steps repeat when this step's folder cannot
// be used (nil when it can, or before it was checked).
func (s *modelStep) Err() error {
	if s.Check == nil || s.Check.Dir != s.w.D.ModelDir {
		return nil
	}
	return s.Check.Err()
}

// UseDemo writes the demo model (if needed) and selects it.
func (s *modelStep) UseDemo() {
	u := s.w.u
	if u.B.MakeDemo == nil {
		return
	}
	dir := u.demoDir()
	s.DemoBt.Disable()
	s.Status.SetText("Writing the demo model…")
	mk := u.B.MakeDemo
	bridge.StartJob(u.do, 1, func(context.Context, func(struct{})) error { return mk(dir) }, nil, func(err error) {
		s.DemoBt.Enable()
		if err != nil {
			s.Status.SetText(bridge.Explain(err))
			return
		}
		s.Layers.SetText("")
		s.Dir.SetText(dir)
		s.dirChanged()
	})
}

// showDownloadState shows what is known about a download into dir: one
// that did not finish there is offered to resume; another folder's status
// is not shown.
func (s *modelStep) showDownloadState(dir string) {
	s.dlDir = dir
	s.DlBar.SetValue(0)
	s.setFiles("")
	s.RetryBt.Hide()
	if pending, _, _ := s.w.u.N.pending(); dir != "" && pending == dir {
		s.DlStatus.SetText("A download into this folder did not finish. Press Resume to continue where it stopped.")
		s.DownloadBt.SetText("Resume download")
		return
	}
	s.DlStatus.SetText("")
	s.DownloadBt.SetText("Download into this folder")
}

// ToggleDownload starts, pauses or resumes the download.
func (s *modelStep) ToggleDownload() {
	if s.Downloading {
		s.dlJob.Cancel()
		return
	}
	u := s.w.u
	dir := s.dir()
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
	// noted at once (it is not the model in use): a download cut by closing
	// the app is offered again
	u.N.setPending(req.Dest, req.Revision, req.Layers)
	s.Downloading, s.dlDir = true, dir
	s.DownloadBt.SetText("Pause")
	s.RetryBt.Hide()
	s.DlStatus.SetText("Connecting to the model hub…")
	s.changed()
	dl := u.B.Downloader
	s.dlJob = bridge.StartJob(u.do, bridge.GaugeHz, func(ctx context.Context, progress func(hub.Event)) error {
		return dl.Download(ctx, req, progress)
	}, s.showDownload, s.downloadDone)
}

// RetryNow ends the wait before the next attempt and tries at once.
func (s *modelStep) RetryNow() {
	if !s.Downloading {
		return
	}
	s.retrying = true
	s.dlJob.Cancel()
}

func (s *modelStep) showDownload(ev hub.Event) {
	sn := ev.Snap
	if sn.Total > 0 {
		s.DlBar.SetValue(float64(sn.Done) / float64(sn.Total))
	}
	switch ev.Kind {
	case hub.EventRetry:
		what := "the model hub"
		if ev.File != "" {
			what = ev.File
		}
		s.DlStatus.SetText(fmt.Sprintf("%s (attempt %d). Trying again in %s; finished files are kept.",
			strings.TrimSuffix(describeRetry(what, ev.Err), "."), ev.Attempt, ev.Wait.Round(time.Second)))
		s.RetryBt.Show()
		return
	case hub.EventNote:
		s.DlStatus.SetText(ev.Message)
		return
	}
	s.RetryBt.Hide()
	if sn.Total == 0 {
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
	s.setFiles(strings.Join(lines, "\n"))
}

// describeRetry says in plain words why an attempt failed.
func describeRetry(what string, err error) string {
	var ue *bridge.UnreachableError
	if errors.As(err, &ue) {
		return fmt.Sprintf("Cannot reach the model hub (%s): %v", ue.Host, ue.Err)
	}
	if err == nil {
		return what + ": the attempt failed"
	}
	return fmt.Sprintf("%s: the connection failed (%s)", what, strings.TrimSuffix(bridge.Explain(err), "."))
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

func (s *modelStep) downloadDone(err error) {
	u := s.w.u
	s.Downloading, s.dlJob = false, nil
	s.RetryBt.Hide()
	if s.retrying && errors.Is(err, context.Canceled) {
		s.retrying = false
		s.ToggleDownload()
		return
	}
	s.retrying = false
	switch {
	case err == nil:
		u.N.setPending("", "", 0)
		s.DlBar.SetValue(1)
		s.DownloadBt.SetText("Download into this folder")
		s.DlStatus.SetText("Downloaded and verified.")
		s.setFiles("")
	case errors.Is(err, context.Canceled):
		s.DownloadBt.SetText("Resume download")
		s.DlStatus.SetText("Paused. Finished files and partial files are kept; Resume continues where it stopped, even after a restart.")
	default:
		s.DownloadBt.SetText("Resume download")
		s.DlStatus.SetText(bridge.Explain(err))
	}
	s.Check, s.checkFor = nil, "" // the folder changed: check it again
	s.dirChanged()
}

// StartVerify checks the folder's files in the background.
func (s *modelStep) StartVerify() {
	u := s.w.u
	if s.verifying {
		s.vfJob.Cancel()
		return
	}
	dir := s.dir()
	if s.isDemo(dir) {
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
	}, s.VfBar.SetValue, func(err error) { s.verifyDone(dir, rep, err) })
}

func (s *modelStep) verifyDone(dir string, rep *verify.Report, err error) {
	s.verifying, s.vfJob = false, nil
	s.VerifyBt.SetText("Verify the files")
	if dir != s.dir() {
		return // the result is another folder's
	}
	if err != nil {
		s.VfStatus.SetText(bridge.Explain(err))
		return
	}
	s.Verified = rep
	s.VfBar.SetValue(1)
	s.VfList.Refresh()
	s.VfStatus.SetText(describeVerify(rep))
	s.changed()
}

// describeVerify summarises a verification in plain words.
func describeVerify(r *verify.Report) string {
	if r.Complete {
		if r.Hashed {
			return fmt.Sprintf("All %d required files are here and right (sizes, headers and checksums checked, %s).", r.Required, units.Bytes(r.Bytes))
		}
		// what `k3 verify` checks: a damaged byte in the weights passes
		return fmt.Sprintf("All %d required files are here, of the right size, and k3 reads every header (%s). "+
			"Their contents were not compared with checksums.", r.Required, units.Bytes(r.Bytes))
	}
	var parts []string
	if r.Missing > 0 {
		parts = append(parts, fmt.Sprintf("%d missing", r.Missing))
	}
	if r.WrongSize > 0 {
		parts = append(parts, fmt.Sprintf("%d incomplete or the wrong size", r.WrongSize))
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
	what := map[verify.Status]string{
		verify.StatusOK: "right size", verify.StatusMissing: "missing", verify.StatusWrongSize: "the wrong size",
		verify.StatusHashMismatch: "the wrong checksum: download it again", verify.StatusNoHash: "no checksum recorded",
		verify.StatusPartial: "partly downloaded: Resume finishes it", verify.StatusExtra: "not part of the model",
		verify.StatusNotNeeded: "not needed for the layers chosen", verify.StatusUnreadable: "cannot be read",
		verify.StatusKnown: "part of the download",
	}[f.Status]
	if f.Status == verify.StatusWrongSize && f.Want > 0 && f.Size >= 0 {
		what = fmt.Sprintf("%s of %s: download it again", units.Bytes(f.Size), units.Bytes(f.Want))
	}
	if f.Detail != "" && strings.HasPrefix(f.Detail, f.Name) {
		return mark + " " + f.Detail // a sentence of the folder check, naming the file
	}
	return fmt.Sprintf("%s %s — %s", mark, f.Name, what)
}

func (s *modelStep) Cancel() {
	s.dlJob.Cancel()
	s.vfJob.Cancel()
	s.checkJob.Cancel()
}
