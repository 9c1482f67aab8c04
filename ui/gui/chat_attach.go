package gui

import (
	"io"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// maxPictureFile is the largest picture file the app reads (as k3 serve).
const maxPictureFile = 32 << 20

// newAttachButton is the button that picks a picture for the next message.
func (v *chatView) newAttachButton() *widget.Button {
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
	d.SetFilter(storage.NewExtensionFileFilter([]string{".png", ".jpg", ".jpeg", ".gif", ".webp"}))
	d.Show()
}

// attachPicture reads a picture and says what happened in plain words.
func (v *chatView) attachPicture(r io.Reader) {
	data, err := io.ReadAll(io.LimitReader(r, maxPictureFile+1))
	if err != nil {
		v.Notice.SetText("The picture could not be read.")
		return
	}
	if len(data) > maxPictureFile {
		v.Notice.SetText("That picture file is larger than 32 MB; choose a smaller one.")
		return
	}
	what, err := v.AttachPicture(data)
	if err != nil {
		v.Notice.SetText(err.Error())
		return
	}
	v.Notice.SetText("")
	v.Phase.SetText(what + " attached: " + v.PictureNote())
	v.showEstimate() // what the picture adds to the message's cost
}
