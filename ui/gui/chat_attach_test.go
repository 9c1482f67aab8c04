package gui

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/chat"
)

// TestAttachPicture: a picture read for the next message is named in plain
// words and goes with it (kept in the conversation's history); one k3
// cannot read is told, and nothing is attached.
func TestAttachPicture(t *testing.T) {
	_, v := chatUI(t, &fakeChat{})
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, image.NewGray(image.Rect(0, 0, 30, 20))))
	ui(func() {
		v.attachPicture(strings.NewReader("no picture here"))
		assert.Contains(t, v.Notice.Text, "This picture cannot be used: unknown image format")
		assert.Empty(t, v.Pictures)
		v.attachPicture(bytes.NewReader(b.Bytes()))
		assert.Empty(t, v.Notice.Text)
		assert.Equal(t, "a 30 x 20 picture attached: 1 picture will go with your next message", v.Phase.Text)
		assert.NotNil(t, findButton(v.Root, "Picture…"), "the attach button is on the chat screen")
		v.Send("What is in it?")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		require.NotEmpty(t, v.History)
		assert.Equal(t, [][]byte{b.Bytes()}, v.History[0].Images)
		assert.Empty(t, v.Pictures)
	})
}

// redPNG writes a w x h red PNG at dir/name and returns its path and bytes.
func redPNG(t *testing.T, dir, name string, w, h int) (string, []byte) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{R: 0xe0, A: 0xff})
		}
	}
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, b.Bytes(), 0o644))
	return p, b.Bytes()
}

// redPixels counts the strongly red pixels of o's area in a capture.
func redPixels(c fyne.Canvas, o fyne.CanvasObject) int {
	img := c.Capture()
	pos := fyne.CurrentApp().Driver().AbsolutePositionForObject(o)
	scale := float32(img.Bounds().Dx()) / c.Size().Width
	r := image.Rect(int(pos.X*scale), int(pos.Y*scale), int((pos.X+o.Size().Width)*scale), int((pos.Y+o.Size().Height)*scale))
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			if cr>>8 > 0xc0 && cg>>8 < 0x40 && cb>>8 < 0x40 {
				n++
			}
		}
	}
	return n
}

// #40 item 4, #41 item 6: pictures dropped on the window and pasted as
// copied files go with the next message; each shows as a thumbnail beside
// the message box, then in the message, and again when the saved
// conversation is opened; the Markdown export embeds them. What cannot be
// used is said in plain words.
func TestPicturesDropPasteThumbnailsHistoryExport(t *testing.T) {
	u, v := chatUI(t, &fakeChat{})
	dir := t.TempDir()
	dropped, droppedData := redPNG(t, dir, "drop.png", 64, 48)
	pasted, pastedData := redPNG(t, dir, "paste.PNG", 40, 40)
	ui(func() {
		v.dropped(fyne.NewPos(10, 10), []fyne.URI{storage.NewFileURI(dropped)})
		assert.Empty(t, v.Notice.Text)
		assert.Equal(t, "a 64 x 48 picture attached: 1 picture will go with your next message", v.Phase.Text)
		cb := u.App.Clipboard()
		cb.SetContent("file://" + pasted)
		v.Entry.TypedShortcut(&fyne.ShortcutPaste{Clipboard: cb})
		assert.Equal(t, "", v.Entry.Text, "a copied picture file is attached, not typed")
		require.Len(t, v.Pictures, 2)
		assert.True(t, v.pendingRow.Visible())
		assert.Len(t, v.pendingThumbs.Objects, 2)
		assert.Greater(t, redPixels(u.Win.Canvas(), v.pendingThumbs), 500, "the waiting pictures show as thumbnails")
		cb.SetContent("plain words")
		v.Entry.TypedShortcut(&fyne.ShortcutPaste{Clipboard: cb})
		assert.Equal(t, "plain words", v.Entry.Text, "other text is pasted as text")
		v.Entry.SetText("")
		v.Send("What is in these pictures?")
		assert.False(t, v.pendingRow.Visible(), "the pictures went with the message")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	title := ""
	ui(func() {
		require.Len(t, v.History, 2)
		assert.Equal(t, [][]byte{droppedData, pastedData}, v.History[0].Images)
		thumbs := v.Views[0].Root.Objects[1].(*fyne.Container)
		assert.True(t, thumbs.Visible())
		assert.Len(t, thumbs.Objects, 2)
		assert.Greater(t, redPixels(u.Win.Canvas(), thumbs), 2000, "the message shows its pictures")
		md := chat.Markdown(v.Title, v.History)
		assert.Contains(t, md, "![picture 1](data:image/png;base64,"+base64.StdEncoding.EncodeToString(droppedData)+")")
		assert.Contains(t, md, "![picture 2](data:image/png;base64,"+base64.StdEncoding.EncodeToString(pastedData)+")")
		title = v.Title
		v.NewConversation()
		v.Open(title)
		require.Len(t, v.Views, 2)
		reopened := v.Views[0].Root.Objects[1].(*fyne.Container)
		assert.Len(t, reopened.Objects, 2, "the saved conversation shows its pictures again")
		assert.Greater(t, redPixels(u.Win.Canvas(), reopened), 2000)
	})
	h, err := chat.LoadHistory(filepath.Join(u.conversationsDir(), title+".jsonl"))
	require.NoError(t, err)
	assert.Equal(t, [][]byte{droppedData, pastedData}, h[0].Images, "the pictures are kept in the saved history")
}

// Pictures k3 cannot use are refused in plain words, nothing attached: a
// damaged file, a file that is not a picture, and any picture for a model
// without a vision part.
func TestPictureErrorsInPlainWords(t *testing.T) {
	u, v := chatUI(t, &fakeChat{})
	dir := t.TempDir()
	_, data := redPNG(t, dir, "ok.png", 20, 20)
	cut := filepath.Join(dir, "cut.png")
	require.NoError(t, os.WriteFile(cut, data[:len(data)/2], 0o644))
	txt := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(txt, []byte("hello"), 0o644))
	ui(func() {
		v.dropped(fyne.Position{}, []fyne.URI{storage.NewFileURI(cut)})
		assert.Contains(t, v.Notice.Text, "This picture cannot be used: the PNG image is damaged or cut short")
		v.dropped(fyne.Position{}, []fyne.URI{storage.NewFileURI(txt)})
		assert.Equal(t, "notes.txt is not a picture k3 reads: it takes PNG, JPEG, GIF and WebP files.", v.Notice.Text)
		assert.Empty(t, v.Pictures)
	})
	require.NoError(t, os.WriteFile(filepath.Join(u.S.ModelDir, "config.json"), []byte(`{"model_type":"kimi_k3"}`), 0o644))
	ui(func() {
		v.dropped(fyne.Position{}, []fyne.URI{storage.NewFileURI(filepath.Join(dir, "ok.png"))})
		assert.Equal(t, "This model cannot look at pictures: its folder has no vision part. Send text only, or choose a model that can see pictures.", v.Notice.Text)
		assert.Empty(t, v.Pictures)
	})
}
