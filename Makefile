# k3 — the two commands that matter: `make run` and `make test`.
GO      ?= go
BIN     := bin/k3
# count-based: a duration -fuzztime trips a Go 1.26 coordinator race (golang/go#75804)
FUZZTIME ?= 2000x

.PHONY: all build run test vet fmt-check sdk-check fuzz bench clean gui-check package package-linux package-windows package-headless package-darwin platform-check faults race

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

# Every test, the fault matrix's fast subset, then each fuzz target briefly.
test: fmt-check vet sdk-check
	$(GO) test -count=1 -timeout 15m ./...
	@$(MAKE) --no-print-directory faults
	@if command -v xvfb-run >/dev/null 2>&1; then $(MAKE) --no-print-directory gui-check; \
	else echo "xvfb-run not found: skipping the real-window check (apt-get install xvfb x11-apps)"; fi
	@$(MAKE) --no-print-directory fuzz

# The SDK conformance tests (ui/serve, ui/cli) skip without Node.js and the
# official clients; go test says so only under -v, so say it here.
SDK_DIR = tools/openai-conformance
sdk-check:
	@if ! command -v node >/dev/null 2>&1; then \
		echo "SKIP: the SDK conformance tests will not run: node is not installed (apt-get install nodejs npm)"; \
	else for p in openai @anthropic-ai/sdk; do \
		if [ ! -f $(SDK_DIR)/node_modules/$$p/package.json ]; then \
			echo "SKIP: the SDK conformance tests will not run: the $$p client is not installed (run npm ci in $(SDK_DIR))"; fi; \
	done; fi

# The desktop app in a real window under Xvfb, on a 1024x640 and on a
# 1280x800 screen: a first start walks every wizard step with the demo model
# and a chat turn, checks that the window fits the screen and every button
# of each step is inside it, and saves one screenshot per step and size in
# $(SHOTS).
SHOTS ?= bin/gui-check
GUI_SCREENS ?= 1024x640 1280x800
gui-check:
	@mkdir -p $(SHOTS)
	@for s in $(GUI_SCREENS); do \
		echo "gui-check at $$s"; \
		K3_SCREEN=$$s K3_GUI_CHECK=$(abspath $(SHOTS)) xvfb-run -a -s "-screen 0 $${s}x24" \
			$(GO) test -count=1 -tags xvfb -run TestRealWindow ./ui/gui/ || exit 1; \
	done

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

# The fault matrix (tools/faults): real k3 processes against damaged
# checkpoints, trunks, state files and histories, kills, full disks,
# concurrent writers and a loopback hub; a table of case, expected, actual
# and exit code. make test runs the fast subset; `make faults FAULTS=` runs
# every case (the tmpfs cases need root and are skipped otherwise).
FAULTS ?= -quick
faults:
	$(GO) run ./tools/faults $(FAULTS)

# The race detector over every package; .ci/run runs it after make test.
# ui/gui is in: its tests drive Fyne's test driver from one goroutine at a
# time (the UI lock in fakes_test.go; a background job's hand-over after
# its test ended is dropped) and the app's timers run through a clock the
# tests advance (later.go), so no test's leftovers lay out widgets beside
# the next one.
RACE_PKGS ?= ./...
race:
	$(GO) test -race -count=1 -timeout 45m $(RACE_PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x ./kernels/...

clean:
	rm -rf bin
