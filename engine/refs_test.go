package engine

import (
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fileRefs type-checks the engine package (tests excluded) and returns, per
// file, the files whose package-level names, methods and fields it uses.
func fileRefs(t *testing.T) map[string]map[string]bool {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool on PATH")
	}
	out, err := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}", ".").Output()
	require.NoError(t, err, "go list -export")
	exports := map[string]string{}
	for _, l := range strings.Fields(string(out)) {
		if p, f, ok := strings.Cut(l, "="); ok && f != "" {
			exports[p] = f
		}
	}
	pkg, err := build.ImportDir(".", 0)
	require.NoError(t, err)
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		files = append(files, f)
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		return os.Open(exports[path])
	})
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	self, err := (&types.Config{Importer: imp}).Check("k3/engine", fset, files, info)
	require.NoError(t, err)
	refs := map[string]map[string]bool{}
	for id, obj := range info.Uses {
		// package-level names, and methods and fields (no scope of their own)
		if obj.Pkg() != self || obj.Parent() != self.Scope() && obj.Parent() != nil {
			continue
		}
		from, to := filepath.Base(fset.File(id.Pos()).Name()), filepath.Base(fset.File(obj.Pos()).Name())
		if from != to {
			if refs[from] == nil {
				refs[from] = map[string]bool{}
			}
			refs[from][to] = true
		}
	}
	return refs
}

// generationFiles are the generation (Engine.Generate and its phases) and
// specFiles speculative decoding, from its top down: the draft
// simulator, the draft controller with verify and rewind, the draft
// model's forward, the draft model.
var (
	generationFiles = []string{"generate.go", "generate_trace.go"}
	specFiles       = []string{"spec_sim.go", "spec.go", "spec_draftfwd.go", "spec_draft.go"}
)

// TestEngineFilesPointDown: inside the engine package, the generation is
// the top (no other file uses its names: it calls into speculative
// decoding, never the other way), and speculative decoding's files use
// only the ones below them in specFiles. Every file named is checked to
// exist, so a rename fails here rather than passing unchecked.
func TestEngineFilesPointDown(t *testing.T) {
	refs := fileRefs(t)
	for _, f := range slices.Concat(generationFiles, specFiles) {
		require.FileExists(t, f)
	}
	for from, to := range refs {
		for _, g := range generationFiles {
			if !slices.Contains(generationFiles, from) {
				assert.False(t, to[g], "%s uses names of the generation's %s", from, g)
			}
		}
	}
	for i, from := range specFiles {
		for _, above := range specFiles[:i] {
			assert.False(t, refs[from][above], "%s uses names of %s, above it", from, above)
		}
	}
	assert.True(t, refs["generate.go"]["spec.go"], "the generation calls speculative decoding")
	assert.True(t, refs["spec_draft.go"] != nil, "the reference graph is empty")
}
