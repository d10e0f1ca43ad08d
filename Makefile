# memreport build. `make` builds ./memreport; see README.md for the other targets.

CC      ?= cc
PKGS_MSGPACK := $(shell pkg-config --exists msgpack-c 2>/dev/null && echo msgpack-c || echo msgpack)
PKGS    := libzip $(PKGS_MSGPACK) libcmark libpng zlib
DEPS_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
DEPS_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN    := -Wall -Wextra -Wshadow -Wconversion -Wmissing-prototypes -Wstrict-prototypes \
           -Wformat=2 -Wno-format-nonliteral
OPT     ?= -O2 -g
CFLAGS  ?=
CFLAGS  += -std=c11 -D_GNU_SOURCE $(OPT) $(WARN) $(DEPS_CFLAGS) -Isrc -Ibuild/$(VARIANT)
LDLIBS  += $(DEPS_LIBS) -lm -lpthread

VARIANT ?= release
BUILD   := build/$(VARIANT)
BIN     ?= memreport

SRC     := $(sort $(wildcard src/*.c))
LIBSRC  := $(filter-out src/main.c,$(SRC))
TEMPLATES := $(sort $(shell find templates -type f 2>/dev/null))
OBJ_LIB := $(LIBSRC:src/%.c=$(BUILD)/%.o) $(BUILD)/templates_data.o
OBJ_MAIN := $(BUILD)/main.o

TEST_SRC := $(sort $(wildcard tests/test_*.c))
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

.PHONY: all demo check asan test-bins clean deps bench fuzz format format-check install

MAN     := docs/memreport.1

all: deps-check $(BIN) $(MAN)

# Fails with the exact install line when a library is missing (make demo installs them as root).
deps-check:
	@sh tools/deps.sh check

deps:
	@sh tools/deps.sh install

$(BIN): $(OBJ_LIB) $(OBJ_MAIN)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS)

$(BUILD)/%.o: src/%.c $(wildcard src/*.h) | $(BUILD)
	$(CC) $(CFLAGS) -c -o $@ $<

# Templates are compiled into the binary so memreport is one file.
$(BUILD)/templates_data.c: $(TEMPLATES) tools/embed.sh | $(BUILD)
	sh tools/embed.sh $(TEMPLATES) > $@

$(BUILD)/templates_data.o: $(BUILD)/templates_data.c
	$(CC) $(CFLAGS) -Wno-missing-prototypes -c -o $@ $<

$(BUILD):
	mkdir -p $(BUILD)/tests

$(BUILD)/tests/test_%: tests/test_%.c $(OBJ_LIB) tests/testutil.h | $(BUILD)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(OBJ_LIB) $(LDFLAGS) $(LDLIBS) -lcmocka

test-bins: $(TEST_BIN)

# The man page is written in Markdown and rendered with libcmark's man renderer.
build/md2man: tools/md2man.c
	mkdir -p build
	$(CC) -std=c11 -O2 $(WARN) $(DEPS_CFLAGS) -o $@ $< $(DEPS_LIBS)

$(MAN): docs/memreport.1.md build/md2man
	build/md2man MEMREPORT 1 "memreport 0.1.0" < $< > $@.part && mv $@.part $@

demo: deps
	$(MAKE) $(BIN)
	./$(BIN) samples/oom_fragmentation.pickle samples/oom_fragmentation.log -o demo-report.html
	@echo "Report written to demo-report.html (open it in a browser)."

check: deps-check $(BIN) test-bins
	@sh tests/run.sh $(BUILD) ./$(BIN)

# ASan + UBSan build of everything, then the whole test suite under it.
asan:
	$(MAKE) VARIANT=asan BIN=build/asan/memreport \
		OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
		LDFLAGS="-fsanitize=address,undefined" check

bench: $(BIN)
	@python3 tools/bench.py ./$(BIN)

format:
	clang-format -i src/*.c src/*.h tests/*.c tests/*.h

format-check:
	clang-format --dry-run --Werror src/*.c src/*.h tests/*.c tests/*.h

PREFIX ?= /usr/local
install: $(BIN) $(MAN)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/memreport
	install -m 644 $(MAN) $(DESTDIR)$(PREFIX)/share/man/man1/memreport.1

clean:
	rm -rf build memreport demo-report.html $(MAN)
