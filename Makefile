# memreport build. `make` builds ./memreport; see README.md for the other targets.

CC      ?= cc
PKGS_MSGPACK := $(shell pkg-config --exists msgpack-c 2>/dev/null && echo msgpack-c || echo msgpack)
PKGS    := libzip $(PKGS_MSGPACK) libcmark libpng zlib liblzma
DEPS_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
DEPS_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN    := -Wall -Wextra -Wshadow -Wconversion -Wmissing-prototypes -Wstrict-prototypes \
           -Wformat=2 -Wno-format-nonliteral \
           -Werror=int-conversion -Werror=incompatible-pointer-types \
           -Werror=implicit-function-declaration
OPT     ?= -O3 -g
CFLAGS  ?=
CFLAGS  += -std=c11 -D_GNU_SOURCE $(OPT) $(WARN) $(DEPS_CFLAGS) -Isrc
LDLIBS  += $(DEPS_LIBS) -lm -lpthread

VARIANT ?= release
BUILD   := build/$(VARIANT)
BIN     ?= memreport

# One folder per pipeline stage (docs/architecture.md); every source file is in one of them.
SRC     := $(sort $(wildcard src/*/*.c))
LIBSRC  := $(filter-out src/cmd/main.c,$(SRC))
TEMPLATES := $(sort $(shell find templates -type f 2>/dev/null))
OBJ_LIB := $(LIBSRC:src/%.c=$(BUILD)/%.o) $(BUILD)/templates_data.o
OBJ_MAIN := $(BUILD)/cmd/main.o

TEST_SRC := $(sort $(wildcard tests/test_*.c))
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

.PHONY: all demo check asan test-bins clean deps bench fuzz format format-check install golden FORCE

MAN     := docs/memreport.1

all: deps-check $(BIN) $(MAN)

# Fails with the exact install line when a library is missing (make demo installs them as root).
deps-check:
	@sh tools/deps.sh check

deps:
	@sh tools/deps.sh install

$(BIN): $(OBJ_LIB) $(OBJ_MAIN)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS)

# Headers are included by their stage path ("decode/pickle.h"); -MMD keeps the dependencies.
$(BUILD)/%.o: src/%.c | $(BUILD)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

-include $(SRC:src/%.c=$(BUILD)/%.d)

# Templates are compiled into the binary so memreport is one file. The list of their names is
# a prerequisite too, so that a template added, removed or renamed is embedded again.
$(BUILD)/templates.list: FORCE | $(BUILD)
	@echo '$(TEMPLATES)' | cmp -s - $@ || echo '$(TEMPLATES)' > $@

FORCE:

$(BUILD)/templates_data.c: $(TEMPLATES) tools/embed.sh $(BUILD)/templates.list | $(BUILD)
	sh tools/embed.sh $(TEMPLATES) > $@

$(BUILD)/templates_data.o: $(BUILD)/templates_data.c
	$(CC) $(CFLAGS) -Wno-missing-prototypes -c -o $@ $<

$(BUILD):
	mkdir -p $(BUILD)/tests

$(BUILD)/tests/test_%: tests/test_%.c $(OBJ_LIB) | $(BUILD)
	$(CC) $(CFLAGS) -Itests -MMD -MP -o $@ $< $(OBJ_LIB) $(LDFLAGS) $(LDLIBS) -lcmocka

-include $(TEST_BIN:%=%.d)

test-bins: $(TEST_BIN)

# The man page is written in Markdown and rendered with libcmark's man renderer.
build/md2man: tools/md2man.c
	mkdir -p build
	$(CC) -std=c11 -O2 $(WARN) $(DEPS_CFLAGS) -o $@ $< $(DEPS_LIBS)

$(MAN): docs/memreport.1.md build/md2man src/base/version.h
	build/md2man MEMREPORT 1 "memreport $(VERSION)" < $< > $@.part && mv $@.part $@

demo: deps
	$(MAKE) $(BIN) $(MAN)
	./$(BIN) samples/oom_fragmentation.pickle samples/oom_fragmentation.log -o demo-report.html
	@echo "Report written to demo-report.html (open it in a browser)."

# The binary, the test programs and the fuzz replays are built two at a time unless make was
# given its own -j (a fresh clone's `make check` then takes well under a minute on two cores).
check: deps-check
	@$(MAKE) --no-print-directory $(if $(filter -j%,$(MAKEFLAGS)),,-j2) $(BIN) test-bins \
		fuzz-replay-bins
	@sh tests/run.sh $(BUILD) ./$(BIN)

# Regenerates tests/golden/sha256.txt on purpose, after a change of behaviour (see tests/golden.sh).
golden: $(BIN)
	@sh tests/golden.sh ./$(BIN) --update

# ASan + UBSan build of everything, then the whole test suite under it.
asan:
	$(MAKE) VARIANT=asan BIN=build/asan/memreport \
		OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
		LDFLAGS="-fsanitize=address,undefined" check

bench: $(BIN)
	@python3 tools/bench.py ./$(BIN)

FORMAT_FILES = $(wildcard src/*/*.c src/*/*.h tests/*.c tests/*.h tests/fuzz/*.c tools/*.c)

format:
	clang-format -i $(FORMAT_FILES)

format-check:
	clang-format --dry-run --Werror $(FORMAT_FILES)

PREFIX ?= /usr/local
install: $(BIN) $(MAN)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/memreport
	install -m 644 $(MAN) $(DESTDIR)$(PREFIX)/share/man/man1/memreport.1

clean:
	rm -rf build memreport demo-report.html $(MAN)

# ---- fuzzing (see docs/fuzzing.md) ----
# `make fuzz FUZZ_SECONDS=N` runs each libFuzzer target (clang) for N seconds; every target is
# also linked into a plain main() (tests/fuzz/replay_main.c) that `make check` runs over its
# saved corpus with the normal compiler, so every finding stays fixed.
FUZZ_TARGETS := pickle snapshot text pipeline zip
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_BUILD   := build/fuzz
FUZZ_CFLAGS  := -std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer $(WARN) $(DEPS_CFLAGS) -Isrc \
                -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_OBJ     := $(LIBSRC:src/%.c=$(FUZZ_BUILD)/obj/%.o) $(FUZZ_BUILD)/obj/templates_data.o
FUZZ_REPLAY  := $(FUZZ_TARGETS:%=$(BUILD)/fuzz/replay_%)
.SECONDARY: $(FUZZ_OBJ) $(FUZZ_BUILD)/templates_data.c

$(FUZZ_BUILD)/obj/%.o: src/%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<

-include $(wildcard $(FUZZ_BUILD)/obj/*/*.d)

$(FUZZ_BUILD)/templates_data.c: $(TEMPLATES) tools/embed.sh $(BUILD)/templates.list
	@mkdir -p $(@D)
	sh tools/embed.sh $(TEMPLATES) > $@

$(FUZZ_BUILD)/obj/templates_data.o: $(FUZZ_BUILD)/templates_data.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Wno-missing-prototypes -fsanitize=fuzzer-no-link -c -o $@ $<

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJ) $(LDLIBS)

