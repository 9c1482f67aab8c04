# k3 — the two commands that matter: `make run` and `make test`.
GO      ?= go
BIN     := bin/k3
# count-based: a duration -fuzztime trips a Go 1.26 coordinator race (golang/go#75804)
FUZZTIME ?= 2000x

.PHONY: all build run test vet fmt-check fuzz bench clean gui-check package faults race

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
test: fmt-check vet
	$(GO) test -count=1 -timeout 15m ./...
	@$(MAKE) --no-print-directory faults
	@if command -v xvfb-run >/dev/null 2>&1; then $(MAKE) --no-print-directory gui-check; \
	else echo "xvfb-run not found: skipping the real-window check (apt-get install xvfb x11-apps)"; fi
	@$(MAKE) --no-print-directory fuzz

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

# A desktop package (Linux: k3.tar.xz) with the fyne tool, from FyneApp.toml.
FYNE ?= $(shell command -v fyne 2>/dev/null || echo $(HOME)/go/bin/fyne)
package:
	@test -x "$(FYNE)" || $(GO) install fyne.io/tools/cmd/fyne@v1.7.4
	$(FYNE) package --release

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

# The race detector over the packages where it runs in a few minutes
# (the GUI's cgo tests are left out); .ci/run runs it after make test.
RACE_PKGS ?= ./engine/... ./storage/... ./tokenizer/... ./kernels/... ./doctor/... ./ui/cli/... ./tools/faults/...
race:
	$(GO) test -race -count=1 -timeout 30m $(RACE_PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x ./kernels/...

clean:
	rm -rf bin
