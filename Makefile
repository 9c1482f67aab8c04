# k3 — the two commands that matter: `make run` and `make test`.
GO      ?= go
BIN     := bin/k3
FUZZTIME ?= 5s

.PHONY: all build run test vet fmt-check fuzz bench clean

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
	@$(MAKE) --no-print-directory fuzz

fuzz:
	@bash tools/fuzz-all.sh $(FUZZTIME)

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x ./kernels/...

clean:
	rm -rf bin
