# k3 — the two commands that matter: `make run` and `make test`.
GO      ?= go
BIN     := bin/k3
# count-based: a duration -fuzztime trips a Go 1.26 coordinator race (golang/go#75804)
FUZZTIME ?= 2000x

.PHONY: all build run test vet fmt-check fuzz bench clean gui-check package package-linux package-windows package-headless package-darwin platform-check

all: build

build:
	$(GO) build -o $(BIN) .

# Sets up what the desktop app needs (system packages for Fyne when we have
# the rights, otherwise the exact command is printed) and opens the app.
run:
	@bash tools/setup-desktop.sh
	$(GO) build -o $(BIN) .
	./$(BIN)

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# Every test, then each fuzz target briefly.
test: fmt-check vet
	$(GO) test -count=1 -timeout 15m ./...
	@if command -v xvfb-run >/dev/null 2>&1; then $(MAKE) --no-print-directory gui-check; \
	else echo "xvfb-run not found: skipping the real-window check (apt-get install xvfb x11-apps)"; fi
	@$(MAKE) --no-print-directory fuzz

# The desktop app in a real window under Xvfb: opens the demo model, drives
# one chat turn, saves a screenshot of the chat with gauges ($(SHOT)).
SHOT ?= bin/gui-check.png
gui-check:
	@mkdir -p $(dir $(SHOT))
	K3_SCREENSHOT=$(abspath $(SHOT)) xvfb-run -a -s "-screen 0 1280x800x24" \
		$(GO) test -count=1 -tags xvfb -run TestRealWindow ./ui/gui/

# Packages, one per platform (docs/PLATFORMS.md):
#   package-linux    k3.tar.xz, the Fyne desktop package (fyne package)
#   package-windows  bin/k3.exe, the desktop app and CLI for windows/amd64,
#                    cross-built with MinGW-w64 (Debian gcc-mingw-w64-x86-64)
#   package-darwin   the macOS .app: needs a Mac (Fyne links Cocoa and
#                    OpenGL through Xcode's SDK); prints the steps
#   package-headless bin/k3-headless-OS-ARCH[.exe]: the CLI without the
#                    window for every platform (no cgo, no Fyne)
FYNE ?= $(shell command -v fyne 2>/dev/null || echo $(HOME)/go/bin/fyne)
MINGW_CC ?= x86_64-w64-mingw32-gcc
HEADLESS_TARGETS ?= linux/amd64 linux/arm64 darwin/arm64 darwin/amd64 windows/amd64 windows/arm64
package: package-linux package-windows package-headless package-darwin

package-linux:
	@test -x "$(FYNE)" || $(GO) install fyne.io/tools/cmd/fyne@v1.7.4
	$(FYNE) package --release

package-windows:
	@command -v $(MINGW_CC) >/dev/null || { echo "package-windows needs MinGW-w64: apt-get install gcc-mingw-w64-x86-64"; exit 1; }
	@mkdir -p bin
	CC=$(MINGW_CC) CGO_ENABLED=1 GOOS=windows GOARCH=amd64 $(GO) build -o bin/k3.exe .

package-headless:
	@mkdir -p bin
	@for t in $(HEADLESS_TARGETS); do \
	  os=$${t%/*}; arch=$${t#*/}; ext=; [ $$os = windows ] && ext=.exe; \
	  echo "CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -tags headless -o bin/k3-headless-$$os-$$arch$$ext ."; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -tags headless -o bin/k3-headless-$$os-$$arch$$ext . || exit 1; \
	done

package-darwin:
	@echo "macOS k3.app (on a Mac with Xcode's command line tools and Go; not buildable here):"
	@echo "  go install fyne.io/tools/cmd/fyne@v1.7.4"
	@echo "  fyne package -os darwin --release          # k3.app for this Mac's architecture"
	@echo "  (headless CLI for macOS, from any machine: make package-headless)"

# The other platforms from this machine: cross builds and vet, the Windows
# .exe, linux/arm64 tests under qemu and windows tests under Wine (slow:
# CI runs it after `make test`).
platform-check:
	@bash tools/platform-check.sh

fuzz:
	@bash tools/fuzz-all.sh $(FUZZTIME)

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x ./kernels/...

clean:
	rm -rf bin