fuzz: $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)
	@for t in $(FUZZ_TARGETS); do \
		sh tests/fuzz/fuzz.sh $(FUZZ_BUILD) $$t $(FUZZ_SECONDS) || exit 1; \
	done

$(BUILD)/fuzz/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/replay_main.c $(OBJ_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ tests/fuzz/fuzz_$*.c tests/fuzz/replay_main.c $(OBJ_LIB) $(LDFLAGS) $(LDLIBS)

fuzz-replay-bins: $(FUZZ_REPLAY)
.PHONY: fuzz-replay-bins

# ---- packages (README "Install"): `make wheel`, `make deb`; `make install` is above ----
# The version is the binary's own (MEMREPORT_VERSION in the sources).
VERSION := $(shell grep -rhs 'define MEMREPORT_VERSION ' src | sed 's/.*"\(.*\)".*/\1/' | head -n 1)
DIST    ?= dist
STRIP   ?= strip
# A python3 that has setuptools and wheel (Debian: python3-setuptools python3-wheel).
PYTHON  ?= $(firstword $(foreach p,python3 /usr/bin/python3,$(shell $(p) -c 'import setuptools, wheel' >/dev/null 2>&1 && echo $(p))))
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 1)
WHEEL_BUILD := build/wheel

# dist/memreport-VERSION-py3-none-PLATFORM.whl: the stripped binary (installed into the
# environment's bin/) and the memreport Python package; no network, no build isolation.
wheel: $(BIN)
	@test -n "$(PYTHON)" || { echo "make wheel: no python3 with setuptools and wheel; install them with:" >&2; \
		echo "  sudo apt-get install -y python3-setuptools python3-wheel" >&2; exit 1; }
	rm -rf $(WHEEL_BUILD) $(DIST)/memreport-*.whl
	mkdir -p $(WHEEL_BUILD)/bin $(DIST)
	$(STRIP) --strip-unneeded -o $(WHEEL_BUILD)/bin/memreport $(BIN)
	cd python && PYTHONWARNINGS=ignore SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) MEMREPORT_BINARY=$(abspath $(WHEEL_BUILD)/bin/memreport) \
		$(PYTHON) setup.py -q build --build-base $(abspath $(WHEEL_BUILD)/build) \
		egg_info --egg-base $(abspath $(WHEEL_BUILD)) \
		bdist_wheel --bdist-dir $(abspath $(WHEEL_BUILD)/bdist) --dist-dir $(abspath $(DIST)) >/dev/null
	@ls $(DIST)/memreport-*.whl

# dist/memreport_VERSION_ARCH.deb with dpkg-deb: /usr/bin/memreport, the man page, the
# copyright file; Depends from dpkg-shlibdeps (dpkg-dev, part of build-essential).
deb: $(BIN) $(MAN)
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) STRIP=$(STRIP) sh tools/mkdeb.sh $(BIN) $(MAN) $(VERSION) $(DIST)

clean: clean-dist
clean-dist:
	rm -f $(DIST)/memreport-*.whl $(DIST)/memreport_*.deb
	rmdir $(DIST) 2>/dev/null || true

.PHONY: wheel deb clean-dist
