// Package demo holds the k3 demo model: a small Kimi K3 with the real tensor
// graph (KDA and gated NoPE MLA layers, Attention Residuals, a dense first
// layer, Stable LatentMoE with MXFP4 routed experts and a shared expert,
// SiTU-GLU, untied head) in the released layout, trained by
// tools/demo/train.py on fortune cookies from Debian's fortunes package so
// that it answers in the K3 chat format with a short thinking section and a
// saying, and stops by itself; tools/demo/train_vision.py gave it a tiny
// vision tower and taught it to name the colour and shape of a simple
// drawing ("I see a red circle."; "I do not see a picture." when none is
// attached) and to answer at once with thinking off. It is embedded in the
// binary; Write puts it into a folder the engine opens like any checkpoint.
package demo

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"k3/storage/atomicfile"
)

//go:embed model/config.json model/*.safetensors model/model.safetensors.index.json model/tiktoken.model model/tokenizer_config.json
//go:embed draft/config.json draft/model.safetensors
var files embed.FS

// DraftDir is the folder, inside the demo folder, of the demo model's
// DSpark draft model (docs/DSPARK.md), trained by tools/demo/train_draft.py
// on the demo model's hidden states: k3 run|chat|serve DIR --draft
// DIR/draft drafts with it.
const DraftDir = "draft"

// Marker is the file that labels a folder as the demo checkpoint.
const Marker = "K3-DEMO.txt"

// Notice is the marker's text.
const Notice = `This folder holds the k3 DEMO model: the Kimi K3 tensor graph at a tiny size
(2.1 million parameters, a vision tower included), trained briefly on fortune
cookies from Debian's fortunes package and on drawings of coloured shapes. It
answers in the K3 chat format with a short thinking section and a saying, and
names the colour and shape of a simple drawing, but it knows nothing else: its
text is not meaningful beyond that. Delete the folder at any time; k3 writes it again when
asked (k3 demo DIR, or "Use the demo model" in the app).
`

// Names are the files Write puts into a folder besides the marker, the
// draft model's as DraftDir/NAME.
func Names() []string {
	var out []string
	for _, d := range []string{"model", DraftDir} {
		ents, err := fs.ReadDir(files, d)
		if err != nil {
			panic(err) // the embedded tree is fixed at build time
		}
		for _, e := range ents {
			if d == "model" {
				out = append(out, e.Name())
			} else {
				out = append(out, path.Join(d, e.Name()))
			}
		}
	}
	return out
}

// embedded is the path in the embedded tree of a name of Names.
func embedded(name string) string {
	if path.Dir(name) == DraftDir {
		return name
	}
	return path.Join("model", name)
}

// Size is the number of bytes Write puts into a folder.
func Size() int64 {
	var n int64
	for _, name := range Names() {
		fi, err := fs.Stat(files, embedded(name))
		if err != nil {
			panic(err)
		}
		n += fi.Size()
	}
	return n + int64(len(Notice))
}

// Write writes the demo checkpoint (config.json, the safetensors shards and
// their index), its tokenizer (tiktoken.model, tokenizer_config.json), its
// draft model (DraftDir) and the marker into dir, creating it if needed.
// Every file is written atomically and the marker last, so a folder with
// the marker is complete.
func Write(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, DraftDir), 0o755); err != nil {
		return err
	}
	for _, name := range Names() {
		data, err := files.ReadFile(embedded(name))
		if err != nil {
			return err
		}
		if err := atomicfile.Write(filepath.Join(dir, filepath.FromSlash(name)), data); err != nil {
			return fmt.Errorf("demo model: %w", err)
		}
	}
	if err := atomicfile.Write(filepath.Join(dir, Marker), []byte(Notice)); err != nil {
		return fmt.Errorf("demo model: %w", err)
	}
	return nil
}
