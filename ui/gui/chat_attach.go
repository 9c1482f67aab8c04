package gui

import (
	"bytes"
	"fmt"
	"image"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"k3/ui/bridge"
)

// maxPictureFile is the largest picture file the app reads (as k3 serve).
const maxPictureFile = 32 << 20

// pictureExts are the picture files the app takes.
var pictureExts = []string{".png", ".jpg", ".jpeg", ".gif", ".webp"}

// thumbSize is a thumbnail's side in a message; pending pictures are
// smaller, beside the message box.
const (
	thumbSize   = 120
	pendingSize = 48
)

// newAttachButton is the button that picks a picture for the next message;
// the window takes pictures dropped on it too.
func (v *chatView) newAttachButton() *widget.Button {
	v.u.Win.SetOnDropped(v.dropped)
	return widget.NewButtonWithIcon("Picture…", theme.FileImageIcon(), v.pickPicture)
}

// pickPicture opens a picture file and attaches it to the next message.
func (v *chatView) pickPicture() {
	d := dialog.NewFileOpen(func(r fyne.URIReadCloser, err error) {
		if err != nil || r == nil {
			return
		}
		defer r.Close()
		v.attachPicture(r)
	}, v.u.Win)
	d.SetFilter(storage.NewExtensionFileFilter(pictureExts))
	d.Show()
}

// dropped attaches the picture files dropped on the window.
func (v *chatView) dropped(_ fyne.Position, uris []fyne.URI) {
	for _, u := range uris {
		if !v.attachFile(u.Path()) {
			return // the notice says why
		}
	}
}

// attachFile attaches the picture file at path; false (the notice says
// why) when it is not one k3 takes.
func (v *chatView) attachFile(path string) bool {
	if !isPictureName(path) {
		v.Notice.SetText(fmt.Sprintf("%s is not a picture k3 reads: it takes PNG, JPEG, GIF and WebP files.", filepath.Base(path)))
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		v.Notice.SetText(fmt.Sprintf("The picture %s could not be opened.", filepath.Base(path)))
		return false
	}
	defer f.Close()
	return v.attachPicture(f)
}

// attachPicture reads a picture and says what happened in plain words.
func (v *chatView) attachPicture(r io.Reader) bool {
	if why := v.picturesRefused(); why != "" {
		v.Notice.SetText(why)
		return false
	}
	data, err := io.ReadAll(io.LimitReader(r, maxPictureFile+1))
	if err != nil {
		v.Notice.SetText("The picture could not be read.")
		return false
	}
	if len(data) > maxPictureFile {
		v.Notice.SetText("That picture file is larger than 32 MB; choose a smaller one.")
		return false
	}
	what, err := v.AttachPicture(data)
	if err != nil {
		v.Notice.SetText(sentence(err.Error()))
		return false
	}
	v.Notice.SetText("")
	v.Phase.SetText(what + " attached: " + v.PictureNote())
	v.showPending()
	v.showEstimate() // what the picture adds to the message's cost
	return true
}

// picturesRefused is why the model in use cannot take pictures ("": it
// can, or a server decides).
func (v *chatView) picturesRefused() string {
	if v.u.S.Backend == bridge.BackendServer {
		return ""
	}
	return bridge.PicturesRefused(v.u.S.ModelDir)
}

// pastePictures attaches the picture files a pasted text names, one per
// line (a path or a file:// address, as file managers copy them): Fyne's
// clipboard holds text only, so a copied image itself cannot be pasted,
// but a copied picture file can. It reports whether the text was that.
func (v *chatView) pastePictures(text string) bool {
	var paths []string
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		p, ok := picturePath(line)
		if !ok {
			return false
		}
		paths = append(paths, p)
	}
	for _, p := range paths {
		if !v.attachFile(p) {
			break
		}
	}
	return true
}

// picturePath is the picture file a line of text names, if it does.
func picturePath(line string) (string, bool) {
	t := strings.TrimSpace(line)
	if u, err := url.Parse(t); err == nil && u.Scheme == "file" {
		t = u.Path
	}
	if !filepath.IsAbs(t) || !isPictureName(t) {
		return "", false
	}
	if st, err := os.Stat(t); err != nil || !st.Mode().IsRegular() {
		return "", false
	}
	return t, true
}

func isPictureName(path string) bool {
	return slices.Contains(pictureExts, strings.ToLower(filepath.Ext(path)))
}

// sentence starts s with a capital letter and ends it with a full stop.
func sentence(s string) string {
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// newPendingRow is the row over the message box that shows the pictures
// waiting for the next message, with a button that takes them off.
func (v *chatView) newPendingRow() fyne.CanvasObject {
	v.pendingThumbs = container.NewHBox()
	rm := widget.NewButtonWithIcon("Remove pictures", theme.CancelIcon(), func() {
		v.Pictures = nil
		v.Phase.SetText("")
		v.showPending()
		v.showEstimate()
	})
	rm.Importance = widget.LowImportance
	v.pendingRow = container.NewBorder(nil, nil, nil, rm, v.pendingThumbs)
	v.pendingRow.Hide()
	return v.pendingRow
}

// showPending shows the pictures waiting for the next message.
func (v *chatView) showPending() {
	if v.pendingRow == nil {
		return
	}
	v.pendingThumbs.Objects = pictureThumbs(v.Pictures, pendingSize).Objects
	v.pendingThumbs.Refresh()
	if len(v.Pictures) == 0 {
		v.pendingRow.Hide()
	} else {
		v.pendingRow.Show()
	}
	if v.Root != nil {
		v.Root.Refresh() // the row over the message box changed height
	}
}

// pictureThumbs is a row of thumbnails of pictures (files' bytes), side
// at most size; hidden when there are none. A picture that cannot be
// decoded shows as a broken-image icon.
func pictureThumbs(pictures [][]byte, size float32) *fyne.Container {
	row := container.NewHBox()
	for _, data := range pictures {
		var o *canvas.Image
		if img, _, err := image.Decode(bytes.NewReader(data)); err == nil {
			o = canvas.NewImageFromImage(img)
		} else {
			o = canvas.NewImageFromResource(theme.BrokenImageIcon())
		}
		o.FillMode = canvas.ImageFillContain
		o.ScaleMode = canvas.ImageScaleSmooth
		o.SetMinSize(fyne.NewSize(size, size))
		row.Add(o)
	}
	if len(pictures) == 0 {
		row.Hide()
	}
	return row
}
